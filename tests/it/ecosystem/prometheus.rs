//! What SREs run: `/metrics` passes `promtool check metrics`; the alert rules pass `promtool
//! check rules` and their unit tests; every PromQL expression of the Grafana dashboards and the
//! rules parses, and every metric they name is one a running sluice exports.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{Backend, TestApp};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs promtool; fails the test with its output unless it succeeds.
fn promtool(args: &[&str], dir: &Path, stdin: Option<&str>) -> String {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is installed (scripts/services installs prometheus)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = crate::helpers::output_text(&out);
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn alert_rules_and_scrape_config_pass_promtool_and_their_unit_tests() {
    let dir = root().join("prometheus");
    promtool(
        &["check", "config", "--syntax-only", "prometheus.yml"],
        &dir,
        None,
    );
    let checked = promtool(&["check", "rules", "sluice.yml"], &dir.join("rules"), None);
    assert!(checked.contains("9 rules found"), "{checked}");
    let tested = promtool(
        &["test", "rules", "sluice_test.yml"],
        &dir.join("tests"),
        None,
    );
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// The config compose mounts, checked whole (rule files included) as the Prometheus container
/// reads it: each path it names inside the container is taken back to the repository file
/// compose mounts there. A rule-file glob that also takes the rules' unit tests fails here.
#[test]
fn prometheus_starts_on_the_files_compose_mounts() {
    let compose = crate::ecosystem::compose::compose();
    let mounts: Vec<(String, PathBuf)> = compose["services"]["prometheus"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| {
            let mut parts = v.as_str().unwrap().split(':');
            let local = parts.next()?.strip_prefix("./")?;
            Some((parts.next()?.to_owned(), root().join(local)))
        })
        .collect();
    let local = |container: &str| -> String {
        let (inside, outside) = mounts
            .iter()
            .find(|(inside, _)| container.starts_with(inside.as_str()))
            .unwrap_or_else(|| panic!("{container} is not mounted by compose"));
        format!("{}{}", outside.display(), &container[inside.len()..])
    };
    let config_path = mounts
        .iter()
        .find(|(inside, _)| inside.ends_with("prometheus.yml"))
        .map(|(inside, _)| local(inside))
        .expect("compose mounts prometheus.yml");
    let mut config: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    for file in config["rule_files"].as_sequence_mut().unwrap() {
        *file = serde_yaml::Value::String(local(file.as_str().unwrap()));
    }
    let dir = std::env::temp_dir().join(format!("prom-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        serde_yaml::to_string(&config).unwrap(),
    )
    .unwrap();
    let checked = promtool(&["check", "config", "prometheus.yml"], &dir, None);
    assert!(checked.contains("9 rules found"), "{checked}");
}

/// Every `expr` of the dashboards, with Grafana's variables given a value.
fn dashboard_exprs() -> Vec<String> {
    let mut exprs = Vec::new();
    for entry in std::fs::read_dir(root().join("grafana/dashboards")).unwrap() {
        let dashboard: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap())
                .expect("dashboard JSON");
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap();
                exprs.push(
                    expr.replace("$__rate_interval", "1m")
                        .replace("$sale", ".*"),
                );
            }
        }
    }
    exprs
}

fn rule_exprs() -> Vec<String> {
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root().join("prometheus/rules/sluice.yml")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            exprs.push(rule["expr"].as_str().unwrap().to_owned());
        }
    }
    exprs
}

/// The `sluice_…` metric names an expression reads (histogram series by their family).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in expr.match_indices("sluice_") {
        let name: String = expr[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name)
            .to_owned();
        names.insert(family);
    }
    names
}

crate::on_both_configurations!(
    metrics_pass_promtool_and_every_dashboard_and_alert_metric_is_exported
);

/// On every store alike: the embedded one reports the queue-store metrics the dashboard and the
/// `SluiceRedisSlow` alert read, as Redis does.
async fn metrics_pass_promtool_and_every_dashboard_and_alert_metric_is_exported(backend: Backend) {
    let app =
        TestApp::spawn_on_with(backend, |c| c.valve.tick_ms = sluice::config::Millis(200)).await;
    let sale = app
        .create_sale(json!({
            "quantity": 10, "admission_mode": "adaptive",
            "min_rate_per_minute": 60, "max_rate_per_minute": 600000
        }))
        .await;
    // A purchase, a declined payment and a user who leaves: every family gets its series.
    let (_, payment) = app.paying(&sale, "alice", 1).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        app.webhook("evt-ok", "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    let (_, payment) = app.paying(&sale, "bob", 1).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        app.webhook("evt-no", "payment.failed", reference)
            .await
            .status(),
        200
    );
    let joined = app.join(&sale, "carol").await;
    let attempt = joined["attempt_id"].as_str().unwrap();
    app.as_user(
        reqwest::Method::DELETE,
        &format!("/v1/attempts/{attempt}"),
        "carol",
    )
    .send()
    .await
    .unwrap();
    // A gate's figures: a check sent to the line, a file let through, its sessions counted.
    let gate_sale = app.create_sale(json!({ "quantity": 1 })).await;
    let gate = app
        .admin(reqwest::Method::POST, "/v1/gates")
        .json(
            &json!({ "name": "site", "sale_id": gate_sale, "hosts": ["shop.example"],
                       "static_extensions": ["css"] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(gate.status(), 201);
    for uri in ["/page", "/app.css"] {
        let checked = app
            .http
            .get(app.url("/v1/gate/check"))
            .header("X-Forwarded-Host", "shop.example")
            .header("X-Forwarded-Uri", uri)
            .send()
            .await
            .unwrap();
        assert!(checked.status().is_success() || checked.status() == 429);
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await; // a few valve rounds

    let metrics = app.metrics().await;
    promtool(&["check", "metrics"], &root(), Some(&metrics));
    // The payment provider's families come from a sluice that takes payments through Stripe
    // (localstripe): a checkout calls it.
    let stripe = crate::stripe::LocalStripe::start().await;
    let paying = TestApp::spawn_on_with(backend, |c| crate::stripe::on_stripe(c, &stripe)).await;
    let priced = paying
        .create_sale(json!({ "currency": "KRW", "unit_price": 1000 }))
        .await;
    let attempt = paying.holding(&priced, "dana", 1).await;
    assert_eq!(paying.checkout(&attempt, "dana").await.status(), 200);
    let provider_metrics = paying.metrics().await;
    promtool(&["check", "metrics"], &root(), Some(&provider_metrics));
    let exported: BTreeSet<&str> = metrics
        .lines()
        .chain(provider_metrics.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();

    let dashboards = dashboard_exprs();
    let alerts = rule_exprs();
    assert!(
        dashboards.len() >= 20,
        "{} dashboard queries",
        dashboards.len()
    );
    // Each expression parses: promtool checks them as recording rules.
    let mut rules = String::from("groups:\n  - name: parse\n    rules:\n");
    for (i, expr) in dashboards.iter().chain(&alerts).enumerate() {
        let quoted = serde_json::to_string(expr).unwrap();
        rules.push_str(&format!(
            "      - record: parse_{i}\n        expr: {quoted}\n"
        ));
    }
    let dir = std::env::temp_dir().join(format!("sluice-promql-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("parse.yml"), rules).unwrap();
    promtool(&["check", "rules", "parse.yml"], &dir, None);

    let mut missing = BTreeSet::new();
    for expr in dashboards.iter().chain(&alerts) {
        for name in metric_names(expr) {
            if !exported.contains(name.as_str()) {
                missing.insert(name);
            }
        }
    }
    assert!(missing.is_empty(), "named but not exported: {missing:?}");
    app.stop().await;
    paying.stop().await;
}
