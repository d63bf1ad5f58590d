//! Payment webhooks: signatures, replays, re-deliveries, money after expiry.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;

use crate::helpers::{assert_problem, Backend, TestApp, WEBHOOK_SECRET};

crate::on_both_configurations!(
    the_same_webhook_five_times_at_once_confirms_once,
    success_after_expiry_asks_for_a_refund_and_stays_expired,
    failure_after_success_is_ignored,
    bad_signatures_and_stale_timestamps_are_refused_and_change_nothing,
);

/// An attempt in PAYMENT_PENDING; returns (attempt id, payment reference).
async fn paying(t: &TestApp, sale: &str, user: &str) -> (String, String) {
    let (attempt, payment) = t.paying(sale, user, 1).await;
    (attempt, payment["reference"].as_str().unwrap().to_owned())
}

async fn the_same_webhook_five_times_at_once_confirms_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, reference) = paying(&t, &sale, "alice").await;
    let deliveries = (0..5).map(|_| t.webhook("evt_dup", "payment.succeeded", &reference));
    let responses = join_all(deliveries).await;
    let mut results = Vec::new();
    for resp in responses {
        assert_eq!(resp.status(), 200);
        let ack: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(ack["attempt_state"], "CONFIRMED");
        results.push(ack["result"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        results.iter().filter(|r| *r == "applied").count(),
        1,
        "{results:?}"
    );
    assert_eq!(
        results.iter().filter(|r| *r == "duplicate").count(),
        4,
        "{results:?}"
    );
    assert_eq!(t.status(&attempt, "alice").await["state"], "CONFIRMED");
    assert_eq!(t.outbox_count("sluice.attempt.confirmed").await, 1);
    assert_eq!(t.stats(&sale).await["confirmed"], 1);
    t.stop().await;
}

async fn success_after_expiry_asks_for_a_refund_and_stays_expired(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 3, "payment_ttl_secs": 1 }))
        .await;
    let (attempt, reference) = paying(&t, &sale, "alice").await;
    t.wait_for(&attempt, "alice", "EXPIRED", Duration::from_secs(10))
        .await;
    let ack = t.webhook("evt_late", "payment.succeeded", &reference).await;
    assert_eq!(ack.status(), 200);
    let ack: serde_json::Value = ack.json().await.unwrap();
    assert_eq!(ack["attempt_state"], "EXPIRED");
    assert_eq!(ack["result"], "refund_required", "{ack}");
    let again: serde_json::Value = t
        .webhook("evt_late", "payment.succeeded", &reference)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["result"], "duplicate", "{again}");
    let status = t.status(&attempt, "alice").await;
    assert_eq!(
        (status["state"].as_str(), status["reason"].as_str()),
        (Some("EXPIRED"), Some("payment_timeout"))
    );
    assert_eq!(t.outbox_count("sluice.payment.refund_required").await, 1);
    // The `webhook` provider has no API: the shop gives the money back.
    assert_eq!(t.refund_events(&attempt).await, ["owed"]);
    assert_eq!(
        t.stats(&sale).await["remaining"],
        3,
        "the stock stays given back"
    );
    t.stop().await;
}

async fn failure_after_success_is_ignored(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, reference) = paying(&t, &sale, "alice").await;
    let result = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), 200);
        resp.json::<serde_json::Value>().await.unwrap()["result"].clone()
    };
    let first = t.webhook("evt_a", "payment.succeeded", &reference).await;
    assert_eq!(result(first).await, "applied");
    let failed = t.webhook("evt_b", "payment.failed", &reference).await;
    assert_eq!(result(failed).await, "ignored", "nothing changed");
    let second = t.webhook("evt_c", "payment.succeeded", &reference).await;
    assert_eq!(result(second).await, "ignored");
    assert_eq!(t.status(&attempt, "alice").await["state"], "CONFIRMED");
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    t.stop().await;
}

async fn bad_signatures_and_stale_timestamps_are_refused_and_change_nothing(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, reference) = paying(&t, &sale, "alice").await;
    let body =
        json!({ "id": "evt_x", "type": "payment.succeeded", "payment_reference": reference })
            .to_string();
    let now = chrono::Utc::now().timestamp();
    let wrong_key = sluice::payments::WebhookSigner::new("not-the-secret-0123456789", 300);
    let right_key = sluice::payments::WebhookSigner::new(WEBHOOK_SECRET, 300);
    let cases = [
        wrong_key.sign(now, body.as_bytes()),
        right_key.sign(now - 600, body.as_bytes()),
        right_key.sign(now, b"another body"),
        "t=1,v1=nothex".to_owned(),
        "garbage".to_owned(),
    ];
    for signature in cases {
        let resp = t
            .http
            .post(t.url("/v1/webhooks/payments"))
            .header("Sluice-Signature", signature)
            .header("Content-Type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_problem(resp, 401, "/problems/bad-signature").await;
    }
    let missing = t
        .http
        .post(t.url("/v1/webhooks/payments"))
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_problem(missing, 400, "/problems/malformed-request").await;
    assert_eq!(
        t.status(&attempt, "alice").await["state"],
        "PAYMENT_PENDING"
    );
    // A signed body that is not a webhook: 422, still nothing changes.
    let signed_junk = t
        .http
        .post(t.url("/v1/webhooks/payments"))
        .header("Sluice-Signature", right_key.sign(now, b"{\"nope\":1}"))
        .header("Content-Type", "application/json")
        .body("{\"nope\":1}")
        .send()
        .await
        .unwrap();
    assert_problem(signed_junk, 422, "/problems/validation").await;
    // An event id with a NUL (PostgreSQL's text cannot hold one): 422, on every ledger.
    let nul = t
        .webhook("evt_\u{0}x", "payment.succeeded", &reference)
        .await;
    assert_problem(nul, 422, "/problems/validation").await;
    // An unknown reference: 404.
    let unknown = t
        .webhook(
            "evt_y",
            "payment.succeeded",
            &uuid::Uuid::new_v4().to_string(),
        )
        .await;
    assert_problem(unknown, 404, "/problems/not-found").await;
    assert_eq!(
        t.status(&attempt, "alice").await["state"],
        "PAYMENT_PENDING"
    );
    t.stop().await;
}
