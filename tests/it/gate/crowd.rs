//! 1,000 visitors without accounts through nginx, at most 100 sessions at once: never more
//! than 100, admitted in the order they joined, one place each across refreshes, each back to
//! its own page. Each visitor's session ends by the origin's call once it has seen its page
//! (sessions shortened for the test).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use super::{end_session, gate, port_of, waiting_page_params, Origin, Proxy, Visitor};
use crate::helpers::{Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(a_thousand_visitors_through_nginx_at_most_a_hundred_at_once);

const VISITORS: usize = 1000;
const CAP: usize = 100;

async fn a_thousand_visitors_through_nginx_at_most_a_hundred_at_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let origin = Origin::start().await;
    let g = gate(&t, CAP as u32, json!({})).await;
    let gate_id = g["id"].as_str().unwrap().to_owned();
    let proxy = Arc::new(Proxy::nginx(port_of(&t), origin.port).await);

    // They come one after another: sent to the line, in it, and a refresh of the page keeps
    // the place.
    let mut visitors = Vec::with_capacity(VISITORS);
    for i in 0..VISITORS {
        let mut v = Visitor::default();
        let page = format!("/shop/item/{i}?n={i}&from=crowd");
        let sent = v.page(&proxy.url(&page)).await;
        assert_eq!(sent.status, 302, "{}", sent.body);
        let (gate_param, return_to) = waiting_page_params(sent.header("location").unwrap());
        assert_eq!(gate_param, gate_id);
        let (token, sale) = v.enter(&proxy, &gate_id).await;
        let attempt = v.join(&proxy, &sale, &token).await;
        let (again, _) = v.enter(&proxy, &gate_id).await;
        assert_eq!(
            v.join(&proxy, &sale, &again).await,
            attempt,
            "a refresh keeps the place"
        );
        visitors.push((i, v, token, attempt, return_to, page));
    }
    let order: HashMap<String, usize> = visitors
        .iter()
        .map(|(i, _, _, a, _, _)| (a.clone(), *i))
        .collect();

    let active = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let t = Arc::new(t);
    let runs = visitors
        .into_iter()
        .map(|(i, mut v, token, attempt, return_to, page)| {
            let (proxy, t, active, most, gate_id) = (
                proxy.clone(),
                t.clone(),
                active.clone(),
                most.clone(),
                gate_id.clone(),
            );
            async move {
                let deadline = Instant::now() + Duration::from_secs(240);
                let admission = loop {
                    let s = v.status(&proxy, &attempt, &token).await;
                    if s["state"] == "ADMITTED" {
                        break s["admission_token"].as_str().unwrap().to_owned();
                    }
                    assert_eq!(s["state"], "QUEUED", "visitor {i}: {s}");
                    assert!(Instant::now() < deadline, "visitor {i} still waits");
                    let wait = s["poll_after_ms"].as_u64().unwrap_or(500).clamp(100, 1000);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                };
                let traded = v
                    .trade(&proxy, &gate_id, &attempt, &admission, &return_to)
                    .await;
                assert_eq!(traded.status, 200, "visitor {i}: {}", traded.body);
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let location = traded.json()["location"].as_str().unwrap().to_owned();
                assert_eq!(
                    location,
                    proxy.url(&page),
                    "visitor {i} goes back to its own page"
                );
                let back = v.page(&location).await;
                assert_eq!(back.status, 200, "visitor {i}: {}", back.body);
                assert!(
                    back.body
                        .contains(&format!("/shop/item/{i}?n={i}&amp;from=crowd")),
                    "visitor {i}: {}",
                    back.body
                );
                let visitor = v.cookies["sluice_session"]
                    .split('.')
                    .next()
                    .unwrap()
                    .to_owned();
                // A while on the site, so that the cap is what holds the others back.
                tokio::time::sleep(Duration::from_millis(600)).await;
                // Counted out before the end is asked: a place freed is never counted twice.
                active.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(
                    end_session(&t, &gate_id, &visitor).await,
                    204,
                    "visitor {i}"
                );
            }
        });
    futures_util::future::join_all(runs).await;
    let most = most.load(Ordering::SeqCst);
    assert!(most <= CAP, "{most} sessions at once, the cap is {CAP}");
    assert!(
        most >= CAP / 2,
        "the line let many in at once ({most}): the cap was the bound"
    );

    // Admitted in the order they joined: each attempt's admission in the ledger's trail (one
    // admission batch is one time), in join order.
    let sale = g["sale_id"].as_str().unwrap();
    let mut by_join = vec![None; VISITORS];
    let paths: Vec<String> = order
        .keys()
        .map(|a| format!("/v1/sales/{sale}/attempts/{a}"))
        .collect();
    let files =
        futures_util::future::join_all(paths.iter().map(|p| t.admin_json(Method::GET, p))).await;
    for file in files {
        let attempt = file["attempt"]["attempt_id"].as_str().unwrap();
        let admitted: Vec<&str> = file["trail"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["cause"] == "admit")
            .map(|s| s["at"].as_str().unwrap())
            .collect();
        assert_eq!(admitted.len(), 1, "admitted once: {file}");
        let at = chrono::DateTime::parse_from_rfc3339(admitted[0]).unwrap();
        by_join[order[attempt]] = Some(at);
    }
    let times: Vec<_> = by_join.into_iter().map(Option::unwrap).collect();
    let inversions: Vec<usize> = (1..VISITORS).filter(|&i| times[i] < times[i - 1]).collect();
    assert!(
        inversions.is_empty(),
        "admitted before an earlier joiner: visitors {inversions:?}"
    );
    assert_eq!(
        origin.answered(0, "/shop/item/"),
        VISITORS,
        "each visitor's page once, and no page without a session"
    );
}
