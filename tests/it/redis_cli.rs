//! `redis-cli` against the nodes of a Redis Cluster: which node serves a sale's slot, and
//! waiting for a failover to finish. The failover tests and the chaos opening share them.

use std::process::Command;
use std::time::{Duration, Instant};

use sluice::domain::SaleId;

/// `redis-cli` against one cluster node (`host:port`, or a `redis://` URL); its output.
pub fn cli(node: &str, args: &[&str]) -> String {
    let node = node.trim_start_matches("redis://");
    let (host, port) = node.rsplit_once(':').unwrap();
    let out = Command::new("redis-cli")
        .args(["-h", host, "-p", port])
        .args(args)
        .output()
        .expect("redis-cli is installed (scripts/services installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The hash slot of `sale`'s keys.
pub fn slot_of(seed: &str, sale: SaleId) -> u16 {
    cli(seed, &["cluster", "keyslot", &format!("{{sale:{sale}}}")])
        .trim()
        .parse()
        .unwrap()
}

/// The primary serving `slot` and, once the cluster's view shows one, a replica of it, as
/// `host:port`. Right after a failover the demoted node's new role takes a moment of gossip to
/// reach `seed`'s view, so this asks again (at most 30 s, 100 ms apart).
pub fn primary_and_replica(seed: &str, slot: u16) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = cli(seed, &["cluster", "nodes"]);
        if let Some(found) = serving(&nodes, slot) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no primary with a replica serves slot {slot}: {nodes}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// In `CLUSTER NODES` output, the primary serving `slot` and one of its replicas.
pub fn serving(nodes: &str, slot: u16) -> Option<(String, String)> {
    let lines: Vec<Vec<&str>> = nodes.lines().map(|l| l.split(' ').collect()).collect();
    let address = |f: &[&str]| f[1].split('@').next().unwrap().to_owned();
    let serves = |f: &[&str]| {
        f[8..].iter().any(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
        })
    };
    let primary = lines
        .iter()
        .find(|f| f.len() > 8 && f[2].contains("master") && serves(f))?;
    let replica = lines
        .iter()
        .find(|f| f.len() > 3 && f[2].contains("slave") && f[3] == primary[0])?;
    Some((address(primary), address(replica)))
}

/// Whether, within `wait`, every node of the cluster says it is whole and `node` is a primary.
fn primary_within(node: &str, seeds: &[&str], wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        let whole = seeds
            .iter()
            .all(|n| cli(n, &["cluster", "info"]).contains("cluster_state:ok"));
        if whole && cli(node, &["role"]).starts_with("master") {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Makes the replica `node` its primary's primary (`CLUSTER FAILOVER`, with `how`: `[]`
/// coordinated, `["force"]` without the primary's word) and waits until the cluster is whole
/// again. A manual failover whose election did not finish in time is over, not retried by
/// Redis (on two busy cores the votes can come late): it is asked again, three times at most.
pub fn fail_over_to(node: &str, how: &[&str], seeds: &[&str]) {
    let mut command = vec!["cluster", "failover"];
    command.extend(how);
    for _ in 0..3 {
        let answer = cli(node, &command);
        assert!(answer.contains("OK"), "{answer}");
        if primary_within(node, seeds, Duration::from_secs(15)) {
            return;
        }
    }
    panic!("{node} did not become primary after three failovers");
}
