//! Reapers racing: two replicas (each with its own reaper) and extra concurrent passes over the
//! same expired holds give every unit back exactly once.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use crate::helpers::TestApp;

#[tokio::test]
async fn racing_reapers_restore_each_hold_exactly_once() {
    let a = TestApp::spawn_with(|c| c.workers.reaper_cron = "*/1 * * * * *".into()).await;
    // A second replica: same ledger, same Redis keys.
    let b = TestApp::spawn_config((*a.app.config).clone()).await;
    let sale = a
        .create_sale(json!({ "quantity": 60, "hold_ttl_secs": 3, "per_user_limit": 2 }))
        .await;
    let users: Vec<String> = (0..30).map(|i| format!("u{i}")).collect();
    let admitted = join_all(users.iter().enumerate().map(|(i, user)| {
        let (replica, sale) = (if i % 2 == 0 { &a } else { &b }, &sale);
        async move { replica.admitted(sale, user).await }
    }))
    .await;
    let holds = join_all(users.iter().zip(&admitted).map(|(user, (attempt, token))| {
        a.hold(
            attempt,
            user,
            json!({ "admission_token": token, "quantity": 2 }),
        )
    }))
    .await;
    assert!(holds.iter().all(|r| r.status() == 200));
    assert_eq!(a.stats(&sale).await["remaining"], 0);

    // Besides both replicas' cron reapers, hammer the same deadlines with direct passes.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let passes = (0..4).map(|i| {
        let app = if i % 2 == 0 {
            a.app.clone()
        } else {
            b.app.clone()
        };
        async move { sluice::workers::reapers::reap(&app).await }
    });
    join_all(passes).await;

    let deadline = Instant::now() + Duration::from_secs(10);
    while a.stats(&sale).await["expired"]["hold_timeout"]
        .as_u64()
        .unwrap()
        < 30
    {
        assert!(Instant::now() < deadline, "not every hold expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stats = a.stats(&sale).await;
    assert_eq!(stats["remaining"], 60, "every unit back, none twice");
    // Redis follows each commit (the reapers sync their batch just after it).
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let queue = loop {
        let queue = a.app.queue.stats(id).await.unwrap();
        if queue.remaining >= 60 || Instant::now() > deadline {
            break queue;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((queue.remaining, queue.active), (60, 0), "Redis agrees");

    let pool = sqlx::PgPool::connect(&a.app.config.ledger.url)
        .await
        .unwrap();
    let per_attempt: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM attempt_transitions WHERE to_state = 'EXPIRED' GROUP BY attempt_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(per_attempt.len(), 30);
    assert!(
        per_attempt.iter().all(|n| *n == 1),
        "one expiry per attempt: {per_attempt:?}"
    );
    let expired_events: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE event_type = 'sluice.attempt.expired'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(expired_events, 30);
    b.stop().await;
    a.stop().await;
}
