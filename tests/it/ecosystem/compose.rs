//! The production shape (`docker-compose.yml`), checked without a Docker engine: dclint
//! validates it against the Compose specification (and a broken copy must fail, so the check
//! is real); sluice accepts the configuration the replicas are given; Prometheus scrapes
//! exactly the replicas; every mounted file exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dclint(file: &Path) -> std::process::Output {
    Command::new("npx")
        .args(["--no-install", "dclint"])
        .arg(file) // before the options: --disable-rule takes every word after it
        .args(["--color", "false"])
        // Service and key order are style; grouping the stores before the replicas reads better.
        .args([
            "--disable-rule",
            "services-alphabetical-order",
            "service-keys-order",
        ])
        .current_dir(root().join("tests/compose"))
        .output()
        .expect("node is installed and tests/compose has its packages (scripts/tools)")
}

/// The file with its YAML merge keys (`<<: *sluice`) applied, as docker compose reads it.
pub(crate) fn compose() -> Value {
    let mut file: Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("docker-compose.yml")).unwrap())
            .unwrap();
    file.apply_merge().unwrap();
    file
}

#[test]
fn the_compose_file_follows_the_compose_specification() {
    super::passes_and_a_broken_copy_fails(
        dclint,
        &root().join("docker-compose.yml"),
        (
            "    image: redis:7.4-alpine\n",
            "    image: redis:7.4-alpine\n    ports: {not: a list}\n",
        ),
        "must be array",
    );
}

#[test]
fn the_production_shape_has_its_parts_and_two_replicas() {
    let file = compose();
    let services = file["services"].as_mapping().unwrap();
    for name in [
        "redis",
        "postgres",
        "kafka",
        "prometheus",
        "grafana",
        "sluice-1",
        "sluice-2",
    ] {
        assert!(services.contains_key(name), "no service {name}");
    }
    assert_eq!(
        file["services"]["kafka"]["environment"]["KAFKA_PROCESS_ROLES"], "broker,controller",
        "Kafka runs in KRaft mode (no ZooKeeper)"
    );
    // Each store keeps its data in a named volume: Kafka's log dir is the one it mounts.
    let kafka = &file["services"]["kafka"];
    let log_dir = kafka["environment"]["KAFKA_LOG_DIRS"]
        .as_str()
        .expect("Kafka is told its log dir (the image's default is /tmp)");
    let named_mounts: Vec<&str> = kafka["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str()?.split_once(':'))
        .filter(|(source, _)| !source.starts_with('.') && !source.starts_with('/'))
        .map(|(_, target)| target)
        .collect();
    assert!(
        named_mounts
            .iter()
            .any(|target| log_dir.starts_with(target)),
        "Kafka's log dir {log_dir} is in none of its volumes {named_mounts:?}"
    );
    // Prometheus scrapes exactly the replicas, on the port they listen on.
    let prometheus: Value = serde_yaml::from_str(
        &std::fs::read_to_string(root().join("prometheus/prometheus.yml")).unwrap(),
    )
    .unwrap();
    let targets = &prometheus["scrape_configs"][0]["static_configs"][0]["targets"];
    assert_eq!(
        targets,
        &serde_yaml::from_str::<Value>("[sluice-1:8080, sluice-2:8080]").unwrap()
    );
    // Every bind-mounted path is in the repository.
    for service in services.values() {
        for volume in service["volumes"].as_sequence().into_iter().flatten() {
            let spec = volume.as_str().unwrap();
            if let Some(local) = spec.strip_prefix("./") {
                let path = local.split(':').next().unwrap();
                assert!(root().join(path).exists(), "mounted {path} is missing");
            }
        }
    }
}

/// The replicas' environment is a configuration sluice starts with: every key exists and
/// every value is valid (placeholders filled in as an operator would).
#[test]
// figment's `Jail` takes a closure returning figment's `Result`, whose error is large by design.
#[allow(clippy::result_large_err)]
fn sluice_accepts_the_replicas_configuration() {
    let file = compose();
    for replica in ["sluice-1", "sluice-2"] {
        let env = file["services"][replica]["environment"]
            .as_mapping()
            .unwrap()
            .clone();
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            for (key, value) in &env {
                let value = fill(value.as_str().unwrap());
                jail.set_env(key.as_str().unwrap(), value);
            }
            let config = sluice::secrets::load(None).map_err(|e| e.to_string())?;
            assert_eq!(config.queue.url, "redis://redis:6379");
            assert_eq!(config.events.kafka_brokers, "kafka:9092");
            assert_eq!(
                config.valve.prometheus_url.as_deref(),
                Some("http://prometheus:9090")
            );
            Ok(())
        });
    }
}

/// `${NAME:?message}` and `${NAME:-default}` as docker compose would fill them, with values
/// an operator could set.
fn fill(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let name = rest[start + 2..end].split([':', '-', '?']).next().unwrap();
        out.push_str(match name {
            "SLUICE_ADMISSION_KEY_SEED_HEX" => {
                "5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1c"
            }
            _ => "a-secret-long-enough-0123456789",
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}
