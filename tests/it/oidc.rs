//! User tokens from a real OpenID Provider: panva's `oidc-provider` (npm, OpenID Certified) on
//! loopback (`tests/oidc/provider.mjs`), found by OIDC discovery. Its JWT access tokens (client
//! credentials, RFC 9068: `sub` the client, `aud` the resource) are accepted; another
//! audience, an expired token, `alg: none`, HS256 signed with the public key, are refused; a key
//! rotation at the provider is followed with no restart; with the provider down, the keys
//! already fetched still verify; ES256 and EdDSA keys work as RS256 ones.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::helpers::{free_port, Backend, TestApp};

const AUDIENCE: &str = "https://sluice.test";

/// An oidc-provider of the test's own; its keys stay in `dir` across restarts.
struct OidcProvider {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<std::process::Child>,
}

impl OidcProvider {
    async fn start(keys: &str) -> OidcProvider {
        let dir =
            std::env::temp_dir().join(format!("sluice-oidc-{}", uuid::Uuid::new_v4().simple()));
        let mut provider = OidcProvider {
            port: free_port(),
            dir,
            child: None,
        };
        provider.run(keys).await;
        provider
    }

    /// (Re)starts it with `keys` (comma-separated ids, the first signs).
    async fn run(&mut self, keys: &str) {
        self.stop();
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc/provider.mjs");
        let child = std::process::Command::new("node")
            .arg(script)
            .arg(self.port.to_string())
            .arg(&self.dir)
            .arg(keys)
            .arg("alice,bob,shortlived")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs tests/oidc (scripts/tools installs oidc-provider)");
        self.child = Some(child);
        for _ in 0..200 {
            if reqwest::get(format!("{}/jwks", self.issuer()))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("oidc-provider did not start");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A token of the client credentials grant for `client`, for `resource` (its `aud`).
    async fn token(&self, client: &str, resource: &str) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer()))
            .basic_auth(client, Some(format!("secret-{client}")))
            .form(&[("grant_type", "client_credentials"), ("resource", resource)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("a token: {answer}"))
            .to_owned()
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn trusting(provider: &OidcProvider) -> TestApp {
    let issuer = provider.issuer();
    TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.auth.user_jwt_hs256_secret = None;
        c.auth.user_oidc_issuer = Some(crate::helpers::url(issuer));
        c.auth.user_jwt_audience = Some(AUDIENCE.into());
    })
    .await
}

/// A join with `token`: its status and answer.
async fn joined(t: &TestApp, sale: &str, token: &str) -> (u16, Value) {
    let resp = t
        .http
        .post(t.url(&format!("/v1/sales/{sale}/attempts")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

/// A join with `token`: its status.
async fn join_with(t: &TestApp, sale: &str, token: &str) -> u16 {
    joined(t, sale, token).await.0
}

#[tokio::test]
async fn tokens_of_a_real_openid_provider_are_accepted_and_forged_or_foreign_ones_refused() {
    let mut provider = OidcProvider::start("rsa-1").await;
    let t = trusting(&provider).await;
    let started = std::time::Instant::now();
    let sale = t.create_sale(json!({})).await;
    let alice = provider.token("alice", AUDIENCE).await;
    assert_eq!(join_with(&t, &sale, &alice).await, 202, "its own token");

    let elsewhere = provider.token("bob", "https://other.test").await;
    assert_eq!(
        join_with(&t, &sale, &elsewhere).await,
        401,
        "another audience"
    );

    let short = provider.token("shortlived", AUDIENCE).await;
    tokio::time::sleep(Duration::from_millis(7000)).await;
    assert_eq!(join_with(&t, &sale, &short).await, 401, "expired");

    let (header, rest) = alice.split_once('.').unwrap();
    let (payload, _) = rest.split_once('.').unwrap();
    let none = format!(
        "{}.{payload}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#)
    );
    assert_eq!(join_with(&t, &sale, &none).await, 401, "alg none");
    // HS256 "signed" with the provider's public key, the classic confusion.
    let public = reqwest::get(format!("{}/jwks", provider.issuer()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    let mut hs = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some("rsa-1".into());
    let confused = jsonwebtoken::encode(
        &hs,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(public.as_bytes()),
    )
    .unwrap();
    assert_eq!(
        join_with(&t, &sale, &confused).await,
        401,
        "HS256 with the public key"
    );
    assert!(!header.is_empty());

    // The provider rotates its key: its new tokens are accepted without a restart of sluice,
    // and the old key still verifies the tokens it signed. (Past the refetch limit of the
    // fetch at start: sluice fetches the keys again at most every 10 s.)
    let limit = Duration::from_secs(11);
    tokio::time::sleep(limit.saturating_sub(started.elapsed())).await;
    provider.run("rsa-2,rsa-1").await;
    let bob = provider.token("bob", AUDIENCE).await;
    assert_eq!(
        join_with(&t, &sale, &bob).await,
        202,
        "a token of the new key"
    );
    assert_eq!(
        join_with(&t, &sale, &alice).await,
        202,
        "a token of the old key"
    );

    // The provider goes down: the keys fetched stay in use.
    provider.stop();
    assert_eq!(
        join_with(&t, &sale, &bob).await,
        202,
        "provider down, known key"
    );
    let fetches = t
        .counter("sluice_user_jwks_fetches_total", &[("outcome", "ok")])
        .await;
    assert_eq!(fetches, 2.0, "fetched at start and once at the rotation");
    t.stop().await;
}

#[tokio::test]
async fn es256_and_eddsa_keys_verify_as_rsa_ones_do() {
    for keys in ["ec-1", "ed-1"] {
        let provider = OidcProvider::start(keys).await;
        let t = trusting(&provider).await;
        let sale = t.create_sale(json!({})).await;
        let token = provider.token("alice", AUDIENCE).await;
        assert_eq!(join_with(&t, &sale, &token).await, 202, "{keys}");
        t.stop().await;
    }
}

#[tokio::test]
async fn forged_kids_do_not_make_sluice_hammer_the_provider() {
    let provider = OidcProvider::start("rsa-1").await;
    let t = trusting(&provider).await;
    let sale = t.create_sale(json!({})).await;
    let alice = provider.token("alice", AUDIENCE).await;
    assert_eq!(join_with(&t, &sale, &alice).await, 202);
    let (_, rest) = alice.split_once('.').unwrap();
    for n in 0..20 {
        let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"RS256","kid":"forged-{n}"}}"#));
        assert_eq!(join_with(&t, &sale, &format!("{header}.{rest}")).await, 401);
    }
    let fetched = t
        .counter("sluice_user_jwks_fetches_total", &[("outcome", "ok")])
        .await;
    assert!(fetched <= 2.0, "20 forged kids, {fetched} fetches");
    assert!(
        t.counter(
            "sluice_user_jwks_fetches_total",
            &[("outcome", "rate_limited")]
        )
        .await
            >= 19.0
    );
    t.stop().await;
}

#[tokio::test]
async fn several_issuers_are_trusted_at_once_and_their_users_do_not_collide() {
    let shop = OidcProvider::start("rsa-1").await;
    let kakao = OidcProvider::start("ec-1").await;
    let stranger = OidcProvider::start("rsa-1").await;
    let (shop_issuer, kakao_issuer) = (shop.issuer(), kakao.issuer());
    let t = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.auth.user_jwt_hs256_secret = None;
        c.auth.user_oidc_issuer = Some(crate::helpers::url(shop_issuer));
        c.auth.user_jwt_audience = Some(AUDIENCE.into());
        c.auth.user_issuers = vec![sluice::config::TrustedIssuer {
            issuer: crate::helpers::url(kakao_issuer),
            audience: Some(AUDIENCE.into()),
            user_prefix: "kakao:".into(),
            jwks_url: None,
        }];
    })
    .await;
    let sale = t.create_sale(json!({})).await;
    let mut attempts = Vec::new();
    for provider in [&shop, &kakao] {
        let token = provider.token("alice", AUDIENCE).await;
        let (status, answer) = joined(&t, &sale, &token).await;
        assert_eq!(status, 202, "{answer}");
        attempts.push(answer["attempt_id"].as_str().unwrap().to_owned());
    }
    assert_ne!(
        attempts[0], attempts[1],
        "two providers' alices are two users"
    );
    let foreign = stranger.token("alice", AUDIENCE).await;
    assert_eq!(
        join_with(&t, &sale, &foreign).await,
        401,
        "an issuer not trusted"
    );
    t.stop().await;
}
