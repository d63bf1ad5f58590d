//! The sandbox payment provider: on in the embedded default, absent with PostgreSQL.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, Backend, TestApp};

#[tokio::test]
async fn the_sandbox_approves_and_declines_with_signed_webhooks() {
    let t = TestApp::spawn_on(Backend::Embedded).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;

    let (a, payment) = t.paying(&sale, "alice", 1).await;
    assert_eq!(payment["pay"]["provider"], "sandbox", "{payment}");
    let url = payment["pay"]["url"]
        .as_str()
        .expect("checkout names the sandbox page");
    let resp = t
        .http
        .post(t.url(url))
        .json(&json!({ "outcome": "approve" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    t.wait_for(&a, "alice", "CONFIRMED", Duration::from_secs(5))
        .await;

    let (b, payment) = t.paying(&sale, "bob", 1).await;
    let url = payment["pay"]["url"].as_str().unwrap();
    let resp = t
        .http
        .post(t.url(url))
        .json(&json!({ "outcome": "decline", "delay_ms": 300 }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    assert_eq!(
        t.status(&b, "bob").await["state"],
        "PAYMENT_PENDING",
        "the delay is honoured"
    );
    let expired = t
        .wait_for(&b, "bob", "EXPIRED", Duration::from_secs(5))
        .await;
    assert_eq!(expired["reason"], "payment_failed");
    assert_eq!(t.stats(&sale).await["remaining"], 4);

    let bad = t
        .http
        .post(t.url(url))
        .json(&json!({ "outcome": "maybe" }))
        .send()
        .await
        .unwrap();
    assert_problem(bad, 400, "/problems/malformed-request").await;
    t.stop().await;
}

#[tokio::test]
async fn the_sandbox_is_off_with_postgresql() {
    let t = TestApp::spawn_on(Backend::Servers).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let (_, payment) = t.paying(&sale, "alice", 1).await;
    assert_eq!(payment["provider"], "webhook", "{payment}");
    assert_eq!(
        payment["pay"],
        json!({ "provider": "webhook", "reference": payment["reference"] }),
        "the shop's service is given the reference, no sandbox page"
    );
    let reference = payment["reference"].as_str().unwrap();
    let resp = t
        .admin(Method::POST, &format!("/sandbox/payments/{reference}"))
        .json(&json!({ "outcome": "approve" }))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 404, "/problems/not-found").await;
    t.stop().await;
}
