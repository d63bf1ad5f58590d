//! The queue store is rebuilt from the ledger: after an embedded restart (the in-process store
//! finds its waiting lines on disk, and the rest is rebuilt) and after Redis loses everything
//! mid-sale. Confirmations and holds survive; waiting users keep their places after the
//! embedded restart and are told to join again after the Redis loss; no unit is sold twice.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, fresh_database, test_config, Backend, PrivateRedis, TestApp};

#[tokio::test]
async fn an_embedded_restart_keeps_the_ledger_and_rebuilds_the_counters() {
    let t = TestApp::spawn_on(Backend::Embedded).await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "max_active": 2, "per_user_limit": 3 }))
        .await;
    // alice confirms 2, bob holds 3, carol waits (admission paused).
    let (a, a_token) = t.admitted(&sale, "alice").await;
    t.hold(
        &a,
        "alice",
        json!({ "admission_token": a_token, "quantity": 2 }),
    )
    .await;
    let reference = t
        .checkout(&a, "alice")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap()["payment"]["reference"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        t.webhook("evt_restart", "payment.succeeded", &reference)
            .await
            .status(),
        200
    );
    let (b, b_token) = t.admitted(&sale, "bob").await;
    assert_eq!(
        t.hold(
            &b,
            "bob",
            json!({ "admission_token": b_token, "quantity": 3 })
        )
        .await
        .status(),
        200
    );
    let paused = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
    let carol = t.join(&sale, "carol").await["attempt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(t.status(&carol, "carol").await["state"], "QUEUED");

    let config = (*t.app.config).clone();
    t.stop().await;
    let t = TestApp::spawn_config(config).await;

    assert_eq!(t.status(&a, "alice").await["state"], "CONFIRMED");
    let bob = t.status(&b, "bob").await;
    assert_eq!(
        (bob["state"].as_str(), bob["hold"]["quantity"].as_u64()),
        (Some("HOLD"), Some(3))
    );
    assert_eq!(t.stats(&sale).await["remaining"], 5);
    let sale_id = sluice::domain::SaleId::parse(&sale).unwrap();
    assert_eq!(
        t.app.queue.stats(sale_id).await.unwrap().remaining,
        5,
        "counters rebuilt from the ledger"
    );
    let kept = t.status(&carol, "carol").await;
    assert_eq!(
        (kept["state"].as_str(), kept["position"].as_u64()),
        (Some("QUEUED"), Some(1)),
        "the waiting line is kept on disk: {kept}"
    );

    let resumed = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    // Bob's rebuilt hold gives its units back once; the rest sells, and no more.
    let released = t
        .as_user(Method::DELETE, &format!("/v1/attempts/{b}/hold"), "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(released.status(), 200);
    assert_eq!(t.app.queue.stats(sale_id).await.unwrap().remaining, 8);
    let (c, c_token) = t.admitted(&sale, "carol").await;
    let (d, d_token) = t.admitted(&sale, "dave").await;
    assert_eq!(
        t.hold(
            &c,
            "carol",
            json!({ "admission_token": c_token, "quantity": 3 })
        )
        .await
        .status(),
        200
    );
    assert_eq!(
        t.hold(
            &d,
            "dave",
            json!({ "admission_token": d_token, "quantity": 3 })
        )
        .await
        .status(),
        200
    );
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    t.stop().await;
}

#[tokio::test]
async fn redis_flushed_mid_sale_oversells_nothing() {
    let dir = std::env::temp_dir().join(format!("sluice-flush-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = crate::helpers::free_port();
    let _redis = PrivateRedis::start(port, &dir);
    let redis_url = format!("redis://127.0.0.1:{port}");
    let t = TestApp::spawn_config({
        let mut c = test_config();
        c.ledger.url = fresh_database().await;
        c.queue.url = redis_url.clone();
        c
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 100, "max_active": 300, "per_user_limit": 1 }))
        .await;
    let users: Vec<String> = (0..300).map(|i| format!("u{i}")).collect();
    let admitted = join_all(users.iter().map(|u| t.admitted(&sale, u))).await;
    // 50 units are held before the flush.
    let before =
        join_all(users.iter().zip(&admitted).take(50).map(|(u, (a, token))| {
            t.hold(a, u, json!({ "admission_token": token, "quantity": 1 }))
        }))
        .await;
    assert!(before.iter().all(|r| r.status() == 200));
    let waiting = t.join(&sale, "late").await["attempt_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    // `sluice reconcile` (the real binary) rebuilds the sale from the ledger.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("reconcile")
        .arg("--sale")
        .arg(&sale)
        .env("SLUICE__QUEUE__URL", &redis_url)
        .env("SLUICE__QUEUE__KEY_PREFIX", &t.app.config.queue.key_prefix)
        .env("SLUICE__LEDGER__URL", &t.app.config.ledger.url)
        .env(
            "SLUICE__AUTH__ADMIN_KEY",
            t.app.config.auth.admin_key.expose(),
        )
        .env(
            "SLUICE__AUTH__USER_JWT_HS256_SECRET",
            t.app
                .config
                .auth
                .user_jwt_hs256_secret
                .as_ref()
                .unwrap()
                .expose(),
        )
        .env(
            "SLUICE__PAYMENTS__WEBHOOK_SECRET",
            t.app.config.payments.webhook_secret.expose(),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("rebuilt from the ledger"));

    // The waiting user lost the place and is told so; admitted users keep theirs.
    let lost = t
        .as_user(Method::GET, &format!("/v1/attempts/{waiting}"), "late")
        .send()
        .await
        .unwrap();
    assert_problem(lost, 410, "/problems/rejoin").await;
    let t = &t;
    let after = join_all(
        users
            .iter()
            .zip(&admitted)
            .skip(50)
            .map(|(u, (a, token))| async move {
                t.hold(a, u, json!({ "admission_token": token, "quantity": 1 }))
                    .await
                    .status()
                    .as_u16()
            }),
    )
    .await;
    assert_eq!(after.iter().filter(|s| **s >= 500).count(), 0, "no 5xx");
    assert_eq!(
        after.iter().filter(|s| **s == 200).count(),
        50,
        "exactly the 50 units left"
    );
    let stats = t.stats(&sale).await;
    assert_eq!(
        (stats["remaining"].as_u64(), stats["holding"].as_u64()),
        (Some(0), Some(100)),
        "0 oversold"
    );

    // A second flush with nobody reconciling: the service rebuilds by itself on first use.
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let joined = t.join(&sale, "after-flush").await;
    assert_eq!(joined["state"], "QUEUED");
    let sale_id = sluice::domain::SaleId::parse(&sale).unwrap();
    assert_eq!(
        t.app.queue.stats(sale_id).await.unwrap().remaining,
        0,
        "still sold out"
    );
    crate::reliability::record(
        "Redis FLUSHALL mid-sale (250 concurrent holds for the 50 units left)",
        &[
            ("holds granted", "50 of 250".into()),
            ("units oversold", "0".into()),
            ("5xx", "0".into()),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failover can lose a join's write after its answer went out: the buyer's attempt is then
/// in neither store. Their status says to join again (410 `/problems/rejoin`), as after a
/// rebuild, not 404; joining again places them.
#[tokio::test]
async fn a_join_a_failover_lost_is_told_to_join_again() {
    let t = TestApp::spawn_on(Backend::Servers).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    // Paused: the buyer stays in line.
    let paused = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
    let joined = t.join(&sale, "lost").await;
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
    // The store loses the user's waiting entry, as a replica promoted before the write
    // reached it would not have it.
    let redis = redis::Client::open(crate::helpers::redis_url()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let base = format!("{}:{{sale:{sale}}}", t.app.config.queue.key_prefix);
    let dropped: i64 = redis::cmd("EVAL")
        .arg(
            "local buckets = redis.call('HGET', KEYS[1] .. ':meta', 'layout') == '2' and 65536 or 16384 \
             local b = KEYS[1] .. ':u:' .. (tonumber(string.sub(redis.sha1hex(ARGV[1]), 1, 5), 16) % buckets) \
             return redis.call('HDEL', b, ARGV[1])",
        )
        .arg(1)
        .arg(&base)
        .arg("lost")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(dropped, 1);
    let resp = t
        .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), "lost")
        .send()
        .await
        .unwrap();
    assert_problem(resp, 410, "/problems/rejoin").await;
    let again = t.join(&sale, "lost").await;
    assert_eq!(again["state"], "QUEUED", "{again}");
}
