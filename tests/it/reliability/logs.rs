//! Secrets never reach the logs: the real binary at `debug` level goes through a whole
//! purchase, refused credentials and a bad webhook; none of the secrets, nor the tokens and
//! signatures clients sent, appear in anything it printed.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{
    fresh_database, test_config, SluiceProcess, ADMIN_KEY, USER_SECRET, WEBHOOK_SECRET,
};

#[tokio::test]
async fn secrets_and_credentials_never_reach_the_logs() {
    let mut config = test_config();
    config.ledger.url = fresh_database().await;
    let seed = config.auth.admission_key_seed_hex.clone().unwrap();
    let sluice = SluiceProcess::start(config, "debug").await;
    let http = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", sluice.base);
    let user_token = sluice::auth::UserTokens::from_config(&sluice.config.auth)
        .unwrap()
        .mint(&sluice::domain::UserId::parse("log-reader").unwrap(), 600)
        .unwrap();
    let created: serde_json::Value = http
        .post(url("/v1/sales"))
        .header("X-Admin-Key", ADMIN_KEY)
        .json(&json!({"name": "logs", "quantity": 5, "rate_per_minute": 600000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sale = created["id"].as_str().unwrap();
    let bearer = format!("Bearer {user_token}");
    let joined: serde_json::Value = http
        .post(url(&format!("/v1/sales/{sale}/attempts")))
        .header("Authorization", &bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let attempt = joined["attempt_id"].as_str().unwrap();
    let mut admission_token = String::new();
    for _ in 0..100 {
        let status: serde_json::Value = http
            .get(url(&format!("/v1/attempts/{attempt}")))
            .header("Authorization", &bearer)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(token) = status["admission_token"].as_str() {
            admission_token = token.to_owned();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!admission_token.is_empty(), "admitted");
    let held = http
        .post(url(&format!("/v1/attempts/{attempt}/hold")))
        .header("Authorization", &bearer)
        .json(&json!({"admission_token": admission_token, "quantity": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let paying: serde_json::Value = http
        .post(url(&format!("/v1/attempts/{attempt}/checkout")))
        .header("Authorization", &bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    let body =
        json!({"id": "evt-log", "type": "payment.succeeded", "payment_reference": reference})
            .to_string();
    let signer = sluice::payments::WebhookSigner::new(WEBHOOK_SECRET, 300);
    let signature = signer.sign(chrono::Utc::now().timestamp(), body.as_bytes());
    let ok = http
        .post(url("/v1/webhooks/payments"))
        .header("Sluice-Signature", &signature)
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // Refusals log too: a wrong admin key, a bad signature, a wrong bearer.
    let wrong_key = "wrong-admin-key-0123456789";
    let _ = http
        .request(Method::GET, url(&format!("/v1/sales/{sale}")))
        .header("X-Admin-Key", wrong_key)
        .send()
        .await;
    let _ = http
        .post(url("/v1/webhooks/payments"))
        .header("Sluice-Signature", "t=1,v1=deadbeef")
        .body(body)
        .send()
        .await;
    let _ = http
        .get(url(&format!("/v1/attempts/{attempt}")))
        .header("Authorization", "Bearer not-a-real-token-but-secret-ish")
        .send()
        .await;

    let logs = sluice.logs();
    assert!(
        logs.contains("DEBUG") || logs.contains("INFO"),
        "the log was captured: {logs}"
    );
    for (what, secret) in [
        ("admin key", ADMIN_KEY),
        ("wrong admin key", wrong_key),
        ("user JWT secret", USER_SECRET),
        ("webhook secret", WEBHOOK_SECRET),
        ("admission key seed", seed.as_str()),
        ("user token", user_token.as_str()),
        ("admission token", admission_token.as_str()),
        ("webhook signature", signature.as_str()),
        ("bad bearer", "not-a-real-token-but-secret-ish"),
    ] {
        assert!(!logs.contains(secret), "the {what} is in the logs");
    }
    crate::reliability::record(
        "Secrets in logs (debug level, purchase + refusals)",
        &[
            ("secrets found", "0 of 9".into()),
            ("log lines", logs.lines().count().to_string()),
        ],
    );
}
