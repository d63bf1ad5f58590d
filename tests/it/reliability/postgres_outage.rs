//! PostgreSQL stops mid-sale (its own cluster, stopped at once): the paths that need it answer
//! 503 + Retry-After within the ledger's acquire timeout, never hang; join and the status of
//! waiting users keep answering from Redis; admissions wait. Back up, it all resumes by
//! itself and nothing is oversold.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, PrivatePostgres, TestApp};

#[tokio::test]
async fn postgres_down_fails_fast_where_needed_and_the_waiting_room_keeps_answering() {
    let pg = PrivatePostgres::start();
    let t = TestApp::spawn_with(|c| {
        c.ledger.url = pg.url.clone();
        c.ledger.acquire_timeout_ms = sluice::config::Millis(200);
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "max_active": 2 }))
        .await;
    let (holder, holder_token) = t.admitted(&sale, "holder").await;
    let (late, late_token) = t.admitted(&sale, "late").await;
    let held = t
        .hold(
            &holder,
            "holder",
            json!({ "admission_token": holder_token, "quantity": 2 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let waiter = t.join(&sale, "waiter").await;
    let waiter_id = waiter["attempt_id"].as_str().unwrap().to_owned();

    pg.stop();
    // The waiting room answers from Redis alone.
    let mut answered = 0;
    for i in 0..20 {
        let joined = t
            .as_user(
                Method::POST,
                &format!("/v1/sales/{sale}/attempts"),
                &format!("walk-in-{i}"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 202);
        let status = t.status(&waiter_id, "waiter").await;
        assert_eq!(status["state"], "QUEUED");
        answered += 2;
    }
    // What needs the ledger fails fast, with Retry-After.
    let mut slowest = Duration::ZERO;
    let calls: Vec<(&str, reqwest::RequestBuilder)> = vec![
        (
            "hold",
            t.as_user(Method::POST, &format!("/v1/attempts/{late}/hold"), "late")
                .json(&json!({ "admission_token": late_token, "quantity": 1 })),
        ),
        (
            "checkout",
            t.as_user(
                Method::POST,
                &format!("/v1/attempts/{holder}/checkout"),
                "holder",
            ),
        ),
        (
            "stats",
            t.admin(Method::GET, &format!("/v1/sales/{sale}/stats")),
        ),
    ];
    for (what, call) in calls {
        let started = Instant::now();
        let resp = call.send().await.unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(resp.headers().contains_key("retry-after"), "{what}");
        assert_problem(resp, 503, "/problems/unavailable").await;
    }
    assert!(slowest < Duration::from_secs(2), "503 took {slowest:?}");
    let ready = t.http.get(t.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);

    // Back: the same requests go through, with no unit taken twice.
    pg.start_again();
    let deadline = Instant::now() + Duration::from_secs(20);
    let recovered = loop {
        let resp = t
            .hold(
                &late,
                "late",
                json!({ "admission_token": late_token, "quantity": 1 }),
            )
            .await;
        if resp.status() == 200 {
            break Instant::now();
        }
        if Instant::now() >= deadline {
            let status = resp.status();
            let body = resp.text().await.unwrap();
            let view = t.status(&late, "late").await;
            panic!("no recovery: {status} {body}; attempt: {view}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stats = t.stats(&sale).await;
    assert_eq!(stats["remaining"], 7, "2 + 1 held of 10: {stats}");
    assert_eq!(stats["holding"], 2);
    let ready = t.http.get(t.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let _ = recovered;
    super::record(
        "PostgreSQL stopped mid-sale",
        &[
            (
                "joins and waiting statuses answered while down",
                answered.to_string(),
            ),
            (
                "slowest 503 (acquire timeout 200 ms)",
                format!("{} ms", slowest.as_millis()),
            ),
            ("recovered by itself", "yes".into()),
            ("units oversold", "0".into()),
        ],
    );
    t.stop().await;
}

/// With the default acquire timeout (3 s), under load: once the first call finds PostgreSQL
/// down, every answer that needs the ledger (stats, holds, the provider's webhooks) is a 503 +
/// Retry-After within 200 ms (the breaker), joins and a waiting user's status never wait on
/// it, and once PostgreSQL is back the ledger answers within a second (the breaker's probe).
/// No confirmation is lost (the provider's retries after the return confirm the payments the
/// outage refused, the earlier ones stand) and stock is conserved, in the ledger and the store.
#[tokio::test]
async fn a_down_ledger_fails_fast_after_the_first_failure_and_recovers_within_a_second() {
    let pg = PrivatePostgres::start();
    let t = TestApp::spawn_with(|c| {
        c.ledger.url = pg.url.clone();
        c.ledger.acquire_timeout_ms = sluice::config::Millis(3000);
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "per_user_limit": 1 }))
        .await;
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let (late, late_token) = t.admitted(&sale, "late").await;
    let mut confirmed = Vec::new();
    let mut paying = Vec::new();
    for i in 0..6 {
        let (attempt, payment) = t.paying(&sale, &format!("payer-{i}"), 1).await;
        let reference = payment["reference"].as_str().unwrap().to_owned();
        if i < 2 {
            let resp = t
                .webhook(&format!("evt-before-{i}"), "payment.succeeded", &reference)
                .await;
            assert_eq!(resp.status(), 200);
            confirmed.push(attempt);
        } else {
            paying.push((attempt, reference));
        }
    }
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let waiter = t.join(&sale, "waiter").await;
    let waiter_id = waiter["attempt_id"].as_str().unwrap().to_owned();

    pg.stop();
    // The first call that needs the ledger may wait out the pool; it opens the breaker.
    let first = t
        .admin(Method::GET, &format!("/v1/sales/{sale}/stats"))
        .send()
        .await
        .unwrap();
    assert_problem(first, 503, "/problems/unavailable").await;
    // Load: stats, holds and webhooks (each needs the ledger), joins and a waiting user's
    // status (neither does), 20 rounds of each at once.
    let ledger_answers = futures_util::future::join_all((0..60).map(|i| {
        let (t, sale, late, late_token, paying) = (&t, &sale, &late, &late_token, &paying);
        async move {
            let started = Instant::now();
            let resp = match i % 3 {
                0 => t
                    .admin(Method::GET, &format!("/v1/sales/{sale}/stats"))
                    .send()
                    .await
                    .unwrap(),
                1 => {
                    t.hold(
                        late,
                        "late",
                        json!({ "admission_token": late_token, "quantity": 1 }),
                    )
                    .await
                }
                _ => {
                    let (_, reference) = &paying[i % paying.len()];
                    t.webhook(&format!("evt-during-{i}"), "payment.succeeded", reference)
                        .await
                }
            };
            let took = started.elapsed();
            assert!(resp.headers().contains_key("retry-after"));
            assert_problem(resp, 503, "/problems/unavailable").await;
            took
        }
    }));
    let waiting_room = futures_util::future::join_all((0..20).map(|i| {
        let (t, sale, waiter_id) = (&t, &sale, &waiter_id);
        async move {
            let started = Instant::now();
            let joined = t
                .as_user(
                    Method::POST,
                    &format!("/v1/sales/{sale}/attempts"),
                    &format!("walk-in-{i}"),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(joined.status(), 202, "joins are unaffected");
            assert_eq!(t.status(waiter_id, "waiter").await["state"], "QUEUED");
            assert!(
                started.elapsed() < Duration::from_millis(500),
                "a join waited on the ledger"
            );
        }
    }));
    let (mut times, _) = tokio::join!(ledger_answers, waiting_room);
    times.sort();
    let p99 = times[times.len() * 99 / 100];
    assert!(
        p99 < Duration::from_millis(200),
        "503s after the first failure: p99 {p99:?}"
    );

    pg.start_again();
    let back = Instant::now();
    let recovered = loop {
        let resp = t
            .admin(Method::GET, &format!("/v1/sales/{sale}/stats"))
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            break back.elapsed();
        }
        assert!(back.elapsed() < Duration::from_secs(10), "no recovery");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        recovered < Duration::from_secs(1),
        "the ledger answered {recovered:?} after its return"
    );
    // The provider retries what the outage refused.
    for (i, (attempt, reference)) in paying.iter().enumerate() {
        let resp = t
            .webhook(&format!("evt-retry-{i}"), "payment.succeeded", reference)
            .await;
        assert_eq!(resp.status(), 200);
        confirmed.push(attempt.clone());
    }
    let held = t
        .hold(
            &late,
            "late",
            json!({ "admission_token": late_token, "quantity": 1 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    t.assert_confirmed(&confirmed, "no confirmation lost").await;
    let ledger = t.app.ledger.stats(id).await.unwrap();
    assert_eq!((ledger.units_sold, ledger.units_held), (6, 1));
    t.assert_stock_conserved(id, 10).await;
    assert_eq!(
        t.app.queue.stats(id).await.unwrap().remaining,
        3,
        "and the store agrees"
    );
    super::record(
        "PostgreSQL stopped under load, default acquire timeout (3 s)",
        &[
            (
                "503 after the first failure, p99",
                format!("{} ms ({} answers)", p99.as_millis(), times.len()),
            ),
            (
                "answering again after its return",
                format!("{} ms", recovered.as_millis()),
            ),
            ("joins and waiting statuses unaffected", "20 of 20".into()),
            ("confirmations lost", "0 of 6".into()),
            ("stock conserved", "10 of 10".into()),
        ],
    );
    t.stop().await;
}

/// PostgreSQL killed while callers wait for a ledger connection (a pool of two, sixty callers
/// asking at once), at the default acquire timeout (3 s): each caller waiting when the
/// database dies gets its 503 + Retry-After within half a second, not after the acquire
/// timeout, because the breaker frees those already waiting when it opens.
#[tokio::test]
async fn callers_waiting_for_a_connection_when_postgres_dies_are_answered_within_half_a_second() {
    let pg = std::sync::Arc::new(PrivatePostgres::start());
    let t = TestApp::spawn_with(|c| {
        c.ledger.url = pg.url.clone();
        c.ledger.max_connections = std::num::NonZeroU32::new(2).unwrap();
    })
    .await;
    let sale = t.create_sale(json!({ "quantity": 10 })).await;
    let started = Instant::now();
    let kill_at = Duration::from_millis(400);
    let until = Duration::from_millis(1800);
    let killer = tokio::spawn({
        let pg = pg.clone();
        async move {
            tokio::time::sleep(kill_at).await;
            tokio::task::spawn_blocking(move || pg.stop())
                .await
                .unwrap();
        }
    });
    let answers = futures_util::future::join_all((0..60).map(|_| {
        let (t, sale) = (&t, &sale);
        async move {
            let mut answers = Vec::new();
            while started.elapsed() < until {
                let sent = Instant::now();
                let resp = t
                    .admin(Method::GET, &format!("/v1/sales/{sale}/stats"))
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                if status == 503 {
                    assert!(resp.headers().contains_key("retry-after"));
                }
                answers.push((status, sent.elapsed()));
            }
            answers
        }
    }))
    .await;
    killer.await.unwrap();
    let answers: Vec<(u16, Duration)> = answers.into_iter().flatten().collect();
    let count = |s: u16| answers.iter().filter(|(status, _)| *status == s).count();
    let slowest = answers.iter().map(|(_, took)| *took).max().unwrap();
    assert!(count(200) > 0 && count(503) > 0, "answers: {answers:?}");
    assert_eq!(count(200) + count(503), answers.len(), "only 200 or 503");
    assert!(
        slowest < Duration::from_millis(500),
        "the slowest of {} answers took {slowest:?}",
        answers.len()
    );
    pg.start_again();
    super::record(
        "PostgreSQL killed while sixty callers wait for a pool of two, default acquire timeout",
        &[
            ("answers", answers.len().to_string()),
            ("503 + Retry-After", count(503).to_string()),
            ("slowest answer", format!("{} ms", slowest.as_millis())),
        ],
    );
    t.stop().await;
}

/// A replica that never read a sale's offer cannot know, with PostgreSQL down, what the sale
/// asks of a join (its proof of work, a presale's list or codes): its joins answer 503 +
/// Retry-After and queue nobody, where they went in unchecked. The replica that served the sale
/// goes on asking for the work from the offer it keeps, and once PostgreSQL is back the new
/// replica asks for it too.
#[tokio::test]
async fn a_replica_that_never_read_the_sale_lets_no_join_in_unchecked_while_postgres_is_down() {
    let pg = PrivatePostgres::start();
    let warm = TestApp::spawn_with(|c| {
        c.ledger.url = pg.url.clone();
        c.ledger.acquire_timeout_ms = sluice::config::Millis(200);
    })
    .await;
    let sale = warm.create_sale(json!({ "rate_per_minute": 1 })).await;
    let set = warm
        .admin(Method::PUT, &format!("/v1/sales/{sale}/proof-of-work"))
        .json(&json!({ "difficulty_bits": 12 }))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let join = |t: &TestApp, user: &str| {
        t.as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
            .send()
    };
    const WORK: &str = "/problems/proof-of-work-required";
    assert_problem(join(&warm, "bot-1").await.unwrap(), 428, WORK).await;
    // A replica that serves requests only (no admitter, which would read the offer).
    let mut config = (*warm.app.config).clone();
    config.workers.enabled = false;
    let cold = TestApp::spawn_config(config).await;

    pg.stop();
    for user in ["bot-2", "bot-3"] {
        let resp = join(&cold, user).await.unwrap();
        assert!(resp.headers().contains_key("retry-after"), "{user}");
        assert_problem(resp, 503, "/problems/unavailable").await;
    }
    assert_problem(join(&warm, "bot-4").await.unwrap(), 428, WORK).await;
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let store = warm.app.queue.stats(id).await.unwrap();
    assert_eq!(store.waiting, 0, "nobody queued unchecked");

    pg.start_again();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let resp = join(&cold, "bot-5").await.unwrap();
        if resp.status() != 503 || Instant::now() >= deadline {
            assert_problem(resp, 428, WORK).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cold.stop().await;
    warm.stop().await;
}
