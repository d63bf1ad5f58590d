//! A coupon drop: an instant sale's join is the claim. Many users claim a few coupons at
//! once; each gets CONFIRMED with one unit, sold out, or a place in line that the admitter
//! claims for in turn. Exactly the stock is confirmed, each user at most once, the ledger and
//! the queue store agree at the end, and a claim asked again answers the same.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    users_claiming_at_once_confirm_exactly_the_stock_each_at_most_once,
    a_claim_asked_again_answers_the_same,
    a_line_that_fronts_an_instant_sale_is_claimed_for_in_turn,
    holds_of_a_sale_arriving_together_share_a_transaction,
);

/// An instant sale of `units` coupons.
async fn coupon_drop(app: &TestApp, units: u32, more: Value) -> String {
    let mut body = json!({
        "name": "Coupon drop", "quantity": units, "per_user_limit": 1, "instant": true,
        "currency": "KRW", "unit_price": 0, "max_active": 1000
    });
    for (k, v) in more.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.create_sale(body).await
}

/// One user's claim: its status code and body.
async fn claim(app: &TestApp, sale: &str, user: &str) -> (u16, Value) {
    let resp = app
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// Waits until the attempt is CONFIRMED or its line is sold out; its last status.
async fn settled(app: &TestApp, attempt: &str, user: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = app.status(attempt, user).await;
        if status["state"] == "CONFIRMED" || status["sold_out"] == true {
            return status;
        }
        assert!(Instant::now() < deadline, "never settled: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The queue store's and the ledger's counts of the sale agree: free units, and sold ones.
async fn stores_agree(app: &TestApp, sale: &str, units: u64) {
    let id = sluice::domain::SaleId(sale.parse().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ledger = app.app.ledger.stats(id).await.unwrap();
        let store = app.app.queue.stats(id).await.unwrap();
        if store.remaining == u64::from(ledger.remaining) && store.active == 0 {
            assert_eq!(u64::from(ledger.remaining) + ledger.units_sold, units);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the stores disagree: ledger {ledger:?}, store {store:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 2,000 users claim 500 coupons at once: exactly 500 CONFIRMED, each user at most one,
/// every other user told sold out (at once, or in line), nothing oversold.
async fn users_claiming_at_once_confirm_exactly_the_stock_each_at_most_once(backend: Backend) {
    const USERS: usize = 2000;
    const UNITS: u32 = 500;
    let app = TestApp::spawn_on(backend).await;
    let sale = coupon_drop(&app, UNITS, json!({})).await;
    let answers: Vec<(String, u16, Value)> = stream::iter(0..USERS)
        .map(|i| {
            let (app, sale) = (&app, &sale);
            async move {
                let user = format!("coupon-{i}");
                let (status, body) = claim(app, sale, &user).await;
                (user, status, body)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut confirmed: HashMap<String, String> = HashMap::new();
    let mut by_status: HashMap<u16, usize> = HashMap::new();
    for (user, status, body) in &answers {
        *by_status.entry(*status).or_default() += 1;
        match status {
            201 => {
                assert_eq!(body["state"], "CONFIRMED", "{body}");
                assert_eq!(body["hold"]["quantity"], 1, "{body}");
                confirmed.insert(user.clone(), body["attempt_id"].as_str().unwrap().into());
            }
            409 => assert_eq!(body["type"], "/problems/sold-out", "{body}"),
            202 => {
                let attempt = body["attempt_id"].as_str().unwrap();
                let last = settled(&app, attempt, user).await;
                if last["state"] == "CONFIRMED" {
                    confirmed.insert(user.clone(), attempt.into());
                }
            }
            other => panic!("{user}: {other} {body}"),
        }
    }
    assert_eq!(
        confirmed.len(),
        UNITS as usize,
        "answers by status: {by_status:?}"
    );
    let attempts: HashSet<&String> = confirmed.values().collect();
    assert_eq!(attempts.len(), UNITS as usize, "one attempt a user");
    let id = sluice::domain::SaleId(sale.parse().unwrap());
    let ledger = app.app.ledger.stats(id).await.unwrap();
    assert_eq!(
        (ledger.confirmed, ledger.units_sold, ledger.remaining),
        (500, 500, 0)
    );
    stores_agree(&app, &sale, u64::from(UNITS)).await;
    assert_eq!(
        app.outbox_count("sluice.attempt.confirmed").await,
        i64::from(UNITS),
        "one event a claim"
    );
    app.stop().await;
}

/// A retried claim, or one from a second tab, answers the same attempt CONFIRMED with the
/// same unit; the claim was made once (201), the rest find it (202). A user with no claim
/// after the stock is gone is told sold out, and a closed sale refuses.
async fn a_claim_asked_again_answers_the_same(backend: Backend) {
    let app = TestApp::spawn_on(backend).await;
    let sale = coupon_drop(&app, 1, json!({})).await;
    let (status, first) = claim(&app, &sale, "alice").await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["state"], "CONFIRMED");
    let (twice, again) = tokio::join!(claim(&app, &sale, "alice"), claim(&app, &sale, "alice"));
    for (status, body) in [twice, again] {
        assert_eq!(status, 202, "{body}");
        assert_eq!(
            (&body["attempt_id"], &body["state"], &body["hold"]),
            (&first["attempt_id"], &first["state"], &first["hold"])
        );
    }
    let status = app
        .status(first["attempt_id"].as_str().unwrap(), "alice")
        .await;
    assert_eq!(status["state"], "CONFIRMED");
    let resp = app
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), "bob")
        .send()
        .await
        .unwrap();
    assert_problem(resp, 409, "/problems/sold-out").await;
    let id = sluice::domain::SaleId(sale.parse().unwrap());
    let ledger = app.app.ledger.stats(id).await.unwrap();
    assert_eq!((ledger.confirmed, ledger.remaining), (1, 0));
    app.stop().await;
}

/// Before the sale opens, joins wait in line; at the opening the admitter claims for each in
/// join order while units last, and their status says CONFIRMED (or sold out: the rest stay
/// in line, told so). A join after the line drained claims at once again.
async fn a_line_that_fronts_an_instant_sale_is_claimed_for_in_turn(backend: Backend) {
    let app = TestApp::spawn_on(backend).await;
    let opens = chrono::Utc::now() + chrono::Duration::seconds(2);
    let sale = coupon_drop(&app, 3, json!({ "opens_at": opens.to_rfc3339() })).await;
    let mut waiting = Vec::new();
    for i in 0..5 {
        let user = format!("early-{i}");
        let (status, body) = claim(&app, &sale, &user).await;
        assert_eq!(status, 202, "{body}");
        assert_eq!(body["state"], "QUEUED");
        waiting.push((user, body["attempt_id"].as_str().unwrap().to_owned()));
    }
    let mut outcome = Vec::new();
    for (user, attempt) in &waiting {
        let last = settled(&app, attempt, user).await;
        outcome.push(last["state"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        outcome,
        ["CONFIRMED", "CONFIRMED", "CONFIRMED", "QUEUED", "QUEUED"],
        "claimed in join order while units last"
    );
    let first = sluice::domain::AttemptId::parse(&waiting[0].1).unwrap();
    let trail = app.app.ledger.trail(first).await.unwrap();
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(
        (trail[0].from.as_str(), trail[0].cause.as_str()),
        ("QUEUED", "claim")
    );
    stores_agree(&app, &sale, 3).await;
    app.stop().await;
}

/// Holds of one sale that arrive together share ledger transactions: 60 at once are written
/// in fewer transactions than holds, each hold with its own answer, and exactly the stock
/// held.
async fn holds_of_a_sale_arriving_together_share_a_transaction(backend: Backend) {
    let app = TestApp::spawn_on(backend).await;
    let sale = app
        .create_sale(json!({ "quantity": 40, "per_user_limit": 1, "max_active": 100 }))
        .await;
    let admitted: Vec<(String, String, String)> = stream::iter(0..60)
        .map(|i| {
            let (app, sale) = (&app, &sale);
            async move {
                let user = format!("holder-{i}");
                let (attempt, token) = app.admitted(sale, &user).await;
                (user, attempt, token)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let before = batches(&app).await;
    let answers: Vec<u16> = stream::iter(admitted)
        .map(|(user, attempt, token)| {
            let app = &app;
            async move {
                let body = json!({ "admission_token": token, "quantity": 1 });
                app.hold(&attempt, &user, body).await.status().as_u16()
            }
        })
        .buffer_unordered(60)
        .collect()
        .await;
    let held = answers.iter().filter(|s| **s == 200).count();
    let sold_out = answers.iter().filter(|s| **s == 409).count();
    assert_eq!((held, sold_out), (40, 20), "{answers:?}");
    let after = batches(&app).await;
    let (writes, transactions) = (after.0 - before.0, after.1 - before.1);
    assert!(
        writes >= 40.0,
        "every hold the store granted was written: {writes}"
    );
    assert!(
        transactions < writes,
        "{writes} holds in {transactions} transactions"
    );
    app.assert_stock_conserved(sluice::domain::SaleId(sale.parse().unwrap()), 40)
        .await;
    app.stop().await;
}

/// The ledger's batches of events so far: writes carried and transactions.
async fn batches(app: &TestApp) -> (f64, f64) {
    let labels = [("call", "events")];
    (
        app.counter("sluice_ledger_batch_size_sum", &labels).await,
        app.counter("sluice_ledger_batch_size_count", &labels).await,
    )
}
