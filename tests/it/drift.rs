//! The drift checker (src/workers/drift.rs), on Redis, the Redis Cluster and in-process: a
//! queue store's holdings broken on purpose (its free-unit counter, a seat hold it lost, a
//! hold it kept after the ledger ended it) are found and rebuilt from the ledger, and counted;
//! under 200 concurrent holds, checked every 50 ms, nothing is "repaired", nothing is
//! oversold and no drift is left; a store that keeps moving is not read whole; a sale whose
//! check fails does not keep the others from theirs.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;
use sluice::domain::{SaleId, Stock, StockChange};
use sluice::queue::SaleSnapshot;

use crate::helpers::{Backend, TestApp};

crate::on_every_configuration!(
    a_counter_broken_on_purpose_is_repaired_from_the_ledger,
    a_seat_hold_the_store_lost_is_restored_from_the_ledger,
    a_hold_the_store_kept_after_the_ledger_ended_it_is_given_back,
    concurrent_holds_are_never_repaired_and_leave_no_drift,
    a_moving_store_is_not_read_whole_until_it_stands_still,
    an_attempt_admitted_again_after_a_lost_admission_frees_its_slot_when_the_ledger_ended_it,
);

/// Checks every 100 ms; a difference must stand 2 s (twice a 1 s acquire timeout, which a
/// SQLite ledger migrating while other tests start still makes).
fn checked_often(c: &mut sluice::config::Config) {
    c.workers.drift_check_ms = sluice::config::Millis(100);
    c.ledger.acquire_timeout_ms = sluice::config::Millis(1000);
}

async fn counter(t: &TestApp, sale: SaleId) -> u64 {
    t.app.queue.stats(sale).await.unwrap().remaining
}

async fn repaired(t: &TestApp, sale: &str) -> f64 {
    t.counter("sluice_queue_drift_repaired_total", &[("sale", sale)])
        .await
}

async fn reads(t: &TestApp, sale: &str) -> f64 {
    t.counter("sluice_queue_drift_reads_total", &[("sale", sale)])
        .await
}

/// Rebuilds the store's holdings of `sale` from `snapshot` (the ledger's, changed to break
/// them): what lost or stale writes leave behind.
async fn break_store(t: &TestApp, sale: SaleId, snapshot: &SaleSnapshot) {
    let settings = t.app.ledger.sale_settings(sale).await.unwrap().unwrap();
    let version = t.app.queue.stats(sale).await.unwrap().version;
    assert!(t
        .app
        .queue
        .rebuild_if_unchanged(&settings, snapshot, version)
        .await
        .unwrap());
}

/// Waits until the store's holdings agree with the ledger's again and the repair is counted.
async fn until_repaired(t: &TestApp, sale: SaleId) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let holdings = t.app.queue.holdings(sale).await.unwrap().unwrap();
        let ledger = t.app.ledger.snapshot(sale).await.unwrap();
        // The checker counts a repair once its write is done: a moment after the store shows it.
        if holdings.drift(&ledger).is_none() && repaired(t, &sale.to_string()).await >= 1.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never repaired: {:?}",
            holdings.drift(&ledger)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_counter_broken_on_purpose_is_repaired_from_the_ledger(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, checked_often).await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let id = SaleId::parse(&sale).unwrap();
    t.holding(&sale, "alice", 2).await;
    assert_eq!(counter(&t, id).await, 8);
    // Broken: the store counts 3 free where the ledger has 8 (lost writes, say).
    let mut snapshot = t.app.ledger.snapshot(id).await.unwrap();
    snapshot.free = Stock::Quantity(3);
    break_store(&t, id, &snapshot).await;
    assert_eq!(counter(&t, id).await, 3);
    until_repaired(&t, id).await;
    assert_eq!(counter(&t, id).await, 8);
    assert_eq!(repaired(&t, &sale).await, 1.0, "the repair is counted once");
    assert_eq!(t.stats(&sale).await["remaining"], 8);
    t.stop().await;
}

/// The store lost alice's seat hold (the seat free again, alice's slot gone, as a failover
/// that dropped the hold's write leaves it): repaired, the seat is alice's again and bob,
/// admitted, cannot take it.
async fn a_seat_hold_the_store_lost_is_restored_from_the_ledger(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, checked_often).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "seats": ["A1", "A2", "A3"] }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let (attempt, token) = t.admitted(&sale, "alice").await;
    let held = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": token, "seat_ids": ["A1"] }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let mut snapshot = t.app.ledger.snapshot(id).await.unwrap();
    snapshot.free = Stock::Seats(vec!["A1".into(), "A2".into(), "A3".into()]);
    snapshot.live.clear();
    snapshot.bought.clear();
    break_store(&t, id, &snapshot).await;
    assert_eq!(counter(&t, id).await, 3, "broken: A1 free in the store");
    until_repaired(&t, id).await;
    assert_eq!(counter(&t, id).await, 2);
    assert_eq!(repaired(&t, &sale).await, 1.0);
    let (bob, token) = t.admitted(&sale, "bob").await;
    let taken = t
        .hold(
            &bob,
            "bob",
            json!({ "admission_token": token, "seat_ids": ["A1"] }),
        )
        .await;
    assert_eq!(taken.status(), 409, "A1 is alice's");
    let status = t
        .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    t.stop().await;
}

/// The store kept alice's hold and slot after the ledger released them (a failover lost the
/// restore, and the replay's record of it survived): repaired, the 2 units are free again
/// and the slot is gone.
async fn a_hold_the_store_kept_after_the_ledger_ended_it_is_given_back(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, checked_often).await;
    let sale = t.create_sale(json!({ "quantity": 4 })).await;
    let id = SaleId::parse(&sale).unwrap();
    let attempt = t.holding(&sale, "alice", 2).await;
    let before = t.app.ledger.snapshot(id).await.unwrap();
    let released = t
        .as_user(
            Method::DELETE,
            &format!("/v1/attempts/{attempt}/hold"),
            "alice",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(released.status(), 200);
    assert_eq!(counter(&t, id).await, 4);
    break_store(&t, id, &before).await;
    let stale = t.app.queue.stats(id).await.unwrap();
    assert_eq!(
        (stale.remaining, stale.active),
        (2, 1),
        "broken: still held"
    );
    until_repaired(&t, id).await;
    let stats = t.app.queue.stats(id).await.unwrap();
    assert_eq!((stats.remaining, stats.active), (4, 0));
    assert_eq!(repaired(&t, &sale).await, 1.0);
    for user in ["bob", "carol"] {
        t.holding(&sale, user, 2).await;
    }
    t.stop().await;
}

async fn concurrent_holds_are_never_repaired_and_leave_no_drift(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.workers.drift_check_ms = sluice::config::Millis(50)
    })
    .await;
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
    let holdings = t.app.queue.holdings(id).await.unwrap().unwrap();
    let snapshot = t.app.ledger.snapshot(id).await.unwrap();
    assert_eq!(holdings.drift(&snapshot), None, "no drift left");
    assert_eq!(
        repaired(&t, &sale).await,
        0.0,
        "no hold in flight was taken for drift"
    );
    t.stop().await;
}

/// The store's free units go down and up by one every 10 ms for 2 s (about six checks, 300 ms
/// apart): its version never stands still from one check to the next, so its holdings are not
/// read. Left one unit under the ledger, it is read and repaired. (Units over the ledger's are
/// the admitter's to take back at once, whether the store moves or not:
/// `a_store_with_units_the_ledger_took_gives_them_up_while_it_moves`.)
async fn a_moving_store_is_not_read_whole_until_it_stands_still(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.workers.drift_check_ms = sluice::config::Millis(300);
        c.ledger.acquire_timeout_ms = sluice::config::Millis(1000);
    })
    .await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let id = SaleId::parse(&sale).unwrap();
    let moving_until = Instant::now() + Duration::from_secs(2);
    let mut down = true;
    while Instant::now() < moving_until {
        let change = if down {
            StockChange::Withdraw(1)
        } else {
            StockChange::Add(1)
        };
        assert!(t.app.queue.adjust_stock(id, &change).await.unwrap());
        down = !down;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(reads(&t, &sale).await, 0.0, "a moving store is not read");
    if counter(&t, id).await == 10 {
        assert!(t
            .app
            .queue
            .adjust_stock(id, &StockChange::Withdraw(1))
            .await
            .unwrap());
    }
    assert_eq!(counter(&t, id).await, 9, "one unit under the ledger's 10");
    until_repaired(&t, id).await;
    assert_eq!(counter(&t, id).await, 10);
    assert!(reads(&t, &sale).await >= 2.0, "read at two checks in a row");
    assert_eq!(repaired(&t, &sale).await, 1.0);
    t.stop().await;
}

/// On Redis, a sale whose holdings do not read (a hold record garbled) fails its own check
/// only: a sale created after it, broken on purpose, is still repaired.
#[tokio::test]
async fn a_sale_whose_check_fails_does_not_stop_the_others() {
    let t = TestApp::spawn_on_with(Backend::Servers, checked_often).await;
    let garbled = t.create_sale(json!({ "quantity": 10 })).await;
    t.holding(&garbled, "alice", 1).await;
    let mut conn = t.queue_redis().await;
    let holds = format!("{}:{{sale:{garbled}}}:holds", t.app.config.queue.key_prefix);
    let records: Vec<String> = redis::cmd("HKEYS")
        .arg(&holds)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(records.len(), 1, "alice's hold");
    let _: () = redis::cmd("HSET")
        .arg(&holds)
        .arg(&records[0])
        .arg("not a hold record")
        .query_async(&mut conn)
        .await
        .unwrap();
    let garbled_id = SaleId::parse(&garbled).unwrap();
    assert!(
        t.app.queue.holdings(garbled_id).await.is_err(),
        "does not read"
    );

    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let id = SaleId::parse(&sale).unwrap();
    let mut snapshot = t.app.ledger.snapshot(id).await.unwrap();
    snapshot.free = Stock::Quantity(3);
    break_store(&t, id, &snapshot).await;
    until_repaired(&t, id).await;
    assert_eq!(repaired(&t, &sale).await, 1.0);
    t.stop().await;
}

/// A failover can lose the store's admission of an attempt after the ledger recorded it: the
/// attempt is still in line in the store, and the admitter admits it again. When the ledger
/// has ended it meanwhile, that second admission must not keep a slot (with max_active 1, the
/// next buyer would wait out its whole new deadline and the grace after it).
async fn an_attempt_admitted_again_after_a_lost_admission_frees_its_slot_when_the_ledger_ended_it(
    backend: Backend,
) {
    let t = TestApp::spawn_on_with(backend, |_| {}).await;
    let sale = t
        .create_sale(json!({ "max_active": 1, "rate_per_minute": 600, "admission_ttl_secs": 120 }))
        .await;
    let (first, _) = t.admitted(&sale, "first").await;
    t.pass_deadline(&first, sluice::domain::AttemptEvent::AdmissionTimeout)
        .await;
    t.wait_state(&first, "first", "EXPIRED(admission_timeout)")
        .await;
    // The store "loses" its admission (as a failover that lost the write would): the attempt
    // is back at its place in line, where the admitter takes it again.
    let id = sluice::domain::AttemptId::parse(&first).unwrap();
    let record = t.app.ledger.attempt(id).await.unwrap().unwrap();
    let lost = sluice::queue::Admitted {
        attempt: id,
        seq: record.seq as u64,
        user: record.user.clone(),
        deadline_ms: 0,
    };
    t.app.queue.unadmit(id.sale, &[lost]).await.unwrap();
    let joined = t.join(&sale, "second").await;
    let second = joined["attempt_id"].as_str().unwrap();
    t.wait_for(second, "second", "ADMITTED", Duration::from_secs(10))
        .await;
    let state = t.status(&first, "first").await;
    assert_eq!(state["reason"], "admission_timeout", "{state}");
}
