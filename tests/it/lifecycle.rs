//! The attempt end to end over HTTP, and every way it can expire.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, Backend, TestApp};

const WAIT: Duration = Duration::from_secs(10);

crate::on_both_configurations!(
    join_admit_hold_checkout_pay_confirmed,
    admission_timeout_frees_the_slot,
    hold_timeout_gives_the_stock_back,
    payment_failed_and_payment_timeout_give_the_stock_back,
    release_gives_the_stock_back_once,
    duplicate_join_answers_the_same_attempt_and_position_and_leave_moves_others_up,
    join_after_close_is_refused,
    after_closes_at_joins_are_refused_and_the_waiting_still_admitted,
    closing_a_sale_ends_the_attempts_still_waiting,
    waiting_users_are_told_at_once_when_it_sells_out,
    seats_are_held_all_or_nothing_and_never_twice,
    per_user_limit_is_enforced,
    stats_count_attempts_and_units_apart,
    one_attempt_per_user_a_buyer_who_joins_again_gets_the_bought_attempt,
);

/// One attempt per user per sale: after CONFIRMED, joining again answers the bought attempt
/// (no second place in line); after an attempt expired, the user joins anew.
async fn one_attempt_per_user_a_buyer_who_joins_again_gets_the_bought_attempt(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let (attempt, payment) = t.paying(&sale, "alice", 1).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        t.webhook("evt_once", "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    t.wait_for(&attempt, "alice", "CONFIRMED", WAIT).await;
    for _ in 0..2 {
        let again = t.join(&sale, "alice").await;
        assert_eq!(again["attempt_id"], attempt.as_str(), "{again}");
        assert_eq!(again["state"], "CONFIRMED", "{again}");
    }
    let stats = t.stats(&sale).await;
    assert_eq!(
        (stats["waiting"].as_u64(), stats["confirmed"].as_u64()),
        (Some(0), Some(1))
    );

    // Bob leaves while waiting, then joins again: a new attempt, at the back of the line.
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let first = t.join(&sale, "bob").await;
    let first_id = first["attempt_id"].as_str().unwrap();
    let left = t
        .as_user(Method::DELETE, &format!("/v1/attempts/{first_id}"), "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 200);
    let rejoined = t.join(&sale, "bob").await;
    assert_ne!(rejoined["attempt_id"], first["attempt_id"]);
    assert_eq!(rejoined["state"], "QUEUED");
    t.stop().await;
}

/// Attempts are people, units are stock: a buyer of 2, a payer of 3 and a holder of 1 are
/// three attempts over six units, and the units add up to the sale's total.
async fn stats_count_attempts_and_units_apart(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 100 })).await;
    let (_, payment) = t.paying(&sale, "buyer", 2).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        t.webhook("evt_units", "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    t.paying(&sale, "payer", 3).await;
    let (attempt, token) = t.admitted(&sale, "holder").await;
    let held = t
        .hold(
            &attempt,
            "holder",
            json!({ "admission_token": token, "quantity": 1 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    t.admitted(&sale, "looker").await;

    let stats = t.stats(&sale).await;
    let attempts = |k: &str| stats[k].as_u64().unwrap();
    assert_eq!(
        (
            attempts("confirmed"),
            attempts("paying"),
            attempts("holding"),
            attempts("admitted")
        ),
        (1, 1, 1, 1),
        "{stats}"
    );
    let units = &stats["units"];
    let unit = |k: &str| units[k].as_u64().unwrap();
    assert_eq!(
        (
            unit("free"),
            unit("held"),
            unit("paying"),
            unit("sold"),
            unit("total")
        ),
        (94, 1, 3, 2, 100),
        "{stats}"
    );
    assert_eq!(
        unit("free") + unit("held") + unit("paying") + unit("sold"),
        unit("total")
    );
    assert_eq!(stats["remaining"], 94);
    t.stop().await;
}

async fn join_admit_hold_checkout_pay_confirmed(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;

    let joined = t.join(&sale, "alice").await;
    assert_eq!(joined["state"], "QUEUED");
    assert!(joined["position"].as_u64().unwrap() >= 1);
    assert!(joined["poll_after_ms"].as_u64().unwrap() > 0);
    let attempt = joined["attempt_id"].as_str().unwrap();

    let admitted = t.wait_for(attempt, "alice", "ADMITTED", WAIT).await;
    let token = admitted["admission_token"].as_str().unwrap();
    assert!(admitted["admission_expires_at"].is_string());

    let held = t
        .hold(
            attempt,
            "alice",
            json!({ "admission_token": token, "quantity": 2 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let held: serde_json::Value = held.json().await.unwrap();
    assert_eq!(held["state"], "HOLD");
    assert_eq!(held["hold"]["quantity"], 2);
    assert!(held["hold"]["expires_at"].is_string());

    let paying: serde_json::Value = t.checkout(attempt, "alice").await.json().await.unwrap();
    assert_eq!(paying["state"], "PAYMENT_PENDING");
    let reference = paying["payment"]["reference"].as_str().unwrap();

    let ack = t.webhook("evt_ok_1", "payment.succeeded", reference).await;
    assert_eq!(ack.status(), 200);
    let ack: serde_json::Value = ack.json().await.unwrap();
    assert_eq!(ack["result"], "applied");
    assert_eq!(ack["attempt_state"], "CONFIRMED");

    let done = t.status(attempt, "alice").await;
    assert_eq!(done["state"], "CONFIRMED");
    assert_eq!(done["hold"]["quantity"], 2);

    let stats = t.stats(&sale).await;
    assert_eq!(stats["confirmed"], 1);
    assert_eq!(stats["remaining"], 8);
    let queue = t
        .app
        .queue
        .stats(sluice::domain::SaleId::parse(&sale).unwrap())
        .await
        .unwrap();
    assert_eq!(queue.remaining, 8, "Redis agrees with the ledger");
    assert_eq!(
        queue.active, 0,
        "a confirmed user no longer counts as active"
    );

    // The audit trail has every step, in order.
    let trail = t.audit_trail(attempt).await;
    let expected = [
        ("QUEUED", "ADMITTED", "admit"),
        ("ADMITTED", "HOLD", "hold"),
        ("HOLD", "PAYMENT_PENDING", "checkout"),
        ("PAYMENT_PENDING", "CONFIRMED", "payment_succeeded"),
    ];
    let trail: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    assert_eq!(trail, expected);
    for kind in [
        "sluice.attempt.admitted",
        "sluice.attempt.held",
        "sluice.attempt.payment_pending",
        "sluice.attempt.confirmed",
    ] {
        assert_eq!(t.outbox_count(kind).await, 1, "{kind}");
    }
    t.stop().await;
}

async fn admission_timeout_frees_the_slot(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "admission_ttl_secs": 1, "max_active": 1 }))
        .await;
    let (attempt, _) = t.admitted(&sale, "alice").await;
    let second = t.join(&sale, "bob").await;
    let bobs = second["attempt_id"].as_str().unwrap();
    assert_eq!(
        t.status(bobs, "bob").await["state"],
        "QUEUED",
        "the cap of 1 is taken by alice"
    );

    let expired = t.wait_for(&attempt, "alice", "EXPIRED", WAIT).await;
    assert_eq!(expired["reason"], "admission_timeout");
    // Alice's slot went back: bob is admitted.
    t.wait_for(bobs, "bob", "ADMITTED", WAIT).await;
    t.stop().await;
}

async fn hold_timeout_gives_the_stock_back(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 5, "hold_ttl_secs": 1 }))
        .await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    let held = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": token, "quantity": 3 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    assert_eq!(t.stats(&sale).await["remaining"], 2);

    let expired = t.wait_for(&attempt, "alice", "EXPIRED", WAIT).await;
    assert_eq!(expired["reason"], "hold_timeout");
    assert_eq!(t.stats(&sale).await["remaining"], 5);
    let queue = t
        .app
        .queue
        .stats(sluice::domain::SaleId::parse(&sale).unwrap())
        .await
        .unwrap();
    assert_eq!(queue.remaining, 5);
    // Checkout after expiry is refused with 410.
    assert_problem(
        t.checkout(&attempt, "alice").await,
        410,
        "/problems/attempt-expired",
    )
    .await;
    t.stop().await;
}

async fn payment_failed_and_payment_timeout_give_the_stock_back(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 5, "payment_ttl_secs": 1 }))
        .await;

    // Failed.
    let (attempt, token) = t.admitted(&sale, "alice").await;
    t.hold(
        &attempt,
        "alice",
        json!({ "admission_token": token, "quantity": 2 }),
    )
    .await;
    let paying: serde_json::Value = t.checkout(&attempt, "alice").await.json().await.unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    let ack = t.webhook("evt_fail_1", "payment.failed", reference).await;
    assert_eq!(ack.status(), 200);
    let status = t.status(&attempt, "alice").await;
    assert_eq!(
        (status["state"].as_str(), status["reason"].as_str()),
        (Some("EXPIRED"), Some("payment_failed"))
    );
    assert_eq!(t.stats(&sale).await["remaining"], 5);

    // Timed out.
    let (attempt, token) = t.admitted(&sale, "bob").await;
    t.hold(
        &attempt,
        "bob",
        json!({ "admission_token": token, "quantity": 2 }),
    )
    .await;
    let paying = t.checkout(&attempt, "bob").await;
    assert_eq!(paying.status(), 200);
    assert_eq!(t.stats(&sale).await["remaining"], 3);
    let expired = t.wait_for(&attempt, "bob", "EXPIRED", WAIT).await;
    assert_eq!(expired["reason"], "payment_timeout");
    assert_eq!(t.stats(&sale).await["remaining"], 5);
    let queue = t
        .app
        .queue
        .stats(sluice::domain::SaleId::parse(&sale).unwrap())
        .await
        .unwrap();
    assert_eq!((queue.remaining, queue.active), (5, 0));
    t.stop().await;
}

async fn release_gives_the_stock_back_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    t.hold(
        &attempt,
        "alice",
        json!({ "admission_token": token, "quantity": 4 }),
    )
    .await;
    for _ in 0..3 {
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
        let released: serde_json::Value = released.json().await.unwrap();
        assert_eq!(released["reason"], "released");
    }
    assert_eq!(
        t.stats(&sale).await["remaining"],
        5,
        "returned exactly once"
    );
    let queue = t
        .app
        .queue
        .stats(sluice::domain::SaleId::parse(&sale).unwrap())
        .await
        .unwrap();
    assert_eq!(queue.remaining, 5);
    t.stop().await;
}

async fn duplicate_join_answers_the_same_attempt_and_position_and_leave_moves_others_up(
    backend: Backend,
) {
    let t = TestApp::spawn_on(backend).await;
    // One admission per minute: everybody waits.
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let a = t.join(&sale, "a").await;
    let b = t.join(&sale, "b").await;
    let c = t.join(&sale, "c").await;
    let again = t.join(&sale, "b").await;
    assert_eq!(again["attempt_id"], b["attempt_id"]);
    assert_eq!(again["position"], b["position"]);
    assert_eq!(
        a["position"].as_u64().unwrap() + 1,
        b["position"].as_u64().unwrap()
    );

    let b_id = b["attempt_id"].as_str().unwrap();
    let left = t
        .as_user(Method::DELETE, &format!("/v1/attempts/{b_id}"), "b")
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 200);
    let left: serde_json::Value = left.json().await.unwrap();
    assert_eq!(
        (left["state"].as_str(), left["reason"].as_str()),
        (Some("EXPIRED"), Some("left"))
    );
    // Among the expiries by cause an SRE reads, though no ledger row changed.
    assert_eq!(
        t.counter(TRANSITIONS, &expired_from_queue("leave")).await,
        1.0
    );
    let c_now = t.status(c["attempt_id"].as_str().unwrap(), "c").await;
    assert_eq!(
        c_now["position"], b["position"],
        "c moved up into b's place"
    );
    assert_eq!(c_now["waiting"], 2);
    assert!(c_now["estimated_wait_secs"].as_u64().unwrap() > 0);

    // Joining after leaving is a new attempt at the back.
    let b_again = t.join(&sale, "b").await;
    assert_ne!(b_again["attempt_id"], b["attempt_id"]);
    assert_eq!(b_again["position"], 3);
    t.stop().await;
}

async fn join_after_close_is_refused(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({})).await;
    let closed = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/close"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 200);
    join_is_refused_as_closed(&t, &sale, "late").await;
    t.stop().await;
}

async fn join_is_refused_as_closed(t: &TestApp, sale: &str, user: &str) {
    let resp = t
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
        .send()
        .await
        .unwrap();
    assert_problem(resp, 409, "/problems/sale-closed").await;
}

/// `closes_at` ends the joins, not the queue: who waits by then is still admitted in turn, as
/// the spec says (admission once stopped at `closes_at`, leaving them waiting for good); once
/// nobody waits, the sale closes by itself.
async fn after_closes_at_joins_are_refused_and_the_waiting_still_admitted(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let closes_at = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let sale = t
        .create_sale(json!({ "rate_per_minute": 6000, "closes_at": closes_at }))
        .await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let early = t.join(&sale, "early").await;
    let early = early["attempt_id"].as_str().unwrap();
    let left = closes_at - chrono::Utc::now() + chrono::Duration::milliseconds(200);
    tokio::time::sleep(left.to_std().unwrap_or_default()).await;
    join_is_refused_as_closed(&t, &sale, "late").await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    t.wait_for(early, "early", "ADMITTED", WAIT).await;
    // Nobody waits any more: its admitter closes the sale (the offer and the page say so).
    let until = std::time::Instant::now() + WAIT;
    let path = format!("/v1/sales/{sale}");
    let mut now = t.admin_json(Method::GET, &path).await;
    while now["status"] != "closed" && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        now = t.admin_json(Method::GET, &path).await;
    }
    assert_eq!(now["status"], "closed", "{now}");
    assert_eq!(t.outbox_count("sluice.sale.closed").await, 1);
    t.stop().await;
}

/// Who waits learns the sale is sold out as soon as nothing is free and nothing held could come
/// back, not at their turn (which, the active cap filling with users who find nothing to hold,
/// could be hours away).
async fn waiting_users_are_told_at_once_when_it_sells_out(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 1 })).await;
    let (_, payment) = t.paying(&sale, "alice", 1).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let bob = t.join(&sale, "bob").await;
    let bob = bob["attempt_id"].as_str().unwrap();
    let waiting = t.status(bob, "bob").await;
    assert_eq!(waiting["state"], "QUEUED");
    assert!(
        waiting.get("sold_out").is_none(),
        "alice may not pay: {waiting}"
    );

    let reference = payment["reference"].as_str().unwrap();
    let paid = t.webhook("evt-paid", "payment.succeeded", reference).await;
    assert_eq!(paid.status(), 200);
    let told = t.status(bob, "bob").await;
    assert_eq!(
        (told["state"].as_str(), told["sold_out"].as_bool()),
        (Some("QUEUED"), Some(true)),
        "{told}"
    );
    t.stop().await;
}

const TRANSITIONS: &str = "sluice_transitions_total";

/// The labels of waiting attempts' expiries by `cause`.
fn expired_from_queue(cause: &str) -> [(&str, &str); 3] {
    [("from", "QUEUED"), ("to", "EXPIRED"), ("cause", cause)]
}

/// Nobody waiting in a closed sale will be admitted: their attempts end EXPIRED (`sale_closed`)
/// at once, in a poll and in a status stream, instead of waiting in a queue that never moves.
async fn closing_a_sale_ends_the_attempts_still_waiting(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({})).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let alice = t.join(&sale, "alice").await;
    let bob = t.join(&sale, "bob").await;
    let (alice, bob) = (
        alice["attempt_id"].as_str().unwrap(),
        bob["attempt_id"].as_str().unwrap(),
    );
    let mut stream = t
        .as_user(Method::GET, &format!("/v1/attempts/{bob}/events"), "bob")
        .send()
        .await
        .unwrap();
    let first = stream.chunk().await.unwrap().expect("a first event");
    assert!(String::from_utf8_lossy(&first).contains("\"QUEUED\""));
    // Paused, they still wait.
    assert_eq!(t.status(alice, "alice").await["state"], "QUEUED");

    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    // Both are counted among the expiries by cause, once: closing again counts nobody.
    let closed_out = expired_from_queue("sale_closed");
    assert_eq!(t.counter(TRANSITIONS, &closed_out).await, 2.0);
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    assert_eq!(t.counter(TRANSITIONS, &closed_out).await, 2.0);
    let ended = t.status(alice, "alice").await;
    assert_eq!(
        (ended["state"].as_str(), ended["reason"].as_str()),
        (Some("EXPIRED"), Some("sale_closed")),
        "{ended}"
    );
    assert!(ended["position"].is_null(), "{ended}");
    let mut seen = String::new();
    while let Some(chunk) = tokio::time::timeout(WAIT, stream.chunk())
        .await
        .expect("the stream ends within its poll interval")
        .unwrap()
    {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        seen.contains("\"EXPIRED\"") && seen.contains("\"sale_closed\""),
        "{seen}"
    );
    t.stop().await;
}

async fn seats_are_held_all_or_nothing_and_never_twice(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "seats": ["A1", "A2", "A3"] }))
        .await;
    let (a, a_token) = t.admitted(&sale, "alice").await;
    let (b, b_token) = t.admitted(&sale, "bob").await;
    let held = t
        .hold(
            &a,
            "alice",
            json!({ "admission_token": a_token, "seat_ids": ["A1", "A2"] }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let taken = t
        .hold(
            &b,
            "bob",
            json!({ "admission_token": b_token, "seat_ids": ["A2", "A3"] }),
        )
        .await;
    assert_problem(taken, 409, "/problems/seat-taken").await;
    // Nothing of bob's request was taken: A3 is still free.
    let ok = t
        .hold(
            &b,
            "bob",
            json!({ "admission_token": b_token, "seat_ids": ["A3"] }),
        )
        .await;
    assert_eq!(ok.status(), 200);
    let quantity = t
        .hold(
            &b,
            "bob",
            json!({ "admission_token": b_token, "quantity": 1 }),
        )
        .await;
    assert_eq!(
        quantity.status(),
        200,
        "a repeated hold answers the existing hold"
    );
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    t.stop().await;
}

async fn per_user_limit_is_enforced(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "per_user_limit": 2 }))
        .await;
    let (a, token) = t.admitted(&sale, "alice").await;
    let over = t
        .hold(
            &a,
            "alice",
            json!({ "admission_token": token, "quantity": 3 }),
        )
        .await;
    assert_problem(over, 409, "/problems/limit-reached").await;
    let ok = t
        .hold(
            &a,
            "alice",
            json!({ "admission_token": token, "quantity": 2 }),
        )
        .await;
    assert_eq!(ok.status(), 200);
    t.stop().await;
}

/// A waiting user who stops polling loses the place (EXPIRED, abandoned); one who polls as told
/// (`poll_after_ms` is capped to a third of the abandonment time) keeps it.
#[tokio::test]
async fn waiting_users_who_stop_polling_lose_their_place() {
    let t =
        TestApp::spawn_with(|c| c.workers.abandon_after_secs = sluice::config::Seconds(3)).await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    t.admin_json(reqwest::Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let gone = t.join(&sale, "wanders-off").await;
    let stays = t.join(&sale, "stays").await;
    let gone = gone["attempt_id"].as_str().unwrap().to_owned();
    let stays_id = stays["attempt_id"].as_str().unwrap().to_owned();
    assert!(stays["poll_after_ms"].as_u64().unwrap() <= 1000, "{stays}");
    t.admin_json(reqwest::Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    // Only "stays" asks (asking is a sign of life), for longer than the abandonment time.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(4500);
    while std::time::Instant::now() < until {
        let status = t.status(&stays_id, "stays").await;
        assert_eq!(status["state"], "QUEUED", "{status}");
        let poll = status["poll_after_ms"].as_u64().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(poll.min(1000))).await;
    }
    let other = t.status(&gone, "wanders-off").await;
    assert_eq!(other["state"], "EXPIRED", "{other}");
    assert_eq!(other["reason"], "abandoned", "{other}");
    assert_eq!(
        t.counter(TRANSITIONS, &expired_from_queue("abandon")).await,
        1.0
    );
    let status = t.status(&stays_id, "stays").await;
    assert_eq!(status["state"], "QUEUED");
    assert_eq!(status["position"], 1, "moved up: {status}");
    t.stop().await;
}

/// A lottery at the opening: everyone who joined before `opens_at` is ordered by SHA-1 of
/// `<seed>:<user id>` (re-derivable from the published seed, not arrival order); a later join
/// comes after them.
#[tokio::test]
async fn a_lottery_orders_the_early_joiners_by_the_published_seed() {
    let t = TestApp::spawn().await;
    let opens_at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let sale = t
        .create_sale(json!({
            "opens_at": opens_at, "rate_per_minute": 1, "quantity": 100,
            "opening": "lottery_at_open", "lottery_seed": "drand-round-4242"
        }))
        .await;
    let got = t
        .admin_json(reqwest::Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(got["opening"], "lottery_at_open");
    assert_eq!(got["lottery_seed"], "drand-round-4242");
    let users: Vec<String> = (0..12).map(|i| format!("early-{i:02}")).collect();
    let mut attempts = Vec::new();
    for user in &users {
        attempts.push(
            t.join(&sale, user).await["attempt_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Anyone can re-derive the order from the seed.
    let key = |user: &str| {
        let d = ring::digest::digest(
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            format!("drand-round-4242:{user}").as_bytes(),
        );
        hex::encode(d.as_ref())
    };
    let mut expected = users.clone();
    expected.sort_by_key(|u| key(u));
    assert_ne!(expected, users, "the draw differs from arrival order");

    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let late = t.join(&sale, "late-comer").await;
    // Rate 1/min: at most the first is admitted; everyone else stands in the drawn order.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let order = loop {
        let mut placed: Vec<(u64, String)> = Vec::new();
        for (user, attempt) in users.iter().zip(&attempts) {
            let status = t.status(attempt, user).await;
            let position = match status["state"].as_str() {
                Some("QUEUED") => status["position"].as_u64().unwrap(),
                _ => 0, // admitted: the head of the draw
            };
            placed.push((position, user.clone()));
        }
        placed.sort();
        let order: Vec<String> = placed.into_iter().map(|(_, u)| u).collect();
        if order == expected || std::time::Instant::now() > deadline {
            break order;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        order, expected,
        "the order at the opening is the published draw"
    );
    let late = t
        .status(late["attempt_id"].as_str().unwrap(), "late-comer")
        .await;
    assert_eq!(
        late["position"], late["waiting"],
        "the late join is last: {late}"
    );
    t.stop().await;
}
