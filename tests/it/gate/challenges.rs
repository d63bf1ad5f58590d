//! A gate's challenge, checked server-side with the provider's `siteverify` and the shop's
//! secret, against the stand-ins of `tests/standins` (written from each provider's
//! reference): the documented test keys pass, anything else is refused with a problem and
//! no visitor cookie, so a visitor who failed cannot join the line.

use reqwest::Method;
use serde_json::{json, Value};

use super::gate;
use crate::helpers::{Backend, StandIn, TestApp};

const TURNSTILE_PASSES: &str = "1x0000000000000000000000000000000AA";
const TURNSTILE_FAILS: &str = "2x0000000000000000000000000000000AA";
const TURNSTILE_TOKEN: &str = "XXXX.DUMMY.TOKEN.XXXX";
const HCAPTCHA_SECRET: &str = "0x0000000000000000000000000000000000000000";
const HCAPTCHA_SITE_KEY: &str = "10000000-ffff-ffff-ffff-000000000001";
const HCAPTCHA_RESPONSE: &str = "10000000-aaaa-bbbb-cccc-000000000001";

async fn enter(t: &TestApp, gate: &str, answer: Option<&str>) -> (u16, Option<String>, Value) {
    let body = match answer {
        Some(a) => json!({ "challenge_answer": a }),
        None => json!({}),
    };
    let resp = t
        .http
        .post(format!("{}/v1/gates/{gate}/visitors", t.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let cookie = resp
        .headers()
        .get("set-cookie")
        .map(|c| c.to_str().unwrap().to_owned());
    (status, cookie, resp.json().await.unwrap_or(Value::Null))
}

crate::on_both_configurations!(
    turnstile_is_checked_with_its_siteverify_and_the_shops_secret,
    hcaptcha_is_checked_with_its_siteverify_and_the_shops_secret,
);

async fn turnstile_is_checked_with_its_siteverify_and_the_shops_secret(backend: Backend) {
    let standin = StandIn::start("turnstile/turnstile_standin.py", &[]).await;
    for (secret, passes) in [(TURNSTILE_PASSES, true), (TURNSTILE_FAILS, false)] {
        let verify = format!("{}/turnstile/v0/siteverify", standin.url());
        let t = TestApp::spawn_on_with(backend, |c| {
            c.gate.turnstile_site_key = "1x00000000000000000000AA".into();
            c.gate.turnstile_secret = secret.into();
            c.gate.turnstile_verify_url = crate::helpers::url(verify);
        })
        .await;
        let g = gate(&t, 10, json!({ "challenge": "turnstile" })).await;
        let id = g["id"].as_str().unwrap();
        let entry = t.get_json(&format!("/v1/gates/{id}/entry")).await;
        assert_eq!(entry["challenge"], "turnstile");
        assert_eq!(entry["site_key"], "1x00000000000000000000AA");
        assert!(
            !entry.to_string().contains(secret),
            "the secret is never answered"
        );

        let (status, cookie, body) = enter(&t, id, None).await;
        assert_eq!((status, cookie.is_none()), (403, true), "no answer: {body}");
        assert_eq!(body["type"], "/problems/challenge-failed");
        let (status, cookie, body) = enter(&t, id, Some("made-up")).await;
        assert_eq!(
            (status, cookie.is_none()),
            (403, true),
            "a made-up answer: {body}"
        );
        let (status, cookie, body) = enter(&t, id, Some(TURNSTILE_TOKEN)).await;
        if passes {
            assert_eq!(status, 200, "{body}");
            assert!(cookie.unwrap().starts_with("sluice_visitor="));
            let sale = body["sale_id"].as_str().unwrap();
            let token = body["token"].as_str().unwrap();
            let joined = t
                .http
                .post(format!("{}/v1/sales/{sale}/attempts", t.base))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert!(joined.status().is_success(), "a visitor who passed joins");
            // The same challenge for an API join with the user's own token.
            let path = format!("/v1/sales/{sale}/attempts");
            let bare = t
                .as_user(Method::POST, &path, "api-user")
                .send()
                .await
                .unwrap();
            assert_eq!(bare.status(), 403, "an API join without the answer");
            let answered = t
                .as_user(Method::POST, &path, "api-user")
                .header("Sluice-Challenge-Answer", TURNSTILE_TOKEN)
                .send()
                .await
                .unwrap();
            assert!(
                answered.status().is_success(),
                "an API join with the answer"
            );
            let posing = t
                .as_user(Method::POST, &path, &format!("visitor-{}", "a".repeat(32)))
                .send()
                .await
                .unwrap();
            assert_eq!(posing.status(), 401, "a user token may not name a visitor");
        } else {
            assert_eq!(
                (status, cookie.is_none()),
                (403, true),
                "the failing secret: {body}"
            );
            assert!(
                body["detail"]
                    .as_str()
                    .unwrap()
                    .contains("invalid-input-response"),
                "{body}"
            );
        }
        let last = standin.calls().await.last().unwrap().clone();
        assert_eq!(last["secret"], secret, "sent with the shop's secret");
        assert_eq!(last["remoteip"], "127.0.0.1", "and the visitor's address");
        let metrics = t.metrics().await;
        assert!(
            metrics.contains("sluice_gate_challenges_total{provider=\"Turnstile\""),
            "counted"
        );
        let listed = t.admin_json(Method::GET, "/v1/gates").await;
        assert!(!listed.to_string().contains(secret));
        t.stop().await;
    }
}

async fn hcaptcha_is_checked_with_its_siteverify_and_the_shops_secret(backend: Backend) {
    let standin = StandIn::start("hcaptcha/hcaptcha_standin.py", &[]).await;
    for (site_key, passes) in [
        (HCAPTCHA_SITE_KEY, true),
        ("20000000-ffff-ffff-ffff-000000000002", false),
    ] {
        let verify = format!("{}/siteverify", standin.url());
        let t = TestApp::spawn_on_with(backend, |c| {
            c.gate.hcaptcha_site_key = site_key.into();
            c.gate.hcaptcha_secret = HCAPTCHA_SECRET.into();
            c.gate.hcaptcha_verify_url = crate::helpers::url(verify);
        })
        .await;
        let g = gate(&t, 10, json!({ "challenge": "hcaptcha" })).await;
        let id = g["id"].as_str().unwrap();
        let (status, cookie, _) = enter(&t, id, Some("10000000-aaaa-bbbb-cccc-000000000009")).await;
        assert_eq!((status, cookie.is_none()), (403, true), "a wrong response");
        let (status, cookie, body) = enter(&t, id, Some(HCAPTCHA_RESPONSE)).await;
        if passes {
            assert_eq!(status, 200, "{body}");
            assert!(cookie.is_some());
        } else {
            assert_eq!(
                (status, cookie.is_none()),
                (403, true),
                "another site's key: {body}"
            );
            assert!(
                body["detail"]
                    .as_str()
                    .unwrap()
                    .contains("sitekey-secret-mismatch"),
                "{body}"
            );
        }
        let last = standin.calls().await.last().unwrap().clone();
        assert_eq!(last["sitekey"], site_key, "the site key is sent");
        t.stop().await;
    }
}

/// The waiting page shows the gate's Turnstile widget before the line and joins once it is
/// passed, in Chromium through nginx (`tests/browser/gate-challenge.mjs`); the widget is the
/// stand-in's script, whose origin the page's content policy lets in.
#[tokio::test]
async fn the_waiting_page_shows_the_challenge_before_the_line() {
    let standin = StandIn::start("turnstile/turnstile_standin.py", &[]).await;
    let (verify, script) = (
        format!("{}/turnstile/v0/siteverify", standin.url()),
        format!("{}/turnstile/v0/api.js?render=explicit", standin.url()),
    );
    let t = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.gate.turnstile_site_key = "3x00000000000000000000FF".into();
        c.gate.turnstile_secret = TURNSTILE_PASSES.into();
        c.gate.turnstile_verify_url = crate::helpers::url(verify);
        c.gate.turnstile_script_url = crate::helpers::url(script);
    })
    .await;
    let g = gate(&t, 10, json!({ "challenge": "turnstile" })).await;
    // The line holds still: the visitor stays in it (not admitted and sent on at once).
    let sale = g["sale_id"].as_str().unwrap();
    t.admin(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .send()
        .await
        .unwrap();
    let origin = super::Origin::start().await;
    let proxy = super::Proxy::nginx(super::port_of(&t), origin.port).await;
    let shots = std::env::temp_dir().join(format!(
        "sluice-gate-shots-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let env = vec![
        ("SITE_URL", proxy.url("")),
        ("GATE_ID", g["id"].as_str().unwrap().to_owned()),
        ("SHOTS", shots.display().to_string()),
    ];
    crate::ecosystem::browser::run_script(&t, "gate-challenge.mjs", env).await;
    let last = standin.calls().await.last().unwrap().clone();
    assert_eq!(
        last["response"], TURNSTILE_TOKEN,
        "the widget's answer was checked"
    );
    assert!(std::fs::read(shots.join("gate-challenge.png")).is_ok());
    t.stop().await;
}
