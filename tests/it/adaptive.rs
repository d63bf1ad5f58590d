//! Adaptive admission: the rate follows the back end's pressure. With a real Prometheus
//! scraping the service: a stalled broker backs the rate off within a few controller ticks
//! and it climbs back to the ceiling once the broker is back; Prometheus gone holds the rate
//! and flags it stale, and control resumes when it returns. Embedded, the same signals come
//! from the process's own metrics. Admins see the controller and switch modes.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, PrivateBroker, PrivatePrometheus, TestApp};
use crate::on_both_configurations;

async fn admission(app: &TestApp, sale: &str) -> Value {
    app.admin_json(Method::GET, &format!("/v1/sales/{sale}/admission"))
        .await
}

/// Polls the sale's admission until `done` holds; every distinct published controller state
/// seen on the way is kept (one per controller tick: ticks are far slower than the polling).
async fn watch_until(
    app: &TestApp,
    sale: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + within;
    let mut seen: Vec<Value> = Vec::new();
    loop {
        let now = admission(app, sale).await;
        let fresh = seen
            .last()
            .is_none_or(|last| last["controller"]["updated_at"] != now["controller"]["updated_at"]);
        if fresh && !now["controller"].is_null() {
            seen.push(now.clone());
        }
        if done(&now) {
            return seen;
        }
        assert!(Instant::now() < deadline, "gave up waiting; last: {now:#}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

fn rate(admission: &Value) -> f64 {
    admission["current_rate_per_minute"].as_f64().unwrap()
}

fn signal(admission: &Value, name: &str) -> Value {
    admission["controller"]["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no signal {name} in {admission:#}"))
}

fn host_port(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_owned()
}

const MAX: f64 = 6000.0;

fn adaptive_sale() -> Value {
    json!({
        "quantity": 1000, "rate_per_minute": 600, "max_active": 100000,
        "admission_mode": "adaptive", "min_rate_per_minute": 60, "max_rate_per_minute": MAX as u32
    })
}

#[tokio::test]
async fn a_stalled_broker_backs_the_rate_off_and_it_climbs_back_when_the_broker_returns() {
    let broker = PrivateBroker::start();
    let mut prometheus = PrivatePrometheus::reserve();
    let app = TestApp::spawn_with(|c| {
        c.events.kafka_brokers = broker.brokers.clone();
        c.valve.prometheus_url = Some(crate::helpers::url(prometheus.url()));
        c.valve.tick_ms = sluice::config::Millis(1000);
        c.valve.increase_fraction = 0.25;
        c.valve.backoff = 0.5;
        let age = c.valve.signals.get_mut("outbox_pending_age").unwrap();
        age.target = 3.0;
    })
    .await;
    prometheus.start(&host_port(&app)).await;
    let sale = app.create_sale(adaptive_sale()).await;

    // Nothing presses: the controller climbs from 600 to the ceiling.
    let climb = watch_until(&app, &sale, Duration::from_secs(60), |a| rate(a) == MAX).await;
    assert!(
        climb
            .iter()
            .all(|a| a["controller"]["last_change"] != "decrease"),
        "{climb:#?}"
    );
    let reading = signal(climb.last().unwrap(), "outbox_pending_age");
    assert_eq!(
        reading["stale"], false,
        "read through Prometheus: {reading}"
    );

    // The broker stalls; events keep being committed (status changes) and wait in the outbox.
    broker.signal(false);
    for _ in 0..3 {
        app.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
            .await;
        app.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
            .await;
    }
    let fall = watch_until(&app, &sale, Duration::from_secs(60), |a| {
        rate(a) <= MAX / 4.0
    })
    .await;
    let over = fall
        .iter()
        .position(|a| {
            signal(a, "outbox_pending_age")["value"]
                .as_f64()
                .unwrap_or(0.0)
                > 3.0
        })
        .expect("the outbox age went over its target");
    let ticks = fall.len() - over;
    assert!(
        ticks <= 3,
        "took {ticks} controller ticks to reach a quarter: {fall:#?}"
    );
    let last = fall.last().unwrap();
    assert_eq!(last["controller"]["last_change"], "decrease");
    assert_eq!(last["controller"]["signal"], "outbox_pending_age");
    // The floor holds however long the stall lasts.
    let floor = watch_until(&app, &sale, Duration::from_secs(60), |a| rate(a) == 60.0).await;
    assert!(floor.iter().all(|a| rate(a) >= 60.0));

    // The broker is back: the backlog drains and the rate climbs back to the ceiling.
    broker.signal(true);
    watch_until(&app, &sale, Duration::from_secs(90), |a| rate(a) == MAX).await;
    let text = app.metrics().await;
    assert!(
        text.contains(&format!(
            "sluice_admission_target_rate_per_minute{{sale=\"{sale}\"}} 6000"
        )),
        "{text}"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_prometheus_the_rate_is_held_and_flagged_stale_until_it_returns() {
    let mut prometheus = PrivatePrometheus::reserve();
    let app = TestApp::spawn_with(|c| {
        c.valve.prometheus_url = Some(crate::helpers::url(prometheus.url()));
        c.valve.tick_ms = sluice::config::Millis(500);
        c.valve.query_timeout_ms = sluice::config::Millis(300);
        c.valve.increase_fraction = 0.01; // +60 a tick: still climbing when Prometheus goes
    })
    .await;
    prometheus.start(&host_port(&app)).await;
    let sale = app.create_sale(adaptive_sale()).await;
    watch_until(&app, &sale, Duration::from_secs(30), |a| {
        a["controller"]["last_change"] == "increase" && rate(a) > 700.0
    })
    .await;

    prometheus.stop();
    let stale = watch_until(&app, &sale, Duration::from_secs(30), |a| {
        a["controller"]["last_change"] == "stale"
    })
    .await;
    let held = rate(stale.last().unwrap());
    // Several stale ticks later the rate has not moved, and the metrics say why.
    let during = watch_until(&app, &sale, Duration::from_secs(30), {
        let first = stale.last().unwrap()["controller"]["updated_at"].clone();
        move |a| a["controller"]["updated_at"] != first && a["controller"]["last_change"] == "stale"
    })
    .await;
    assert!(during
        .iter()
        .filter(|a| a["controller"]["last_change"] == "stale")
        .all(|a| rate(a) == held));
    let text = app.metrics().await;
    assert!(
        text.contains("sluice_valve_signal_stale{signal=\"outbox_pending_age\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "sluice_admission_last_change{{sale=\"{sale}\",reason=\"stale\"}} 1"
        )),
        "{text}"
    );

    // Prometheus is back: readings resume and so does the climb.
    prometheus.start(&host_port(&app)).await;
    watch_until(&app, &sale, Duration::from_secs(30), |a| rate(a) > held).await;
    let text = app.metrics().await;
    assert!(
        text.contains("sluice_valve_signal_stale{signal=\"outbox_pending_age\"} 0"),
        "{text}"
    );
    app.stop().await;
}

/// Embedded: the signals come from the process's own metrics. A ledger commit target no
/// commit can meet backs the rate off while admissions commit, and it climbs again once the
/// queue is empty (no commits in the window).
#[tokio::test]
async fn embedded_signals_come_from_the_processes_own_metrics() {
    let app = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.valve.tick_ms = sluice::config::Millis(300);
        c.valve.backoff = 0.5;
        let commit = c.valve.signals.get_mut("ledger_commit_p99").unwrap();
        commit.target = 1e-9;
    })
    .await;
    let sale = app
        .create_sale(json!({
            "quantity": 1000, "rate_per_minute": 6000, "max_active": 100000,
            "admission_mode": "adaptive", "min_rate_per_minute": 600, "max_rate_per_minute": MAX as u32
        }))
        .await;
    for i in 0..40 {
        app.join(&sale, &format!("user-{i}")).await;
    }
    let fall = watch_until(&app, &sale, Duration::from_secs(30), |a| {
        a["controller"]["last_change"] == "decrease"
    })
    .await;
    let last = fall.last().unwrap();
    assert_eq!(last["controller"]["signal"], "ledger_commit_p99");
    assert!(signal(last, "ledger_commit_p99")["value"].as_f64().unwrap() > 0.0);
    assert!(rate(last) < MAX);
    // Everyone is admitted; with no commits in the window the signal reads 0 and the rate climbs.
    watch_until(&app, &sale, Duration::from_secs(30), |a| {
        a["controller"]["last_change"] == "increase"
            && signal(a, "ledger_commit_p99")["value"] == 0.0
    })
    .await;
    let stats = app.stats(&sale).await;
    assert_eq!(stats["waiting"], 0, "{stats}");
    app.stop().await;
}

on_both_configurations!(admins_switch_between_manual_and_adaptive);

async fn admins_switch_between_manual_and_adaptive(backend: Backend) {
    let app =
        TestApp::spawn_on_with(backend, |c| c.valve.tick_ms = sluice::config::Millis(200)).await;
    let sale = app.create_sale(json!({"rate_per_minute": 600})).await;
    let manual = admission(&app, &sale).await;
    assert_eq!(manual["mode"], "manual");
    assert_eq!(rate(&manual), 600.0);
    assert!(manual.get("controller").is_none(), "{manual}");

    let put = |body: Value| {
        app.admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
            .json(&body)
            .send()
    };
    // Adaptive needs both bounds, in order; a refusal changes nothing.
    let missing = put(json!({"rate_per_minute": 600, "max_active": 10, "mode": "adaptive"}))
        .await
        .unwrap();
    let problem = assert_problem(missing, 422, "/problems/validation").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("max_rate_per_minute"),
        "{problem}"
    );
    let inverted = put(
        json!({"rate_per_minute": 600, "max_active": 10, "mode": "adaptive",
        "min_rate_per_minute": 500, "max_rate_per_minute": 100}),
    )
    .await
    .unwrap();
    assert_problem(inverted, 422, "/problems/validation").await;
    assert_eq!(admission(&app, &sale).await["mode"], "manual");

    let switched = put(
        json!({"rate_per_minute": 600, "max_active": 10, "mode": "adaptive",
        "min_rate_per_minute": 60, "max_rate_per_minute": 1200}),
    )
    .await
    .unwrap();
    assert_eq!(switched.status(), 200);
    let sale_out: Value = switched.json().await.unwrap();
    assert_eq!(sale_out["admission_mode"], "adaptive");
    assert_eq!(sale_out["max_rate_per_minute"], 1200);
    // The admitter picks the controller up and publishes it; nothing presses, so it climbs.
    let adaptive = watch_until(&app, &sale, Duration::from_secs(20), |a| {
        a["controller"]["last_change"] == "increase"
    })
    .await;
    let last = adaptive.last().unwrap();
    assert_eq!(last["mode"], "adaptive");
    assert_eq!(last["min_rate_per_minute"], 60);
    assert!(rate(last) > 600.0 && rate(last) <= 1200.0, "{last}");
    assert_eq!(
        last["controller"]["signals"].as_array().unwrap().len(),
        6,
        "every built-in signal: {last}"
    );

    let back = put(json!({"rate_per_minute": 300, "max_active": 10, "mode": "manual"}))
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    let manual = admission(&app, &sale).await;
    assert_eq!(manual["mode"], "manual");
    assert_eq!(rate(&manual), 300.0);
    assert!(manual.get("controller").is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    let wanted = format!("sluice_admission_last_change{{sale=\"{sale}\",reason=\"manual\"}} 1");
    while !app.metrics().await.contains(&wanted) {
        assert!(Instant::now() < deadline, "no manual reason in the metrics");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}
