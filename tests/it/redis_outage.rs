//! Redis stops mid-sale: answers are a quick 503 with Retry-After, never a hang; when Redis is
//! back the service recovers by itself. Uses a private redis-server so other tests are not
//! disturbed.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, free_port, PrivateRedis, TestApp};

#[tokio::test]
async fn redis_down_answers_503_quickly_and_recovers() {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut redis = PrivateRedis::start(port, &dir);
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{port}");
        c.queue.timeout_ms = 150;
    })
    .await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let joined = t.join(&sale, "alice").await;
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();

    redis.stop();
    let mut slowest = Duration::ZERO;
    for user in ["bob", "carol", "dave"] {
        let started = Instant::now();
        let resp = t
            .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
            .send()
            .await
            .unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(resp.headers().contains_key("retry-after"));
        assert_problem(resp, 503, "/problems/unavailable").await;
    }
    let started = Instant::now();
    let status = t
        .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), "alice")
        .send()
        .await
        .unwrap();
    slowest = slowest.max(started.elapsed());
    assert_problem(status, 503, "/problems/unavailable").await;
    assert!(slowest < Duration::from_millis(200), "503 took {slowest:?}");
    let ready = t.http.get(t.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);

    // Back: the same port, an empty Redis (its data is gone, as after a failover without
    // persistence). The service reconnects by itself and rebuilds the sale from the ledger.
    let _redis = PrivateRedis::start(port, &redis.dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = t
            .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), "erin")
            .send()
            .await
            .unwrap();
        if resp.status() == 202 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "did not recover: {}",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready = t.http.get(t.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    crate::reliability::record(
        "Redis killed mid-sale, back empty",
        &[
            (
                "slowest 503 + Retry-After",
                format!("{} ms", slowest.as_millis()),
            ),
            ("hangs", "0".into()),
            ("recovered and rebuilt from the ledger", "yes".into()),
        ],
    );
    t.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
