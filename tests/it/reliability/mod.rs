//! Faults, abuse and bad input, each a bounded loopback-only test with figures. With
//! `SLUICE_RELIABILITY_REPORT=<file>` set, each test appends what it measured to that file
//! (one JSON line per fault); `scripts/reliability` runs them so and writes
//! `docs/reliability.md`.

mod client_storm;
mod cluster_failover;
mod crash;
mod drain;
mod embedded_restart;
mod fuzz;
mod logs;
mod postgres_outage;
mod sql;
mod webhook_storm;

/// Appends one fault's figures to the report file, when one is being written.
pub fn record(fault: &str, measured: &[(&str, String)]) {
    let Ok(path) = std::env::var("SLUICE_RELIABILITY_REPORT") else {
        return;
    };
    let measures: serde_json::Map<String, serde_json::Value> = measured
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
        .collect();
    let line = serde_json::json!({ "fault": fault, "measured": measures }).to_string() + "\n";
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("report file");
    // One write of one short line: appends from parallel test processes do not interleave.
    file.write_all(line.as_bytes()).unwrap();
}
