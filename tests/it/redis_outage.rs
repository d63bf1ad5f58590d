//! Redis stops mid-sale: answers are a quick 503 with a Retry-After of 1 to 5 seconds drawn
//! for each answer, never a hang (a sale is
//! still created: the ledger has it); when Redis is back the service recovers by itself. Uses
//! a private redis-server so other tests are not disturbed.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::helpers::{
    assert_problem, free_port, redis_url, CuttableProxy, DelayProxy, PrivateRedis, TestApp,
};

#[tokio::test]
async fn redis_down_answers_503_quickly_and_recovers() {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut redis = PrivateRedis::start(port, &dir);
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{port}");
        c.queue.timeout_ms = sluice::config::Millis(150);
    })
    .await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let joined = t.join(&sale, "alice").await;
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();

    redis.stop();
    let mut slowest = Duration::ZERO;
    // Each 503 asks for 1 to 5 seconds, drawn for each answer: a crowd turned away together
    // comes back spread out.
    let mut waits = std::collections::BTreeSet::new();
    for i in 0..12 {
        let started = Instant::now();
        let resp = t
            .as_user(
                Method::POST,
                &format!("/v1/sales/{sale}/attempts"),
                &format!("joiner-{i}"),
            )
            .send()
            .await
            .unwrap();
        slowest = slowest.max(started.elapsed());
        let wait = crate::helpers::retry_after(&resp);
        assert!((1..=5).contains(&wait), "Retry-After {wait}");
        waits.insert(wait);
        assert_problem(resp, 503, "/problems/unavailable").await;
    }
    assert!(
        waits.len() > 1,
        "every answer asked for the same wait: {waits:?}"
    );
    let started = Instant::now();
    let status = t
        .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), "alice")
        .send()
        .await
        .unwrap();
    slowest = slowest.max(started.elapsed());
    assert_problem(status, 503, "/problems/unavailable").await;
    // Once the kept offer is stale, a join does not also wait for its refresh (the store's
    // counter, with its own timeout) before its own call: one timeout, not two.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = Instant::now();
    let resp = t
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), "frank")
        .send()
        .await
        .unwrap();
    slowest = slowest.max(started.elapsed());
    assert_problem(resp, 503, "/problems/unavailable").await;
    assert!(slowest < Duration::from_millis(200), "503 took {slowest:?}");
    let ready = t.http.get(t.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    // A sale created meanwhile is created (the ledger has it): an error here would have the
    // operator's retry make a second one. The queue store gets it at its first join.
    let created_meanwhile = t.create_sale(json!({})).await;

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
    let first = t.join(&created_meanwhile, "grace").await;
    assert_eq!(first["position"], 1, "{first}");
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

/// Stock given back while Redis is cut off (its data kept) comes back to the queue store once
/// Redis answers again: 20 units held (10 of them paying), Redis cut, 5 payments fail and 5
/// holds are released (answered 200: the ledger freed the units, the queue store never heard),
/// Redis back: within a few seconds the store's counter equals the ledger's and newcomers hold
/// every unit: the queue-sync worker applies what the requests could not.
#[tokio::test]
async fn units_freed_while_redis_is_cut_off_are_sellable_soon_after_it_returns() {
    let (t, proxy, redis) = behind_a_cuttable_proxy().await;
    let sale = t
        .create_sale(json!({ "quantity": 20, "per_user_limit": 2 }))
        .await;
    let mut paying = Vec::new();
    let mut holding = Vec::new();
    for i in 0..10 {
        let user = format!("holder-{i}");
        if i < 5 {
            let (attempt, payment) = t.paying(&sale, &user, 2).await;
            paying.push((attempt, payment["reference"].as_str().unwrap().to_owned()));
        } else {
            holding.push((t.holding(&sale, &user, 2).await, user));
        }
    }
    let remaining = |t: &TestApp| {
        let queue = t.app.queue.clone();
        let sale = sluice::domain::SaleId::parse(&sale).unwrap();
        async move { queue.stats(sale).await.map(|s| s.remaining) }
    };
    assert_eq!(remaining(&t).await.unwrap(), 0);

    proxy.cut(true);
    for (i, (_, reference)) in paying.iter().enumerate() {
        let resp = t
            .webhook(&format!("evt-fail-{i}"), "payment.failed", reference)
            .await;
        assert_eq!(resp.status(), 200, "the ledger takes the failure");
    }
    for (attempt, user) in &holding {
        let resp = t
            .as_user(
                Method::DELETE,
                &format!("/v1/attempts/{attempt}/hold"),
                user,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "the ledger takes the release");
    }
    let sale_id = sluice::domain::SaleId::parse(&sale).unwrap();
    let ledger = t.app.ledger.stats(sale_id).await.unwrap();
    assert_eq!(ledger.remaining, 20, "the ledger freed every unit");
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut(false);

    let back = Instant::now();
    loop {
        if remaining(&t).await.ok() == Some(20) {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the queue store still counts {:?} free of 20",
            remaining(&t).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sellable_after = back.elapsed();
    for i in 0..10 {
        t.holding(&sale, &format!("newcomer-{i}"), 2).await;
    }
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    let metrics = t.metrics().await;
    let applied: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_queue_sync_applied_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(
        applied >= 10.0,
        "the worker applied what the requests could not: {applied}"
    );
    crate::reliability::record(
        "Redis cut off (data kept) while 20 units are given back",
        &[
            (
                "units sellable again after Redis returned",
                format!("{} ms", sellable_after.as_millis()),
            ),
            ("units lost", "0 of 20".into()),
        ],
    );
    t.stop().await;
    let _ = std::fs::remove_dir_all(&redis.dir);
}

/// Waits `within` for the `sluice_queue_sales_behind` gauge to show `n`.
async fn sales_behind_come_to(t: &TestApp, n: f64, within: Duration) {
    let started = Instant::now();
    loop {
        let metrics = t.metrics().await;
        let shown = metrics
            .lines()
            .find_map(|l| l.strip_prefix("sluice_queue_sales_behind "))
            .and_then(|v| v.trim().parse::<f64>().ok());
        if shown == Some(n) {
            return;
        }
        assert!(
            started.elapsed() < within,
            "sales behind: {shown:?}, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// sluice on a private Redis (its data kept on disk) reached through a proxy that can cut it
/// off, with the queue-sync worker every 200 ms.
async fn behind_a_cuttable_proxy() -> (TestApp, CuttableProxy, PrivateRedis) {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let redis = PrivateRedis::start(port, &dir);
    let proxy = CuttableProxy::start(port).await;
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{}", proxy.port);
        c.queue.timeout_ms = sluice::config::Millis(300);
        c.workers.queue_sync_ms = sluice::config::Millis(200);
    })
    .await;
    (t, proxy, redis)
}

/// Redis 20 ms away each way (a delaying proxy): under load, with the default queue timeout,
/// every join and status poll is answered, none 503: a batched question's timeout runs from
/// its own call, not from the wait behind a call in flight.
#[tokio::test]
async fn a_redis_twenty_milliseconds_away_answers_every_join_and_status_with_the_defaults() {
    let redis_port: u16 = redis_url().rsplit(':').next().unwrap().parse().unwrap();
    let proxy = DelayProxy::start(redis_port, Duration::from_millis(20)).await;
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{}", proxy.port);
        c.queue.timeout_ms = sluice::config::Config::default().queue.timeout_ms;
    })
    .await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let users = 200;
    let answers = futures_util::future::join_all((0..users).map(|i| {
        let (t, sale) = (&t, sale.clone());
        async move {
            let user = format!("far-{i}");
            let mut statuses = Vec::new();
            let joined = t
                .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), &user)
                .send()
                .await
                .unwrap();
            statuses.push(joined.status().as_u16());
            let attempt = joined.json::<serde_json::Value>().await.unwrap_or_default()
                ["attempt_id"]
                .as_str()
                .unwrap_or("none")
                .to_owned();
            for _ in 0..3 {
                let status = t
                    .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), &user)
                    .send()
                    .await
                    .unwrap();
                statuses.push(status.status().as_u16());
            }
            statuses
        }
    }))
    .await;
    let all: Vec<u16> = answers.into_iter().flatten().collect();
    let unavailable = all.iter().filter(|s| **s == 503).count();
    assert_eq!(all.len(), users * 4);
    assert_eq!(
        unavailable,
        0,
        "503s with Redis 20 ms away: {unavailable} of {}",
        all.len()
    );
    assert!(all.iter().all(|s| *s == 202 || *s == 200), "{all:?}");
    crate::reliability::record(
        "Redis 20 ms away each way, default queue timeout (150 ms)",
        &[(
            "joins and status polls answered 503",
            format!("0 of {}", all.len()),
        )],
    );
    t.stop().await;
}

/// A sluice on a Redis of the test's own (its port), which the test can kill and start again
/// from its last snapshot (`SAVE`) as a failover loses the last writes. The queue-sync worker
/// replays every second; no drift checker, so the replay alone brings the store back.
async fn on_a_restartable_redis() -> (TestApp, PrivateRedis, u16) {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let redis = PrivateRedis::start(port, &dir);
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{port}");
        c.queue.timeout_ms = sluice::config::Millis(300);
        c.workers.queue_sync_ms = sluice::config::Millis(100);
        c.workers.drift_check_ms = sluice::config::Millis(0);
    })
    .await;
    (t, redis, port)
}

/// Redis restarted from a snapshot older than its last writes (what asynchronous replication
/// loses in a failover, or an fsync window in a crash): 3 releases the ledger saw applied are
/// gone from the store, which holds their 6 units again. The queue-sync worker's replay finds
/// the changes the store has no record of and applies them, once: the units are sellable again
/// and a further replay changes nothing.
#[tokio::test]
async fn changes_a_redis_restart_lost_are_replayed_from_the_log_once() {
    let (t, mut redis, port) = on_a_restartable_redis().await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "per_user_limit": 2 }))
        .await;
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let mut holders = Vec::new();
    for i in 0..5 {
        let user = format!("holder-{i}");
        holders.push((t.holding(&sale, &user, 2).await, user));
    }
    let remaining = || async { t.app.queue.stats(id).await.map(|s| s.remaining) };
    assert_eq!(remaining().await.unwrap(), 0);
    let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = ::redis::cmd("SAVE").query_async(&mut conn).await.unwrap();

    for (attempt, user) in &holders[..3] {
        let resp = t
            .as_user(
                Method::DELETE,
                &format!("/v1/attempts/{attempt}/hold"),
                user,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(
        remaining().await.unwrap(),
        6,
        "the releases reached the store"
    );
    // Wait until the ledger has marked them applied (the request marks after its sync).
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.app.ledger.sync_backlog().await.unwrap().0 > 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Killed, and back from the snapshot taken before the releases.
    redis.stop();
    let _redis = PrivateRedis::start(port, &redis.dir);
    let back = Instant::now();
    loop {
        if remaining().await.ok() == Some(6) {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the store still counts {:?} free of 6",
            remaining().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let replayed_after = back.elapsed();
    let replayed = || async {
        t.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix("sluice_queue_sync_replayed_total "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert_eq!(replayed().await, 3.0, "each lost change replayed");
    tokio::time::sleep(Duration::from_millis(2500)).await; // two more replays
    assert_eq!(replayed().await, 3.0, "a replayed change is applied once");
    assert_eq!(remaining().await.unwrap(), 6);
    for i in 0..3 {
        t.holding(&sale, &format!("newcomer-{i}"), 2).await;
    }
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    crate::reliability::record(
        "Redis restarted from a snapshot older than 3 releases (writes lost)",
        &[
            (
                "lost changes replayed from the queue-sync log",
                format!(
                    "3 of 3, {} ms after Redis returned",
                    replayed_after.as_millis()
                ),
            ),
            ("applied twice", "0".into()),
            ("units lost", "0 of 6".into()),
        ],
    );
    t.stop().await;
    let _ = std::fs::remove_dir_all(&redis.dir);
}

/// Redis restarted from a snapshot taken before a sale was closed (what asynchronous
/// replication loses in a failover): the ledger saw the store take the close, and the store
/// has the sale open again. The queue-sync worker's replay finds the store's version of the
/// sale's settings behind the one it took and writes them again: joins are refused again.
#[tokio::test]
async fn a_sale_change_a_redis_restart_lost_is_written_again() {
    let (t, mut redis, port) = on_a_restartable_redis().await;
    let sale = t.create_sale(json!({})).await;
    t.join(&sale, "alice").await;
    let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = ::redis::cmd("SAVE").query_async(&mut conn).await.unwrap();
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    let join = |user: String| {
        t.as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), &user)
            .send()
    };
    assert_eq!(join("before".into()).await.unwrap().status(), 409);

    // Killed, and back from the snapshot taken before the close.
    redis.stop();
    let _redis = PrivateRedis::start(port, &redis.dir);
    let back = Instant::now();
    for i in 0.. {
        let status = join(format!("late-{i}")).await.unwrap().status();
        if status == 409 {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the store still takes joins for the closed sale: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.stop().await;
    let _ = std::fs::remove_dir_all(&redis.dir);
}

/// An operator's change to a sale while Redis is cut off (its data kept) is taken by the
/// ledger, answered, and followed by the queue store once Redis answers again: a sale closed
/// meanwhile refuses joins and ends the attempts still waiting (`sale_closed`); a sale whose
/// admission changed meanwhile has the new settings in the store.
#[tokio::test]
async fn a_sale_changed_while_redis_is_cut_off_follows_in_the_queue_store_once_it_returns() {
    let (t, proxy, redis) = behind_a_cuttable_proxy().await;
    let closing = t.create_sale(json!({})).await;
    let changing = t.create_sale(json!({ "rate_per_minute": 60 })).await;
    for sale in [&closing, &changing] {
        t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
            .await;
    }
    let alice = t.join(&closing, "alice").await;
    let alice = alice["attempt_id"].as_str().unwrap();
    let carol = t.join(&changing, "carol").await;
    let carol = carol["attempt_id"].as_str().unwrap().to_owned();

    proxy.cut(true);
    let closed = t
        .admin(Method::POST, &format!("/v1/sales/{closing}/close"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 200, "the ledger takes the close");
    let changed = t
        .admin(Method::PUT, &format!("/v1/sales/{changing}/admission"))
        .json(&json!({ "rate_per_minute": 600, "max_active": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200, "the ledger takes the change");
    let record = t
        .admin_json(Method::GET, &format!("/v1/sales/{closing}"))
        .await;
    assert_eq!(record["status"], "closed", "{record}");
    sales_behind_come_to(&t, 2.0, Duration::from_secs(3)).await;
    proxy.cut(false);

    let back = Instant::now();
    let configured_rate = || {
        let queue = t.app.queue.clone();
        let attempt = sluice::domain::AttemptId::parse(&carol).unwrap();
        let user = sluice::domain::UserId::parse("carol").unwrap();
        async move { queue.view(attempt, &user).await.map(|v| v.configured_rate) }
    };
    loop {
        let join = t
            .as_user(
                Method::POST,
                &format!("/v1/sales/{closing}/attempts"),
                "bob",
            )
            .send()
            .await
            .unwrap();
        if join.status() == 409 && configured_rate().await.ok() == Some(600.0) {
            assert_problem(join, 409, "/problems/sale-closed").await;
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the queue store has not followed: a join answers {}, the rate is {:?}",
            join.status(),
            configured_rate().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let followed_after = back.elapsed();
    let ended = t.status(alice, "alice").await;
    assert_eq!(
        (ended["state"].as_str(), ended["reason"].as_str()),
        (Some("EXPIRED"), Some("sale_closed")),
        "{ended}"
    );
    sales_behind_come_to(&t, 0.0, Duration::from_secs(2)).await;
    crate::reliability::record(
        "Redis cut off (data kept) while an operator closes one sale and retunes another",
        &[
            ("changes answered while Redis was cut off", "2 of 2".into()),
            (
                "Redis has both (joins refused, the new rate) after it returned",
                format!("{} ms", followed_after.as_millis()),
            ),
            (
                "waiting attempt of the closed sale",
                "EXPIRED (sale_closed)".into(),
            ),
        ],
    );
    t.stop().await;
    let _ = std::fs::remove_dir_all(&redis.dir);
}

/// Redis's script cache holds every script before the first request (sluice loads them at
/// start), and again within a second of losing them (a restart or a failover to a replica
/// empties it; `SCRIPT FLUSH` here): a script missing from the cache costs its first call
/// two more round trips, which turned into 503s for a burst of joins with Redis 20 ms away.
#[tokio::test]
async fn the_script_cache_is_filled_at_start_and_again_after_redis_loses_it() {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let _redis = PrivateRedis::start(port, &dir);
    let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let cached = |mut conn: ::redis::aio::MultiplexedConnection| async move {
        let info: String = ::redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("number_of_cached_scripts:"))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    assert_eq!(cached(conn.clone()).await, 0, "a fresh Redis");
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{port}");
        c.workers.queue_sync_ms = sluice::config::Millis(200);
    })
    .await;
    let at_start = cached(conn.clone()).await;
    assert!(at_start >= 20, "{at_start} scripts cached at start");

    let _: () = ::redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let flushed = Instant::now();
    while cached(conn.clone()).await < at_start {
        assert!(
            flushed.elapsed() < Duration::from_secs(3),
            "the cache was not filled again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    t.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
