//! An operator's refund of a purchase, on both configurations: five refunds at once give the
//! units back once, to the ledger and the queue store alike, emit `refund_required` once and
//! write one audit entry; the next buyer in line can hold the units; a second refund is a
//! no-op, and only a CONFIRMED attempt can be refunded. A purchase made before the queue
//! store was rebuilt from the ledger is refunded as well.

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};
use sluice::domain::{SaleId, SaleSnapshot};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    five_refunds_at_once_give_the_units_back_once,
    a_purchase_made_before_the_store_was_rebuilt_is_refunded_into_it,
);

/// A sold-out sale of `units`, all bought by one buyer: (sale, the buyer's attempt).
async fn sold_out(t: &TestApp, units: u32) -> (String, String) {
    let sale = t
        .create_sale(json!({ "quantity": units, "per_user_limit": units }))
        .await;
    let (attempt, payment) = t.paying(&sale, "buyer", units).await;
    let reference = payment["reference"].as_str().unwrap();
    let paid = t
        .webhook("evt-bought", "payment.succeeded", reference)
        .await;
    assert_eq!(paid.status(), 200);
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    (sale, attempt)
}

async fn refund(t: &TestApp, sale: &str, attempt: &str) -> reqwest::Response {
    t.admin(
        Method::POST,
        &format!("/v1/sales/{sale}/attempts/{attempt}/refund"),
    )
    .send()
    .await
    .unwrap()
}

async fn store_remaining(t: &TestApp, sale: &str) -> u64 {
    let id = SaleId::parse(sale).unwrap();
    t.app.queue.stats(id).await.unwrap().remaining
}

async fn five_refunds_at_once_give_the_units_back_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let (sale, bought) = sold_out(&t, 2).await;
    let id = SaleId::parse(&sale).unwrap();
    let (late, late_token) = t.admitted(&sale, "next-in-line").await;
    let refused = t
        .hold(
            &late,
            "next-in-line",
            json!({ "admission_token": late_token, "quantity": 2 }),
        )
        .await;
    assert_problem(refused, 409, "/problems/sold-out").await;

    let answers = join_all((0..5).map(|_| refund(&t, &sale, &bought))).await;
    for resp in answers {
        assert_eq!(resp.status(), 200);
        let file: Value = resp.json().await.unwrap();
        assert_eq!(
            (&file["attempt"]["state"], &file["attempt"]["reason"]),
            (&json!("EXPIRED"), &json!("refunded")),
            "{file}"
        );
    }
    // The units are back once, in the ledger and the queue store, and stock is conserved.
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    assert_eq!(t.stats(&sale).await["expired"]["refunded"], 1);
    assert_eq!(store_remaining(&t, &sale).await, 2);
    t.assert_stock_conserved(id, 2).await;
    // With no provider API, sluice moves no money: the shop is told to give it back.
    assert_eq!(
        t.refund_events(&bought).await,
        ["owed"],
        "one refund_required"
    );
    let trail = t.audit_trail(&bought).await;
    let refunds: Vec<_> = trail
        .iter()
        .filter(|(_, _, cause)| cause == "refund")
        .collect();
    assert_eq!(refunds.len(), 1, "{trail:?}");
    assert_eq!(refunds[0].1, "EXPIRED");
    let log = t
        .admin_json(Method::GET, &format!("/v1/admin/actions?sale_id={sale}"))
        .await;
    let logged: Vec<&Value> = log["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "refundAttempt")
        .collect();
    assert_eq!(logged.len(), 1, "{log}");
    assert_eq!(logged[0]["before"]["state"], "CONFIRMED");
    assert_eq!(logged[0]["after"]["reason"], "refunded");

    // The next buyer in line holds them; a refund again changes nothing.
    let held = t
        .hold(
            &late,
            "next-in-line",
            json!({ "admission_token": late_token, "quantity": 2 }),
        )
        .await;
    assert_eq!(held.status(), 200, "{}", held.text().await.unwrap());
    assert_eq!(refund(&t, &sale, &bought).await.status(), 200);
    assert_eq!(t.refunds_for(&bought).await, 1);
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    t.assert_stock_conserved(id, 2).await;

    // Only a purchase is refunded: a hold is refused (409), an attempt that ended otherwise
    // too (410), an attempt of another sale is not found.
    assert_problem(
        refund(&t, &sale, &late).await,
        409,
        "/problems/invalid-transition",
    )
    .await;
    let released = t.as_user(
        Method::DELETE,
        &format!("/v1/attempts/{late}/hold"),
        "next-in-line",
    );
    assert_eq!(released.send().await.unwrap().status(), 200);
    assert_problem(
        refund(&t, &sale, &late).await,
        410,
        "/problems/attempt-expired",
    )
    .await;
    let other = t.create_sale(json!({})).await;
    assert_problem(
        refund(&t, &other, &bought).await,
        404,
        "/problems/not-found",
    )
    .await;
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    assert_eq!(store_remaining(&t, &sale).await, 2);
    t.stop().await;
}

async fn a_purchase_made_before_the_store_was_rebuilt_is_refunded_into_it(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let (sale, bought) = sold_out(&t, 3).await;
    let id = SaleId::parse(&sale).unwrap();
    // The store is rebuilt from the ledger (what `sluice reconcile` and a flushed Redis do).
    let settings = t.app.ledger.sale_settings(id).await.unwrap().unwrap();
    let snapshot = SaleSnapshot {
        reset: true,
        ..t.app.ledger.snapshot(id).await.unwrap()
    };
    assert!(t
        .app
        .queue
        .init_sale(&settings, 0, &snapshot, true)
        .await
        .unwrap());
    assert_eq!(store_remaining(&t, &sale).await, 0);

    assert_eq!(refund(&t, &sale, &bought).await.status(), 200);
    assert_eq!(store_remaining(&t, &sale).await, 3);
    assert_eq!(t.stats(&sale).await["remaining"], 3);
    t.holding(&sale, "after-the-refund", 3).await;
    assert_eq!(store_remaining(&t, &sale).await, 0);
    t.assert_stock_conserved(id, 3).await;
    t.stop().await;
}
