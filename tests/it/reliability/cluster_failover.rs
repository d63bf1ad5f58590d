//! Faults of the sale's primary in a Redis Cluster. A failover under load: the replica takes
//! over with `CLUSTER FAILOVER FORCE` while 120 admitted users hold, release, pay and fail to
//! pay; afterwards the queue store's holdings equal the ledger's (the queue-sync log, its
//! replay and the drift checker bring back whatever the demoted primary took and lost), no
//! unit is sold twice, stock is conserved and every payment answered 200 stands. A pause of
//! the primary's writes (`CLIENT PAUSE … WRITE`, data kept) while units are given back: they
//! are sellable soon after it ends. A failover that lost the store's side of holds the ledger
//! committed, under holds that go on: the store gives up the units the ledger took within
//! 5 s, at the production cadence. They disturb the shared cluster, so they run alone
//! (`.config/nextest.toml`); the failovers fail back at the end.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;
use sluice::domain::SaleId;

use crate::helpers::{redis_cluster_nodes, Backend, TestApp};
use crate::redis_cli::{cli, fail_over_to, primary_and_replica, slot_of};

/// Sends until the answer is not a 503 (the store or the cluster was failing over), at most
/// 100 tries 100 ms apart.
async fn through(send: impl Fn() -> reqwest::RequestBuilder) -> reqwest::Response {
    for _ in 0..100 {
        let resp = send().send().await.unwrap();
        if resp.status() != 503 {
            return resp;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("503 for 10 s");
}

#[tokio::test]
async fn after_a_cluster_failover_under_load_the_store_equals_the_ledger() {
    let seeds = redis_cluster_nodes();
    let seeds: Vec<&str> = seeds.split(',').collect();
    let t = TestApp::spawn_on_with(Backend::ServersOnCluster, |c| {
        c.queue.timeout_ms = sluice::config::Millis(500);
        c.workers.queue_sync_ms = sluice::config::Millis(100);
        c.workers.drift_check_ms = sluice::config::Millis(200);
        c.ledger.acquire_timeout_ms = sluice::config::Millis(500);
    })
    .await;
    let units = 60;
    let sale = t
        .create_sale(json!({ "quantity": units, "per_user_limit": 1, "max_active": 1000, "rate_per_minute": 60000 }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let (primary, replica) = primary_and_replica(seeds[0], slot_of(seeds[0], id));

    let users: Vec<String> = (0..120).map(|i| format!("failover-{i}")).collect();
    let admitted = join_all(users.iter().map(|u| t.admitted(&sale, u))).await;

    // Each user holds, then by its number releases, pays, fails to pay, or keeps the hold;
    // a quarter of a second in, the sale's primary is replaced.
    let failover = async {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let replica = replica.clone();
        let seeds: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
            fail_over_to(&replica, &["force"], &seeds)
        })
        .await
        .unwrap();
    };
    let load = join_all(admitted.iter().zip(&users).enumerate().map(
        |(i, ((attempt, token), user))| {
            let t = &t;
            async move {
                for _ in 0..(i % 5) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let held = through(|| {
                    t.as_user(Method::POST, &format!("/v1/attempts/{attempt}/hold"), user)
                        .json(&json!({ "admission_token": token, "quantity": 1 }))
                })
                .await;
                if held.status() != 200 {
                    return (None, held.status().as_u16());
                }
                match i % 4 {
                    0 => {
                        let released = through(|| {
                            t.as_user(
                                Method::DELETE,
                                &format!("/v1/attempts/{attempt}/hold"),
                                user,
                            )
                        })
                        .await;
                        (None, released.status().as_u16())
                    }
                    1 | 2 => {
                        let paying: serde_json::Value = through(|| {
                            t.as_user(
                                Method::POST,
                                &format!("/v1/attempts/{attempt}/checkout"),
                                user,
                            )
                        })
                        .await
                        .json()
                        .await
                        .unwrap();
                        let reference = paying["payment"]["reference"].as_str().unwrap().to_owned();
                        let kind = if i % 4 == 1 {
                            "payment.succeeded"
                        } else {
                            "payment.failed"
                        };
                        let resp = t.webhook(&format!("evt-{i}"), kind, &reference).await;
                        let confirmed = (kind == "payment.succeeded" && resp.status() == 200)
                            .then(|| attempt.clone());
                        (confirmed, resp.status().as_u16())
                    }
                    _ => (None, 200),
                }
            }
        },
    ));
    let (outcomes, ()) = tokio::join!(load, failover);
    let failed_over = Instant::now();

    // The store comes back to the ledger's holdings by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let holdings = t.app.queue.holdings(id).await;
        let ledger = t.app.ledger.snapshot(id).await.unwrap();
        if let Ok(Some(h)) = &holdings {
            if h.drift(&ledger).is_none() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the store never came back to the ledger: {:?}",
            holdings.map(|h| h.map(|h| h.drift(&ledger)))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let equal_after = failed_over.elapsed();
    let ledger = t.app.ledger.stats(id).await.unwrap();
    let store = t.app.queue.stats(id).await.unwrap();
    assert_eq!(
        store.remaining,
        u64::from(ledger.remaining),
        "counters equal"
    );
    t.assert_stock_conserved(id, units as u64).await;
    let confirmed: Vec<&String> = outcomes.iter().filter_map(|(c, _)| c.as_ref()).collect();
    t.assert_confirmed(
        confirmed.iter().copied(),
        "a confirmation answered 200 stands",
    )
    .await;
    assert_eq!(ledger.units_sold, confirmed.len() as u64);
    crate::reliability::record(
        "Redis Cluster failover (FORCE) of the sale's primary, 120 users holding, releasing and paying",
        &[
            (
                "store's holdings equal to the ledger's",
                format!("{} ms after the new primary took over", equal_after.as_millis()),
            ),
            ("units sold twice", "0".into()),
            ("stock conserved", format!("{units} of {units}")),
            ("confirmations lost", format!("0 of {}", confirmed.len())),
        ],
    );
    t.stop().await;

    // Back to the roles the other tests started with (a coordinated failover loses nothing).
    fail_over_to(&primary, &[], &seeds);
}

/// The sale's primary takes no writes for 2 s (`CLIENT PAUSE 2000 WRITE`, then its client
/// connections cut: unreachable for sluice's scripts, its data kept, no failover) while 5
/// holds are released and 5 payments fail: the ledger frees the 10 units at once, the store
/// hears nothing; soon after the pause ends the store counts them free again and newcomers
/// hold every one.
#[tokio::test]
async fn units_freed_while_the_sales_primary_takes_no_writes_are_sellable_soon_after() {
    let seeds = redis_cluster_nodes();
    let seeds: Vec<&str> = seeds.split(',').collect();
    let t = TestApp::spawn_on_with(Backend::ServersOnCluster, |c| {
        c.queue.timeout_ms = sluice::config::Millis(300);
        c.workers.queue_sync_ms = sluice::config::Millis(200);
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 20, "per_user_limit": 2 }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let (primary, _) = primary_and_replica(seeds[0], slot_of(seeds[0], id));
    let mut paying = Vec::new();
    let mut holding = Vec::new();
    for i in 0..10 {
        let user = format!("paused-{i}");
        if i < 5 {
            let (_, payment) = t.paying(&sale, &user, 2).await;
            paying.push(payment["reference"].as_str().unwrap().to_owned());
        } else {
            holding.push((t.holding(&sale, &user, 2).await, user));
        }
    }
    let remaining = || async { t.app.queue.stats(id).await.map(|s| s.remaining) };
    assert_eq!(remaining().await.unwrap(), 0);

    assert!(cli(&primary, &["client", "pause", "2000", "write"]).contains("OK"));
    let paused = Instant::now();
    let failed = join_all(paying.iter().enumerate().map(|(i, reference)| {
        let t = &t;
        async move {
            t.webhook(&format!("evt-paused-{i}"), "payment.failed", reference)
                .await
        }
    }));
    let released = join_all(holding.iter().map(|(attempt, user)| {
        t.as_user(
            Method::DELETE,
            &format!("/v1/attempts/{attempt}/hold"),
            user,
        )
        .send()
    }));
    let (failed, released) = tokio::join!(failed, released);
    assert!(
        paused.elapsed() < Duration::from_secs(2),
        "answered during the pause"
    );
    // The scripts sluice gave up on wait in the primary for the pause to end; its clients'
    // connections are cut, so those writes never arrive (what a network cut does).
    cli(&primary, &["client", "kill", "type", "normal"]);
    assert!(
        failed.iter().all(|r| r.status() == 200),
        "the ledger takes the failures"
    );
    assert!(
        released.into_iter().all(|r| r.unwrap().status() == 200),
        "the ledger takes the releases"
    );
    assert_eq!(t.app.ledger.stats(id).await.unwrap().remaining, 20);

    let deadline = paused + Duration::from_secs(12);
    while remaining().await.ok() != Some(20) {
        assert!(
            Instant::now() < deadline,
            "the store still counts {:?} free of 20",
            remaining().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sellable_after = paused.elapsed().saturating_sub(Duration::from_secs(2));
    for i in 0..10 {
        t.holding(&sale, &format!("after-pause-{i}"), 2).await;
    }
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    crate::reliability::record(
        "Redis Cluster: the sale's primary takes no writes for 2 s while 20 units are given back",
        &[
            (
                "units sellable again after the pause ended",
                format!("{} ms", sellable_after.as_millis()),
            ),
            ("units lost", "0 of 20".into()),
        ],
    );
    t.stop().await;
}

/// F5b: a forced failover under holds, the new primary missing the last holds' writes (the
/// store counts their units free, as `CLUSTER FAILOVER FORCE` left it in one run of two from
/// outside; injected here, since a loopback replica is seldom behind when the failover
/// lands). Holds go on all the while, so the store never stands still: at the production
/// cadence (an admission tick a second, drift checks every 10 s) the store gives up the
/// units the ledger took within 5 s, and never counts more free than the ledger after.
#[tokio::test]
async fn a_failover_that_lost_holds_gives_the_units_up_within_five_seconds_under_load() {
    let seeds = redis_cluster_nodes();
    let seeds: Vec<&str> = seeds.split(',').collect();
    let t = TestApp::spawn_on_with(Backend::ServersOnCluster, |c| {
        c.queue.timeout_ms = sluice::config::Millis(500);
        c.workers.admission_tick_ms = sluice::config::Millis(1000);
        c.workers.lease_ttl_ms = sluice::config::Millis(3000);
        c.workers.drift_check_ms = sluice::config::Millis(10_000);
    })
    .await;
    let units = 300;
    let sale = t
        .create_sale(json!({ "quantity": units, "per_user_limit": 1, "max_active": 1000, "rate_per_minute": 600000 }))
        .await;
    let id = SaleId::parse(&sale).unwrap();
    let (primary, replica) = primary_and_replica(seeds[0], slot_of(seeds[0], id));
    let users: Vec<String> = (0..200).map(|i| format!("f5b-{i}")).collect();
    let admitted = join_all(users.iter().map(|u| t.admitted(&sale, u))).await;
    // Holds all along: one every 30 ms, for 6 s.
    let load = join_all(admitted.iter().zip(&users).enumerate().map(
        |(i, ((attempt, token), user))| {
            let t = &t;
            async move {
                tokio::time::sleep(Duration::from_millis(30 * i as u64)).await;
                through(|| {
                    t.as_user(Method::POST, &format!("/v1/attempts/{attempt}/hold"), user)
                        .json(&json!({ "admission_token": token, "quantity": 1 }))
                })
                .await
                .status()
            }
        },
    ));
    let lost = 3;
    let failover = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (promoted, all) = (
            replica.clone(),
            seeds.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            fail_over_to(&promoted, &["force"], &all)
        })
        .await
        .unwrap();
        // What the new primary missed: the last holds' units, free again in its count.
        let stock = format!("{}:{{sale:{sale}}}:stock", t.app.config.queue.key_prefix);
        cli(&replica, &["incrby", &stock, &lost.to_string()]);
        let lost_at = Instant::now();
        // The store's count above the ledger's (the ledger read before and after it).
        let mut last_excess = lost_at;
        while lost_at.elapsed() < Duration::from_secs(8) {
            let before = t.app.ledger.free_units(id).await.unwrap().unwrap();
            let store = t.app.queue.stats(id).await.map(|s| s.remaining);
            let after = t.app.ledger.free_units(id).await.unwrap().unwrap();
            if let Ok(store) = store {
                if store > u64::from(before.max(after)) {
                    last_excess = Instant::now();
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        last_excess.duration_since(lost_at)
    };
    let (held, excess_for) = tokio::join!(load, failover);
    assert!(
        held.iter().all(|s| *s == 200),
        "every hold answered: {held:?}"
    );
    assert!(
        excess_for < Duration::from_secs(5),
        "the store counted units the ledger took for {excess_for:?}"
    );
    let store = t.app.queue.stats(id).await.unwrap();
    let ledger = t.app.ledger.stats(id).await.unwrap();
    assert_eq!(
        store.remaining,
        u64::from(ledger.remaining),
        "the stores agree"
    );
    assert_eq!(ledger.units_held, 200);
    crate::reliability::record(
        "Redis Cluster failover (FORCE) under holds, the new primary missing the last holds (F5b)",
        &[
            (
                "the store counted units the ledger took",
                format!("for {} ms after the failover", excess_for.as_millis()),
            ),
            ("units sold twice", "0".into()),
        ],
    );
    t.stop().await;
    fail_over_to(&primary, &[], &seeds);
}
