//! A sale's figures over time, on both configurations: sampled into the ledger each interval,
//! read back as a series whose last point is the sale as it stands, with admissions a minute
//! from two samples and a rate change showing in the next samples.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(a_sales_figures_follow_it_sample_by_sample);

/// Waits (at most 15 s) until the sale has two points or more and its last satisfies `ok`;
/// the series.
async fn figures_until(t: &TestApp, sale: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let series = t
            .admin_json(Method::GET, &format!("/v1/sales/{sale}/figures?minutes=10"))
            .await;
        let points = series["points"].as_array();
        if points.is_some_and(|p| p.len() >= 2 && p.last().is_some_and(&ok)) {
            return series;
        }
        assert!(
            Instant::now() < deadline,
            "the figures never showed it: {series}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_sales_figures_follow_it_sample_by_sample(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.workers.figures_ms = sluice::config::Millis(200)
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 10, "per_user_limit": 2, "rate_per_minute": 6000 }))
        .await;
    let (_, payment) = t.paying(&sale, "first", 2).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        t.webhook("evt-figures", "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    t.holding(&sale, "second", 1).await;

    let series = figures_until(&t, &sale, |p| {
        p["sold_units"] == 2 && p["holding_units"] == 1
    })
    .await;
    assert_eq!(series["interval_secs"], 0.2);
    let points = series["points"].as_array().unwrap();
    let last = points.last().unwrap();
    assert_eq!(
        (&last["remaining"], &last["rate_per_minute"]),
        (&json!(7), &json!(6000.0))
    );
    assert!(points.len() >= 2, "{series}");
    assert!(points[0].get("admitted_per_minute").is_none());
    assert!(points[1..]
        .iter()
        .all(|p| p["admitted_per_minute"].as_f64().is_some()));
    let ats: Vec<&str> = points.iter().map(|p| p["at"].as_str().unwrap()).collect();
    assert!(
        ats.windows(2).all(|w| w[0] < w[1]),
        "oldest first, one a sample: {ats:?}"
    );

    // A rate set now is in the samples that follow.
    let set = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 42, "max_active": 100 }))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    figures_until(&t, &sale, |p| p["rate_per_minute"] == 42.0).await;

    let missing = t
        .admin(
            Method::GET,
            &format!("/v1/sales/{}/figures", uuid::Uuid::now_v7()),
        )
        .send()
        .await
        .unwrap();
    assert_problem(missing, 404, "/problems/not-found").await;
    let zero = t
        .admin(Method::GET, &format!("/v1/sales/{sale}/figures?minutes=0"))
        .send()
        .await
        .unwrap();
    assert!(
        matches!(zero.status().as_u16(), 400 | 422),
        "{}",
        zero.status()
    );
    t.stop().await;
}
