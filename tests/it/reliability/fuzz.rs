//! schemathesis (PyPI) against the live `/openapi.json`: a fixed seed, a few hundred generated
//! requests per operation, with real ids for the sale and attempt so calls reach the logic.
//! Passes only with no server error, every status documented, and every body (problem+json
//! included) matching its schema.

use std::process::Command;

use crate::helpers::{TestApp, ADMIN_KEY};

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_undocumented_answer() {
    let app = TestApp::spawn().await;
    let sale = app.create_sale(serde_json::json!({"quantity": 100})).await;
    let joined = app.join(&sale, "fuzzer").await;
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
    let dir = std::env::temp_dir().join(format!("sluice-st-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("schemathesis.toml");
    std::fs::write(
        &config,
        format!(
            r#"[parameters]
sale_id = "{sale}"
attempt_id = "{attempt}"

[checks]
enabled = false
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true

# A sale of up to a million units is valid, and takes seconds to create (a ledger row per
# unit): fuzzed, createSale made dozens of them (28 million units in one run) and the test
# outgrew its time. It keeps its examples and the coverage phase (bounds, wrong types, missing
# fields); how long big sales take is the benchmark's business.
[[operations]]
include-operation-id = "createSale"
phases.fuzzing.enabled = false

# The same for units added to the sale: up to 100,000 rows a change, until the sale has a
# million (tests/it/stock.rs tests the changes themselves).
[[operations]]
include-operation-id = "changeStock"
phases.fuzzing.enabled = false

# poem-openapi describes an event stream as an array of its events, and each event is one
# AttemptOut (tests/it/admin.rs reads the stream itself). One event is enough to read.
[[operations]]
include-operation-id = "streamAttempt"
max-stream-events = 1
checks.response_schema_conformance.enabled = false
"#
        ),
    )
    .unwrap();
    let (spec, bearer) = (
        app.url("/openapi.json"),
        format!("Authorization: Bearer {}", app.token("fuzzer")),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("schemathesis")
            .arg("--config-file")
            .arg(&config)
            .arg("run")
            .arg(spec)
            .args(["-H", &bearer, "-H", &format!("X-Admin-Key: {ADMIN_KEY}")])
            .args(["--max-examples", "200", "--seed", "20261129", "--no-color"])
            .current_dir(&dir)
            .output()
            .expect("schemathesis is installed (scripts/tools)")
    })
    .await
    .unwrap();
    let log = crate::helpers::output_text(&out);
    assert!(out.status.success(), "schemathesis found problems:\n{log}");
    let generated = log
        .lines()
        .filter_map(|l| l.trim().split_once(" generated,"))
        .find_map(|(n, _)| n.trim().parse::<u64>().ok())
        .expect("schemathesis reports how many cases it generated");
    assert!(generated >= 1000, "only {generated} cases:\n{log}");
    crate::reliability::record(
        "Fuzzing the contract (schemathesis, seed 20261129, 200 per operation)",
        &[
            ("requests generated", generated.to_string()),
            ("server errors", "0".into()),
            ("undocumented or off-schema answers", "0".into()),
        ],
    );
    app.stop().await;
}
