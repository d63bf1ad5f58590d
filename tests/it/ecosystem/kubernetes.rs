//! The Kubernetes manifest (`deploy/kubernetes/sluice.yaml`), checked without a cluster:
//! kubernetes-validate checks it against Kubernetes' schemas, strictly (and a broken copy must
//! fail, so the check is real); sluice accepts the replicas' environment, secrets filled in as
//! an operator would; the probes ask the health routes on the port sluice listens on; and the
//! drain fits: the listener's delay inside the shutdown bound, the bound inside the pod's grace.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

fn manifest_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/sluice.yaml")
}

fn validate(file: &Path) -> std::process::Output {
    Command::new("kubernetes-validate")
        .args(["--strict", "--no-warn"])
        .arg(file)
        .output()
        .expect("kubernetes-validate is installed (scripts/tools)")
}

/// The manifest's resource of `kind`.
fn resource(kind: &str) -> Value {
    let text = std::fs::read_to_string(manifest_path()).unwrap();
    let found = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .find(|doc| doc["kind"] == kind);
    found.unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_manifest_follows_kubernetes_schemas() {
    let report = crate::helpers::output_text(&validate(&manifest_path()));
    for kind in ["deployment", "service", "poddisruptionbudget"] {
        assert!(
            report.contains(&format!("passed for resource {kind}/sluice")),
            "{report}"
        );
    }
    super::passes_and_a_broken_copy_fails(
        validate,
        &manifest_path(),
        ("containerPort: 8080", "containerPort: eighty"),
        "'eighty' is not of type 'integer'",
    );
}

/// The container's environment is a configuration sluice starts with, each secret filled in
/// as `kubectl create secret` (the file's header) would.
#[test]
// figment's `Jail` takes a closure returning figment's `Result`, whose error is large by design.
#[allow(clippy::result_large_err)]
fn sluice_accepts_the_replicas_configuration_and_its_drain_fits_the_pods_grace() {
    let deployment = resource("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env = container["env"].as_sequence().unwrap().clone();
    let config = std::sync::Mutex::new(None);
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        for var in &env {
            let name = var["name"].as_str().unwrap();
            let value = match var["value"].as_str() {
                Some(value) => value.to_owned(),
                None => secret(var["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap()),
            };
            jail.set_env(name, value);
        }
        let loaded = sluice::secrets::load(None).map_err(|e| e.to_string())?;
        *config.lock().unwrap() = Some(loaded);
        Ok(())
    });
    let config = config.into_inner().unwrap().expect("loaded");
    assert_eq!(config.queue.url, "redis://redis:6379");
    assert!(!config.ledger_is_embedded(), "the ledger is PostgreSQL");

    // Probes: on the port sluice listens on, at its health routes.
    let port = container["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(config.http.listen.port() as u64, port);
    assert_eq!(container["ports"][0]["name"], "http");
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"],
        "/health/ready"
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"],
        "/health/live"
    );
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "http", "{probe}");
    }
    // The drain: new connections taken for a while (kube-proxy lags), then the rest finished,
    // all before the kubelet's SIGKILL.
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        config.http.drain_delay_secs > sluice::config::Seconds(0),
        "a drain delay under Kubernetes"
    );
    assert!(config.http.drain_delay_secs < config.http.shutdown_timeout_secs);
    assert!(
        config.http.shutdown_timeout_secs < sluice::config::Seconds(grace),
        "sluice exits before the pod's grace of {grace} s runs out"
    );
    // The Service and the disruption budget pick the Deployment's pods.
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert_eq!(&resource("Service")["spec"]["selector"], labels);
    assert_eq!(
        &resource("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        labels
    );
    assert_eq!(
        resource("Service")["spec"]["ports"][0]["targetPort"],
        "http"
    );
}

/// A value an operator would put under `key` of the Secret.
fn secret(key: &str) -> String {
    match key {
        "ledger-url" => "postgres://sluice:a-password@postgres:5432/sluice".into(),
        "admission-key-seed-hex" => {
            "5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1c".into()
        }
        _ => "a-secret-long-enough-0123456789".into(),
    }
}
