//! The drift checker (src/workers/drift.rs): a queue-store counter broken on purpose is found
//! and repaired from the ledger, and counted; under 200 concurrent holds, checked every 50 ms,
//! nothing is "repaired", nothing is oversold and no drift is left.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;
use sluice::domain::SaleId;

use crate::helpers::{Backend, TestApp};

crate::on_both_configurations!(
    a_counter_broken_on_purpose_is_repaired_from_the_ledger,
    concurrent_holds_are_never_repaired_and_leave_no_drift,
);

async fn counter(t: &TestApp, sale: SaleId) -> u64 {
    t.app.queue.stats(sale).await.unwrap().remaining
}

async fn repaired(t: &TestApp, sale: &str) -> f64 {
    t.counter("sluice_queue_drift_repaired_total", &[("sale", sale)])
        .await
}

async fn a_counter_broken_on_purpose_is_repaired_from_the_ledger(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| c.workers.drift_check_ms = 100).await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let id = SaleId::parse(&sale).unwrap();
    t.holding(&sale, "alice", 2).await;
    assert_eq!(counter(&t, id).await, 8);
    // Broken: the store counts 3 free where the ledger has 8 (lost writes, say).
    assert!(t.app.queue.repair_stock(id, 8, 3).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter(&t, id).await != 8 {
        assert!(Instant::now() < deadline, "never repaired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(repaired(&t, &sale).await, 1.0, "the repair is counted once");
    assert_eq!(t.stats(&sale).await["remaining"], 8);
    t.stop().await;
}

async fn concurrent_holds_are_never_repaired_and_leave_no_drift(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| c.workers.drift_check_ms = 50).await;
    let sale = t
        .create_sale(json!({ "quantity": 150, "per_user_limit": 1, "max_active": 1000 }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let users: Vec<String> = (0..200).map(|i| format!("buyer-{i}")).collect();
    let admitted = join_all(users.iter().map(|u| t.admitted(&sale, u))).await;
    let holds = join_all(admitted.iter().zip(&users).map(|((attempt, token), user)| {
        t.hold(
            attempt,
            user,
            json!({ "admission_token": token, "quantity": 1 }),
        )
    }))
    .await;
    let held = holds.iter().filter(|r| r.status() == 200).count();
    assert_eq!(held, 150, "every unit held once, no more");
    tokio::time::sleep(Duration::from_millis(500)).await; // a few more checks
    let ledger = t.app.ledger.stats(id).await.unwrap();
    assert_eq!(ledger.remaining, 0);
    assert_eq!(ledger.units_held, 150, "0 oversold");
    assert_eq!(counter(&t, id).await, 0, "no drift left");
    assert_eq!(
        repaired(&t, &sale).await,
        0.0,
        "no hold in flight was taken for drift"
    );
    t.stop().await;
}
