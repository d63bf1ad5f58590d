//! A Redis Cluster of the chaos opening's own: three primaries and a replica of each, every
//! node behind a [`DelayProxy`] that its clients (sluice, and the replicas' replication links)
//! reach it through, so that the network can be slowed. Nodes talk to each other directly on
//! their bus ports. Its faults: the sale's primary killed (its replica takes over, and the
//! killed node comes back as a replica) and the sale's primary and replica restarted empty.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::{free_port, DelayProxy};
use crate::redis_cli::{cli, serving};

/// One node: where it listens, where its clients reach it, its files.
struct Node {
    /// The port redis-server binds.
    port: u16,
    /// The cluster bus port (`cluster-port`), which the nodes' gossip uses.
    bus: u16,
    /// The proxy in front of `port`; the node announces its port to clients.
    proxy: DelayProxy,
    /// Its `nodes.conf` (no data is ever saved: a restart comes back empty).
    dir: PathBuf,
    /// The running process, if any.
    child: Option<Child>,
}

impl Node {
    fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--port", &self.port.to_string()])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", "1000"])
            .args(["--cluster-replica-validity-factor", "0"])
            .args(["--cluster-port", &self.bus.to_string()])
            .args(["--cluster-announce-port", &self.proxy.port.to_string()])
            .args(["--cluster-announce-bus-port", &self.bus.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/services installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "a cluster node did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `host:port` of the node itself (not its proxy), for redis-cli.
    fn direct(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

pub struct PrivateCluster {
    nodes: Vec<Node>,
}

impl PrivateCluster {
    /// Six nodes made one cluster by hand (slots, meet, replicate), then waited for until
    /// every node says it is whole.
    pub async fn start() -> PrivateCluster {
        let root =
            std::env::temp_dir().join(format!("sluice-cluster-{}", uuid::Uuid::new_v4().simple()));
        let mut nodes = Vec::new();
        for i in 0..6 {
            let port = free_port();
            let proxy = DelayProxy::start(port, Duration::ZERO).await;
            let dir = root.join(i.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            let mut node = Node {
                port,
                bus: free_port(),
                proxy,
                dir,
                child: None,
            };
            node.run();
            nodes.push(node);
        }
        let cluster = PrivateCluster { nodes };
        tokio::task::spawn_blocking({
            let direct: Vec<String> = cluster.nodes.iter().map(Node::direct).collect();
            let announced: Vec<(u16, u16)> = cluster
                .nodes
                .iter()
                .map(|n| (n.proxy.port, n.bus))
                .collect();
            move || form(&direct, &announced)
        })
        .await
        .unwrap();
        cluster
    }

    /// The seed URLs sluice is given (the proxies).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.proxy.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every proxy (so every client and replication link) delays by `delay` each way.
    pub fn set_delay(&self, delay: Duration) {
        for n in &self.nodes {
            n.proxy.set_delay(delay);
        }
    }

    /// A running node's address (not its proxy's), for the test's own reads.
    pub fn any_direct(&self) -> String {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .map(Node::direct)
            .unwrap()
    }

    /// The nodes (indices) serving `slot`: its primary and its replica, as the cluster sees it
    /// once it has settled (at most 30 s).
    pub fn serving(&self, slot: u16) -> (usize, usize) {
        let index = |address: &str| {
            self.nodes
                .iter()
                .position(|n| address == format!("127.0.0.1:{}", n.proxy.port))
                .unwrap_or_else(|| panic!("{address} is no node of the cluster"))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let nodes = cli(&self.any_direct(), &["cluster", "nodes"]);
            if let Some((primary, replica)) = serving(&nodes, slot) {
                let (p, r) = (index(&primary), index(&replica));
                if !nodes.contains("fail") && self.nodes[p].child.is_some() {
                    return (p, r);
                }
            }
            assert!(
                Instant::now() < deadline,
                "slot {slot} has no primary with a replica: {nodes}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The address (`host:port`, not its proxy's) of the node serving `slot` as primary.
    pub fn primary_of(&self, slot: u16) -> String {
        self.nodes[self.serving(slot).0].direct()
    }

    /// The sale's primary SIGKILLed; once its replica has taken over, the killed node is started
    /// again (empty) and becomes the new primary's replica.
    pub fn kill_primary(&mut self, slot: u16) {
        let (primary, replica) = self.serving(slot);
        self.nodes[primary].kill();
        self.wait(
            |c| c.role(replica).starts_with("master") && c.whole(),
            "a failover",
        );
        self.nodes[primary].run();
        self.wait(
            |c| c.role(primary).starts_with("slave") && c.in_sync(primary) && c.whole(),
            "the killed primary to follow the new one",
        );
    }

    /// The sale's primary and its replica SIGKILLed together and started again, empty.
    pub fn restart_empty(&mut self, slot: u16) {
        let (primary, replica) = self.serving(slot);
        self.nodes[primary].kill();
        self.nodes[replica].kill();
        self.nodes[primary].run();
        self.nodes[replica].run();
        self.wait(
            |c| c.whole() && (c.in_sync(primary) || c.in_sync(replica)),
            "the emptied nodes to serve again",
        );
    }

    fn role(&self, node: usize) -> String {
        cli(&self.nodes[node].direct(), &["role"])
    }

    /// Whether `node` is a replica whose link to its primary is up.
    fn in_sync(&self, node: usize) -> bool {
        cli(&self.nodes[node].direct(), &["info", "replication"]).contains("master_link_status:up")
    }

    /// Whether every running node says the cluster is whole.
    fn whole(&self) -> bool {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .all(|n| cli(&n.direct(), &["cluster", "info"]).contains("cluster_state:ok"))
    }

    fn wait(&self, done: impl Fn(&Self) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(Instant::now() < deadline, "waited 30 s for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Makes one cluster of six fresh nodes: the first three take a third of the slots each, all
/// meet (at their announced ports), the last three replicate the first three.
fn form(direct: &[String], announced: &[(u16, u16)]) {
    let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
    for (node, (lo, hi)) in direct.iter().zip(ranges) {
        let answer = cli(
            node,
            &["cluster", "addslotsrange", &lo.to_string(), &hi.to_string()],
        );
        assert!(answer.contains("OK"), "{answer}");
    }
    for (port, bus) in &announced[1..] {
        let answer = cli(
            &direct[0],
            &[
                "cluster",
                "meet",
                "127.0.0.1",
                &port.to_string(),
                &bus.to_string(),
            ],
        );
        assert!(answer.contains("OK"), "{answer}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let known = |node: &str| {
        let nodes = cli(node, &["cluster", "nodes"]);
        nodes.lines().count() == 6 && !nodes.contains("handshake") && !nodes.contains("noaddr")
    };
    while !direct.iter().all(|n| known(n)) {
        assert!(
            Instant::now() < deadline,
            "the cluster's nodes did not meet"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 3..6 {
        let id = cli(&direct[i - 3], &["cluster", "myid"]).trim().to_owned();
        let answer = cli(&direct[i], &["cluster", "replicate", &id]);
        assert!(answer.contains("OK"), "{answer}");
    }
    let whole = |node: &String| cli(node, &["cluster", "info"]).contains("cluster_state:ok");
    let synced =
        |node: &String| cli(node, &["info", "replication"]).contains("master_link_status:up");
    while !(direct.iter().all(whole) && direct[3..].iter().all(synced)) {
        assert!(
            Instant::now() < deadline,
            "the cluster did not become whole"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}
