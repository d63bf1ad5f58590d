//! An operator's changes to a running sale, on both configurations: units added and withdrawn
//! while buyers are admitted and hold, with nothing oversold and the queue store agreeing with
//! the ledger afterwards; seats added and withdrawn (only free ones); a new name and close.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};
use sluice::domain::SaleId;

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    units_added_and_withdrawn_during_admission_oversell_nothing,
    only_free_seats_are_withdrawn_and_new_ones_sell,
    a_sale_is_renamed_and_its_close_moved,
);

async fn change(t: &TestApp, sale: &str, body: Value) -> reqwest::Response {
    t.admin(Method::POST, &format!("/v1/sales/{sale}/stock"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Waits (at most 30 s) until the queue store's holdings equal the ledger's.
async fn store_agrees(t: &TestApp, id: SaleId) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ledger = t.app.ledger.snapshot(id).await.unwrap();
        if let Ok(Some(h)) = t.app.queue.holdings(id).await {
            if h.drift(&ledger).is_none() {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the store never agreed with the ledger"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn units_added_and_withdrawn_during_admission_oversell_nothing(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "per_user_limit": 1 }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let users: Vec<String> = (0..30).map(|i| format!("buyer-{i}")).collect();
    let admitted = join_all(users.iter().map(|u| t.admitted(&sale, u))).await;

    let holds = join_all(admitted.iter().zip(&users).map(|((attempt, token), user)| {
        t.hold(
            attempt,
            user,
            json!({ "admission_token": token, "quantity": 1 }),
        )
    }));
    let operator = async {
        let added = change(&t, &sale, json!({ "add": 5 })).await;
        assert_eq!(added.status(), 200);
        let withdrawn = change(&t, &sale, json!({ "withdraw": 3 })).await;
        withdrawn.status().as_u16()
    };
    let (holds, withdrawn) = tokio::join!(holds, operator);
    let held = holds.iter().filter(|r| r.status() == 200).count() as u64;
    for resp in &holds {
        assert!(
            matches!(resp.status().as_u16(), 200 | 409),
            "{}",
            resp.status()
        );
    }
    // The withdrawal takes three free units, or none if the holds left fewer than three.
    let total = if withdrawn == 200 { 12 } else { 15 };
    assert!(matches!(withdrawn, 200 | 409), "{withdrawn}");
    let stats = t.app.ledger.stats(id).await.unwrap();
    assert_eq!(stats.total, total);
    assert_eq!(
        stats.units_held, held,
        "every hold answered 200 holds one unit"
    );
    assert!(held <= u64::from(total), "{held} held of {total}");
    t.assert_stock_conserved(id, u64::from(total)).await;
    store_agrees(&t, id).await;

    // More than is free is refused, whole, and changes nothing.
    let free = stats.remaining;
    let too_many = change(&t, &sale, json!({ "withdraw": free + 1 })).await;
    assert_problem(too_many, 409, "/problems/stock-in-use").await;
    assert_eq!(t.app.ledger.stats(id).await.unwrap().total, total);
    let wrong_kind = change(&t, &sale, json!({ "add_seats": ["A1"] })).await;
    assert_problem(wrong_kind, 422, "/problems/validation").await;
    let none = change(&t, &sale, json!({})).await;
    assert_problem(none, 422, "/problems/validation").await;
    let two = change(&t, &sale, json!({ "add": 1, "withdraw": 1 })).await;
    assert_problem(two, 422, "/problems/validation").await;
    // Everything left free is withdrawn but one unit; the sale's figure says so.
    if free > 1 {
        let resp = change(&t, &sale, json!({ "withdraw": free - 1 })).await;
        let sale_out: Value = resp.json().await.unwrap();
        assert_eq!(sale_out["remaining"], 1, "{sale_out}");
        assert_eq!(sale_out["total"], u64::from(total - (free - 1)));
    }
    store_agrees(&t, id).await;
    t.stop().await;
}

async fn only_free_seats_are_withdrawn_and_new_ones_sell(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(
            json!({ "quantity": null, "seats": ["A1", "A2", "A3", "A4"], "per_user_limit": 2 }),
        )
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let (attempt, token) = t.admitted(&sale, "seated").await;
    let held = t
        .hold(
            &attempt,
            "seated",
            json!({ "admission_token": token, "seat_ids": ["A1"] }),
        )
        .await;
    assert_eq!(held.status(), 200);

    let added: Value = change(&t, &sale, json!({ "add_seats": ["B1", "B2"] }))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (added["total"].as_u64(), added["remaining"].as_u64()),
        (Some(6), Some(5))
    );
    let again = change(&t, &sale, json!({ "add_seats": ["A2"] })).await;
    assert_problem(again, 422, "/problems/validation").await;
    let held_seat = change(&t, &sale, json!({ "withdraw_seats": ["A1", "A3"] })).await;
    assert_problem(held_seat, 409, "/problems/stock-in-use").await;
    let unknown = change(&t, &sale, json!({ "withdraw_seats": ["Z9"] })).await;
    assert_problem(unknown, 409, "/problems/stock-in-use").await;
    let withdrawn: Value = change(&t, &sale, json!({ "withdraw_seats": ["A3"] }))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(withdrawn["total"], 5);
    let seats = withdrawn["seats"].as_array().unwrap();
    assert!(
        !seats.contains(&json!("A3")) && seats.contains(&json!("B2")),
        "{withdrawn}"
    );
    store_agrees(&t, id).await;

    // The new seat sells; the withdrawn one does not exist any more.
    let (other, token) = t.admitted(&sale, "later").await;
    let gone = t
        .hold(
            &other,
            "later",
            json!({ "admission_token": token, "seat_ids": ["A3"] }),
        )
        .await;
    assert!(
        matches!(gone.status().as_u16(), 409 | 422),
        "{}",
        gone.status()
    );
    let new = t
        .hold(
            &other,
            "later",
            json!({ "admission_token": token, "seat_ids": ["B1"] }),
        )
        .await;
    assert_eq!(new.status(), 200, "{}", new.text().await.unwrap());
    t.assert_stock_conserved(id, 5).await;
    store_agrees(&t, id).await;
    t.stop().await;
}

async fn a_sale_is_renamed_and_its_close_moved(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "name": "First name" })).await;
    let patch = |body: Value| {
        t.admin(Method::PATCH, &format!("/v1/sales/{sale}"))
            .json(&body)
            .send()
    };
    let renamed: Value = patch(json!({ "name": "Second name" }))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(renamed["name"], "Second name");
    let offer = t.get_json(&format!("/v1/public/sales/{sale}/offer")).await;
    assert_eq!(offer["name"], "Second name", "{offer}");
    let before_open = chrono::Utc::now() - chrono::Duration::days(1);
    let refused = patch(json!({ "closes_at": before_open })).await.unwrap();
    assert_problem(refused, 422, "/problems/validation").await;
    let blank = patch(json!({ "name": "\u{202E}" })).await.unwrap();
    assert_problem(blank, 422, "/problems/validation").await;
    let nothing = patch(json!({})).await.unwrap();
    assert_problem(nothing, 422, "/problems/validation").await;

    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let moved: Value = patch(json!({ "closes_at": soon }))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(moved["closes_at"].is_string(), "{moved}");
    assert_eq!(moved["name"], "Second name", "a name not given stays");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let late = t
        .as_user(
            Method::POST,
            &format!("/v1/sales/{sale}/attempts"),
            "too-late",
        )
        .send()
        .await
        .unwrap();
    assert_problem(late, 409, "/problems/sale-closed").await;
    t.stop().await;
}
