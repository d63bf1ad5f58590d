//! The queue store stopped (a cut connection to Redis), on the nginx setup: a gate set to fail
//! open lets guarded requests through and counts them; one set to fail closed sends pages to
//! the waiting page and refuses API calls with its problem. Nothing is a 5xx, and an admitted
//! visitor's session passes either way.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{gate, port_of, Origin, Proxy, Visitor};
use crate::helpers::{redis_url, CuttableProxy, TestApp};

/// sluice on Redis behind a cuttable proxy, the gate's store probe quick.
async fn behind_a_cut(open: bool) -> (TestApp, CuttableProxy) {
    let port: u16 = redis_url().rsplit(':').next().unwrap().parse().unwrap();
    let cut = CuttableProxy::start(port).await;
    let t = TestApp::spawn_with(|c| {
        c.queue.url = format!("redis://127.0.0.1:{}", cut.port);
        c.queue.timeout_ms = sluice::config::Millis(300);
        c.gate.store_probe_ms = sluice::config::Millis(100);
        c.gate.on_store_down = if open { "open" } else { "closed" }.into();
    })
    .await;
    (t, cut)
}

/// Waits until the check answers `status` for a page of `proxy`.
async fn until_page_is(proxy: &Proxy, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = Visitor::default().page(&proxy.url("/shop/wait")).await;
        assert!(got.status < 500, "never a 5xx: {} {}", got.status, got.body);
        if got.status == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the page still answers {}",
            got.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn with_the_store_down_a_gate_fails_open_or_closed_as_set_never_with_a_5xx() {
    for open in [true, false] {
        let (t, cut) = behind_a_cut(open).await;
        let origin = Origin::start().await;
        gate(&t, 10, json!({})).await;
        let proxy = Proxy::nginx(port_of(&t), origin.port).await;
        // An admitted visitor, before the outage.
        let mut admitted = Visitor::default();
        let (_, back) = admitted.through(&proxy, "/shop/mine").await;
        assert_eq!(back.status, 200);

        until_page_is(&proxy, 302).await;
        cut.cut(true);
        let before = origin.count();
        if open {
            until_page_is(&proxy, 200).await;
            let api = Visitor::default()
                .send(
                    reqwest::Method::POST,
                    &proxy.url("/shop/api/cart"),
                    "application/json",
                    None,
                    None,
                )
                .await;
            assert_eq!(api.status, 200, "fail-open lets API calls through too");
            assert!(origin.answered(before, "/shop/") >= 2);
            let metrics = t.metrics().await;
            let opened = metrics
                .lines()
                .find(|l| l.starts_with("sluice_gate_checks_total{outcome=\"store_down_open\"}"))
                .expect("fail-open is counted");
            let count: f64 = opened.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(count >= 2.0, "{opened}");
        } else {
            // Closed: a page goes to the waiting page (the store's state shows there)...
            tokio::time::sleep(Duration::from_millis(400)).await;
            let page = Visitor::default().page(&proxy.url("/shop/wait")).await;
            assert_eq!(page.status, 302);
            let waiting = page.header("location").unwrap().to_owned();
            let shown = Visitor::default().page(&waiting).await;
            assert_eq!(
                shown.status, 200,
                "the waiting page is served without the store"
            );
            // ...and an API call gets the gate's problem with Retry-After.
            let api = Visitor::default()
                .send(
                    reqwest::Method::GET,
                    &proxy.url("/shop/api/cart"),
                    "application/json",
                    None,
                    None,
                )
                .await;
            assert_eq!(api.status, 429, "{}", api.body);
            assert!(api.header("retry-after").is_some());
            assert_eq!(
                origin.answered(before, "/shop/wait"),
                0,
                "nothing let through"
            );
            assert_eq!(
                origin.answered(before, "/shop/api/"),
                0,
                "nothing let through"
            );
            let metrics = t.metrics().await;
            assert!(metrics.contains("sluice_gate_checks_total{outcome=\"store_down_closed\"}"));
        }
        // The admitted visitor's session needs no store: it passes either way.
        let mine = admitted.page(&proxy.url("/shop/mine")).await;
        assert_eq!(mine.status, 200, "a session passes with the store down");
        cut.cut(false);
        t.stop().await;
    }
}
