//! Domain events leave through the outbox: a whole lifecycle's events reach the sink, in order,
//! each once, with the envelope consumers rely on.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{Backend, TestApp};

crate::on_both_configurations!(a_lifecycle_s_events_reach_the_sink_in_order_once);

async fn a_lifecycle_s_events_reach_the_sink_in_order_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    t.hold(
        &attempt,
        "alice",
        json!({ "admission_token": token, "quantity": 1 }),
    )
    .await;
    let paying: serde_json::Value = t.checkout(&attempt, "alice").await.json().await.unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    for _ in 0..3 {
        t.webhook("evt_events", "payment.succeeded", reference)
            .await;
    }

    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let events = t.published_events();
        if events
            .iter()
            .any(|e| e["type"] == "sluice.attempt.confirmed")
        {
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "no confirmation published: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ids: HashSet<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), events.len(), "each event once");
    let mine: Vec<&str> = events
        .iter()
        .filter(|e| e["attempt_id"] == attempt.as_str())
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        mine,
        [
            "sluice.attempt.admitted",
            "sluice.attempt.held",
            "sluice.attempt.payment_pending",
            "sluice.attempt.confirmed"
        ]
    );
    let opened = events
        .iter()
        .find(|e| e["type"] == "sluice.sale.opened")
        .expect("the sale's opening");
    assert_eq!(opened["sale_id"], sale.as_str());
    for e in &events {
        assert_eq!(e["schema_version"], 1);
        assert!(e["occurred_at"].is_string());
    }
    // Rows are marked published right after the sink took them.
    while t.app.ledger.outbox_backlog().await.unwrap().0 > 0 {
        assert!(Instant::now() < deadline, "the backlog never drained");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    t.stop().await;
}
