use jsonwebtoken::{encode, Algorithm, EncodingKey, Header, Validation};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

const SECRET: &str = "user-token-test-secret-0123456789";
const NOW: i64 = 1_800_000_000;

fn config(issuer: Option<&str>) -> AuthConfig {
    AuthConfig {
        admin_key: "admin-key-0123456789".into(),
        user_jwt_hs256_secret: Some(SECRET.into()),
        user_jwt_public_key_pem: None,
        user_jwt_issuer: issuer.map(str::to_owned),
        user_oidc_issuer: None,
        user_jwks_url: None,
        user_jwt_audience: None,
        user_issuers: Vec::new(),
        admission_key_seed_hex: None,
    }
}

fn tokens(issuer: Option<&str>) -> UserTokens {
    UserTokens::from_config(&config(issuer)).unwrap()
}

fn signed(alg: Algorithm, secret: &str, claims: &Value) -> String {
    encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn hs256(claims: Value) -> String {
    signed(Algorithm::HS256, SECRET, &claims)
}

fn user(token: &str, tokens: &UserTokens) -> Option<String> {
    tokens
        .verify_at(token, NOW)
        .ok()
        .map(|u| u.as_str().to_owned())
}

#[test]
fn a_minted_token_names_its_user() {
    let tokens = tokens(Some("idp"));
    let minted = tokens.mint(&UserId::parse("alice").unwrap(), 60).unwrap();
    assert_eq!(tokens.verify(&minted).unwrap().as_str(), "alice");
}

#[test]
fn a_token_with_another_header_than_the_usual_one_is_read_whole() {
    let tokens = tokens(None);
    let claims = json!({"sub": "alice", "exp": NOW + 60});
    assert!(user(&hs256(claims.clone()), &tokens).is_some());
    let mut with_kid = Header::new(Algorithm::HS256);
    with_kid.kid = Some("2026-12".into());
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    let token = encode(&with_kid, &claims, &key).unwrap();
    assert_eq!(user(&token, &tokens).as_deref(), Some("alice"));
    let other = encode(&with_kid, &claims, &EncodingKey::from_secret(b"x")).unwrap();
    assert!(user(&other, &tokens).is_none());
}

#[test]
fn expiry_holds_with_the_leeway_and_not_past_it() {
    let tokens = tokens(None);
    for (exp, taken) in [
        (NOW + 60, true),
        (NOW, true),
        (NOW - LEEWAY_SECS, true),
        (NOW - LEEWAY_SECS - 1, false),
    ] {
        let token = hs256(json!({"sub": "alice", "exp": exp}));
        assert_eq!(user(&token, &tokens).is_some(), taken, "exp {exp}");
    }
    // A fractional NumericDate counts too.
    let token = hs256(json!({"sub": "alice", "exp": (NOW + 60) as f64 + 0.5}));
    assert_eq!(user(&token, &tokens).as_deref(), Some("alice"));
}

#[test]
fn a_token_not_signed_by_the_configured_secret_is_refused() {
    let tokens = tokens(None);
    let claims = json!({"sub": "alice", "exp": NOW + 60});
    let good = hs256(claims.clone());
    assert!(user(&good, &tokens).is_some());
    // Another secret; the same secret under another algorithm.
    assert!(user(&signed(Algorithm::HS256, "another", &claims), &tokens).is_none());
    assert!(user(&signed(Algorithm::HS384, SECRET, &claims), &tokens).is_none());
    // The payload swapped for another user's, the signature kept.
    let (head, rest) = good.split_once('.').unwrap();
    let (_, signature) = rest.split_once('.').unwrap();
    let bob = URL_SAFE_NO_PAD.encode(json!({"sub": "bob", "exp": NOW + 60}).to_string());
    assert!(user(&format!("{head}.{bob}.{signature}"), &tokens).is_none());
    // alg "none" with no signature.
    let none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let alice = URL_SAFE_NO_PAD.encode(claims.to_string());
    assert!(user(&format!("{none}.{alice}."), &tokens).is_none());
    for garbage in [
        "",
        ".",
        "..",
        "a.b.c",
        "a.b",
        &format!("{good}x"),
        &good[1..],
    ] {
        assert!(user(garbage, &tokens).is_none(), "{garbage}");
    }
}

#[test]
fn an_audience_when_configured_must_be_named_and_otherwise_none_is_taken() {
    let mut with = config(Some("idp"));
    with.user_jwt_audience = Some("sluice".into());
    let with = UserTokens::from_config(&with).unwrap();
    for aud in [json!("sluice"), json!(["other", "sluice"])] {
        let token = hs256(json!({"sub": "alice", "exp": NOW + 60, "iss": "idp", "aud": aud}));
        assert_eq!(user(&token, &with).as_deref(), Some("alice"), "{aud}");
    }
    for aud in [Some(json!("other")), Some(json!(["other"])), None] {
        let mut claims = json!({"sub": "alice", "exp": NOW + 60, "iss": "idp"});
        if let Some(aud) = &aud {
            claims["aud"] = aud.clone();
        }
        assert!(user(&hs256(claims), &with).is_none(), "{aud:?}");
    }
}

#[test]
fn claims_that_do_not_hold_are_refused() {
    let tokens = tokens(Some("idp"));
    let refused = [
        json!({"sub": "alice"}),
        json!({"exp": NOW + 60, "iss": "idp"}),
        json!({"sub": "alice", "exp": NOW + 60}),
        json!({"sub": "alice", "exp": NOW + 60, "iss": "elsewhere"}),
        json!({"sub": "alice", "exp": NOW + 60, "iss": ["elsewhere"]}),
        json!({"sub": "alice", "exp": NOW + 60, "iss": "idp", "aud": "shop"}),
        json!({"sub": "alice", "exp": -1, "iss": "idp"}),
        json!({"sub": 7, "exp": NOW + 60, "iss": "idp"}),
    ];
    for claims in refused {
        assert!(user(&hs256(claims.clone()), &tokens).is_none(), "{claims}");
    }
    for iss in [json!("idp"), json!(["elsewhere", "idp"])] {
        let token = hs256(json!({"sub": "alice", "exp": NOW + 60, "iss": iss}));
        assert_eq!(user(&token, &tokens).as_deref(), Some("alice"), "{iss}");
    }
    let bad_subject = hs256(json!({"sub": "", "exp": NOW + 60, "iss": "idp"}));
    assert!(matches!(
        tokens.verify_at(&bad_subject, NOW),
        Err(UserTokenError::BadSubject)
    ));
}

#[test]
fn an_ed25519_identity_provider_is_verified_with_its_public_key() {
    use ring::signature::KeyPair;
    let pkcs8 =
        ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    // SubjectPublicKeyInfo of an Ed25519 key: a fixed prefix, then the key.
    let mut spki = hex::decode("302a300506032b6570032100").unwrap();
    spki.extend_from_slice(pair.public_key().as_ref());
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(&spki)
    );
    let mut auth = config(None);
    auth.user_jwt_hs256_secret = None;
    auth.user_jwt_public_key_pem = Some(pem);
    let tokens = UserTokens::from_config(&auth).unwrap();
    let claims = json!({"sub": "alice", "exp": NOW + 60});
    let key = EncodingKey::from_ed_der(pkcs8.as_ref());
    let token = encode(&Header::new(Algorithm::EdDSA), &claims, &key).unwrap();
    assert_eq!(user(&token, &tokens).as_deref(), Some("alice"));
    // Verified once, kept: its claims still hold only until it expires.
    assert_eq!(user(&token, &tokens).as_deref(), Some("alice"));
    assert!(tokens
        .verify_at(&token, NOW + 60 + LEEWAY_SECS + 1)
        .is_err());
    // The same claims under another signature are not the token kept.
    let (signed_part, _) = token.rsplit_once('.').unwrap();
    let forged = format!("{signed_part}.{}", "A".repeat(86));
    assert!(user(&forged, &tokens).is_none());
    // An HS256 token signed with the public key's bytes as the secret (the classic confusion).
    let confused = signed(
        Algorithm::HS256,
        std::str::from_utf8(&spki).unwrap_or("key"),
        &claims,
    );
    assert!(user(&confused, &tokens).is_none());
    assert!(matches!(
        tokens.mint(&UserId::parse("alice").unwrap(), 60),
        Err(UserTokenError::CannotMint)
    ));
}

/// jsonwebtoken's own decode, configured as sluice configured it before checking tokens
/// itself (with `iss` required when an issuer is set).
fn reference(token: &str, issuer: Option<&str>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Claims {
        sub: String,
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = LEEWAY_SECS as u64;
    match issuer {
        Some(iss) => {
            validation.set_required_spec_claims(&["exp", "sub", "iss"]);
            validation.set_issuer(&[iss]);
        }
        None => validation.set_required_spec_claims(&["exp", "sub"]),
    }
    let key = jsonwebtoken::DecodingKey::from_secret(SECRET.as_bytes());
    jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .ok()
        .map(|data| data.claims.sub)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(21),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// On well-typed claims, a token is taken exactly when jsonwebtoken takes it, for the
    /// same user.
    #[test]
    fn the_check_agrees_with_jsonwebtoken(
        sub in prop::option::of(prop::sample::select(vec!["alice", "bob", "user-7"])),
        exp in prop::option::of(prop::sample::select(vec![-3600i64, -60, -3, 3, 3600])),
        iss in prop::sample::select(vec![None, Some(json!("idp")), Some(json!("other")),
            Some(json!(["other", "idp"])), Some(json!(["other"]))]),
        aud in any::<bool>(),
        issuer in prop::option::of(Just("idp")),
        key in prop::sample::select(vec![(Algorithm::HS256, SECRET), (Algorithm::HS256, "x"),
            (Algorithm::HS384, SECRET)]),
    ) {
        let now = chrono::Utc::now().timestamp();
        let mut claims = serde_json::Map::new();
        if let Some(sub) = sub { claims.insert("sub".into(), json!(sub)); }
        if let Some(exp) = exp { claims.insert("exp".into(), json!(now + exp)); }
        if let Some(iss) = iss { claims.insert("iss".into(), iss); }
        if aud { claims.insert("aud".into(), json!("shop")); }
        let token = signed(key.0, key.1, &Value::Object(claims));
        let ours = tokens(issuer).verify(&token).ok().map(|u| u.as_str().to_owned());
        prop_assert_eq!(ours, reference(&token, issuer));
    }
}
