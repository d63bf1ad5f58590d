//! Scale-out: three sluice processes (the real binary) on one Redis Cluster (six nodes), one
//! PostgreSQL database, with no load balancer: clients spread their requests round-robin. 5,000
//! users join through all three; admission (FIFO) follows join order exactly; the replica
//! holding the sale's admission lease is SIGKILLed halfway and another takes over within the
//! lease's life, with nobody admitted twice or skipped; status streams stay right whichever
//! replica a client reaches (reconnecting when its replica dies); holds through the survivors
//! never oversell.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};
use sluice::domain::{SaleId, UserId};
use sluice::queue::{QueueStore, RedisQueue};
use sqlx::Connection;

use crate::helpers::{fresh_database, redis_cluster_nodes, test_config, SluiceProcess, ADMIN_KEY};

const USERS: usize = 5_000;
const UNITS: u64 = 500;
/// Admitted users who then try to hold one unit each: three times the stock.
const HOLDERS: usize = 1_500;
/// The admitter is killed once this many are admitted.
const KILL_AFTER: i64 = 1_500;
const RATE_PER_MINUTE: u32 = 60_000;
const LEASE_TTL_MS: u64 = 1_000;
/// Users whose status stream is watched from start to admission.
const WATCHED: [usize; 5] = [10, 1_200, 2_500, 3_700, 4_990];

/// The three replicas as a client sees them: addresses to spread requests over.
struct Replicas {
    http: reqwest::Client,
    bases: Vec<String>,
    /// Replicas killed so far (skipped by the round-robin).
    dead: HashSet<usize>,
    tokens: Arc<sluice::auth::UserTokens>,
}

impl Replicas {
    fn live(&self, i: usize) -> &str {
        let live: Vec<&String> = (0..self.bases.len())
            .filter(|r| !self.dead.contains(r))
            .map(|r| &self.bases[r])
            .collect();
        live[i % live.len()]
    }

    fn bearer(&self, user: &str) -> String {
        let user = UserId::parse(user).unwrap();
        format!("Bearer {}", self.tokens.mint(&user, 3600).unwrap())
    }

    async fn admin(&self, replica: usize, method: Method, path: &str, body: Value) -> Value {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.bases[replica]))
            .header("X-Admin-Key", ADMIN_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.unwrap()
    }

    async fn as_user(
        &self,
        base: &str,
        method: Method,
        path: &str,
        user: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{base}{path}"))
            .header("Authorization", self.bearer(user))
            .timeout(Duration::from_secs(20));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Who admits for the sale now, as any live replica reports it: (instance, fence).
    async fn admitter(&self, sale: &str) -> Option<(String, u64)> {
        crate::helpers::admitter_of(&self.http, self.live(0), sale).await
    }
}

fn user_name(i: usize) -> String {
    format!("scale-{i}")
}

/// Follows one attempt's status stream until ADMITTED, moving to the next replica whenever
/// the connection ends (as a browser would after its replica died). Returns the positions and
/// states seen, in order.
async fn watch(
    replicas: Arc<Vec<String>>,
    first: usize,
    attempt: String,
    bearer: String,
    heard: tokio::sync::oneshot::Sender<()>,
) -> Vec<(String, Option<u64>)> {
    let mut heard = Some(heard);
    let http = reqwest::Client::new();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut replica = first;
    while Instant::now() < deadline {
        let base = &replicas[replica % replicas.len()];
        replica += 1;
        let Ok(mut resp) = http
            .get(format!("{base}/v1/attempts/{attempt}/events"))
            .header("Authorization", &bearer)
            .send()
            .await
        else {
            continue;
        };
        let mut buffer = String::new();
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_secs(10), resp.chunk()).await
        {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let status: Value = serde_json::from_str(data).unwrap();
                let state = status["state"].as_str().unwrap_or_default().to_owned();
                seen.push((state.clone(), status["position"].as_u64()));
                if let Some(heard) = heard.take() {
                    let _ = heard.send(());
                }
                if state == "ADMITTED" {
                    return seen;
                }
            }
        }
    }
    seen
}

#[tokio::test]
async fn three_replicas_on_a_redis_cluster_keep_fifo_and_survive_losing_the_admitter() {
    let mut config = test_config();
    config.queue.url = redis_cluster_nodes();
    config.queue.cluster = true;
    config.ledger.url = fresh_database().await;
    config.ledger.max_connections = std::num::NonZeroU32::new(20).unwrap();
    config.workers.lease_ttl_ms = sluice::config::Millis(LEASE_TTL_MS);
    let mut processes = Vec::new();
    for _ in 0..3 {
        processes.push(SluiceProcess::start(config.clone(), "info").await);
    }
    let mut replicas = Replicas {
        http: reqwest::Client::new(),
        bases: processes.iter().map(|p| p.base.clone()).collect(),
        dead: HashSet::new(),
        tokens: Arc::new(sluice::auth::UserTokens::from_config(&config.auth).unwrap()),
    };

    // A sale created on one replica, paused on another: everybody joins before anyone is
    // admitted, so each join's position is its place in the join order.
    let sale = replicas
        .admin(
            0,
            Method::POST,
            "/v1/sales",
            json!({"name": "scale-out", "quantity": UNITS, "per_user_limit": 1,
                   "admission_ttl_secs": 600, "hold_ttl_secs": 600, "payment_ttl_secs": 600,
                   "rate_per_minute": RATE_PER_MINUTE, "max_active": USERS * 2}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    replicas
        .admin(
            1,
            Method::POST,
            &format!("/v1/sales/{sale}/pause"),
            json!({}),
        )
        .await;

    // 5,000 joins, round-robin over the three replicas, 48 at a time.
    let joins: Vec<(usize, String, u64)> = stream::iter(0..USERS)
        .map(|i| {
            let (replicas, sale) = (&replicas, &sale);
            async move {
                let (status, body) = replicas
                    .as_user(
                        replicas.live(i),
                        Method::POST,
                        &format!("/v1/sales/{sale}/attempts"),
                        &user_name(i),
                        None,
                    )
                    .await;
                assert_eq!(status, 202, "{body}");
                (
                    i,
                    body["attempt_id"].as_str().unwrap().to_owned(),
                    body["position"].as_u64().unwrap(),
                )
            }
        })
        .buffer_unordered(48)
        .collect()
        .await;
    let position_of: HashMap<String, u64> = joins
        .iter()
        .map(|(i, _, position)| (user_name(*i), *position))
        .collect();
    let positions: HashSet<u64> = position_of.values().copied().collect();
    assert_eq!(
        positions,
        (1..=USERS as u64).collect::<HashSet<_>>(),
        "one queue across the replicas: every join got its own place"
    );

    // Status streams, each opened on a replica other than the one its user joined through.
    let bases = Arc::new(replicas.bases.clone());
    let mut first_heard = Vec::new();
    let watchers: Vec<_> = WATCHED
        .iter()
        .map(|&i| {
            let (_, attempt, position) = joins.iter().find(|(j, _, _)| *j == i).unwrap().clone();
            let (heard, first) = tokio::sync::oneshot::channel();
            first_heard.push(first);
            let watcher = tokio::spawn(watch(
                bases.clone(),
                i + 1,
                attempt,
                replicas.bearer(&user_name(i)),
                heard,
            ));
            (i, position, watcher)
        })
        .collect();
    // Each stream has told its user where they stand before anyone moves.
    for first in first_heard {
        tokio::time::timeout(Duration::from_secs(30), first)
            .await
            .expect("a stream's first event")
            .expect("the watcher runs");
    }

    replicas
        .admin(
            2,
            Method::POST,
            &format!("/v1/sales/{sale}/resume"),
            json!({}),
        )
        .await;

    let mut db = sqlx::PgConnection::connect(&config.ledger.url)
        .await
        .unwrap();
    let sale_uuid = SaleId::parse(&sale).unwrap().0;
    let admissions =
        "SELECT count(*) FROM attempt_transitions t JOIN attempts a ON a.id = t.attempt_id
                      WHERE a.sale_id = $1 AND t.to_state = 'ADMITTED'";
    let deadline = Instant::now() + Duration::from_secs(60);
    while sqlx::query_scalar::<_, i64>(admissions)
        .bind(sale_uuid)
        .fetch_one(&mut db)
        .await
        .unwrap()
        < KILL_AFTER
    {
        assert!(Instant::now() < deadline, "admission too slow");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // SIGKILL the replica that holds the lease.
    let (killed_instance, killed_fence) = replicas.admitter(&sale).await.expect("an admitter");
    let victim = processes
        .iter()
        .position(|p| p.logs().contains(&killed_instance))
        .expect("the admitter is one of the three");
    processes[victim].kill();
    let killed_at = Instant::now();
    replicas.dead.insert(victim);
    let admitted_at_kill: i64 = sqlx::query_scalar(admissions)
        .bind(sale_uuid)
        .fetch_one(&mut db)
        .await
        .unwrap();
    let (taker, taker_fence) = loop {
        if let Some((instance, fence)) = replicas.admitter(&sale).await {
            if instance != killed_instance {
                break (instance, fence);
            }
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(10),
            "no replica took over"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let takeover = killed_at.elapsed();
    assert!(
        taker_fence > killed_fence,
        "a new admitter gets a larger fence"
    );
    assert!(
        takeover <= Duration::from_millis(LEASE_TTL_MS + 500),
        "took over after {takeover:?} (lease {LEASE_TTL_MS} ms)"
    );
    assert!(processes
        .iter()
        .enumerate()
        .any(|(r, p)| r != victim && p.logs().contains(&taker)));

    while sqlx::query_scalar::<_, i64>(admissions)
        .bind(sale_uuid)
        .fetch_one(&mut db)
        .await
        .unwrap()
        < USERS as i64
    {
        assert!(Instant::now() < deadline, "not everybody was admitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Admission order (the ledger's transition ids) against join order: 0 inversions, nobody
    // twice, nobody skipped.
    let order: Vec<(String, i64)> = sqlx::query_as(
        "SELECT a.user_id, a.seq FROM attempt_transitions t JOIN attempts a ON a.id = t.attempt_id
         WHERE a.sale_id = $1 AND t.to_state = 'ADMITTED' ORDER BY t.id",
    )
    .bind(sale_uuid)
    .fetch_all(&mut db)
    .await
    .unwrap();
    let admitted_users: HashSet<&String> = order.iter().map(|(u, _)| u).collect();
    assert_eq!(order.len(), USERS, "admissions recorded");
    assert_eq!(
        admitted_users.len(),
        USERS,
        "nobody admitted twice, nobody skipped"
    );
    let join_positions: Vec<u64> = order.iter().map(|(u, _)| position_of[u]).collect();
    let inversions = join_positions.windows(2).filter(|w| w[0] > w[1]).count();
    assert_eq!(inversions, 0, "admission order is join order");
    assert_eq!(join_positions, (1..=USERS as u64).collect::<Vec<_>>());
    let queue = RedisQueue::cluster(
        &config.queue.url.split(',').collect::<Vec<_>>(),
        &config.queue.key_prefix,
        Duration::from_secs(2),
    )
    .unwrap();
    let redis_stats = queue.stats(SaleId::parse(&sale).unwrap()).await.unwrap();
    assert_eq!(
        (redis_stats.waiting, redis_stats.active),
        (0, USERS as u64),
        "Redis agrees"
    );

    // Every watched stream saw its user move forward only, and be admitted.
    for (i, position, watcher) in watchers {
        let seen = watcher.await.unwrap();
        assert_eq!(
            seen.last().map(|(s, _)| s.as_str()),
            Some("ADMITTED"),
            "user {i}: {seen:?}"
        );
        let queued: Vec<u64> = seen
            .iter()
            .filter_map(|(_, p)| *p)
            .filter(|p| *p > 0)
            .collect();
        assert_eq!(
            queued.first(),
            Some(&position),
            "user {i} first heard its join position"
        );
        assert!(
            queued.windows(2).all(|w| w[0] >= w[1]),
            "user {i} never moved back: {queued:?}"
        );
    }

    // Holds through the two survivors: three holders per unit, none oversold.
    let (replicas, joins) = (&replicas, &joins);
    let outcomes: Vec<u16> = stream::iter(0..HOLDERS)
        .map(|i| async move {
            let (attempt, user) = (
                joins.iter().find(|(j, _, _)| *j == i).unwrap().1.clone(),
                user_name(i),
            );
            let (_, status) = replicas
                .as_user(
                    replicas.live(i),
                    Method::GET,
                    &format!("/v1/attempts/{attempt}"),
                    &user,
                    None,
                )
                .await;
            let token = status["admission_token"]
                .as_str()
                .expect("admitted")
                .to_owned();
            let body = json!({"admission_token": token, "quantity": 1});
            replicas
                .as_user(
                    replicas.live(i + 1),
                    Method::POST,
                    &format!("/v1/attempts/{attempt}/hold"),
                    &user,
                    Some(body),
                )
                .await
                .0
        })
        .buffer_unordered(48)
        .collect()
        .await;
    let held = outcomes.iter().filter(|s| (200..300).contains(*s)).count();
    let sold_out = outcomes.iter().filter(|s| **s == 409).count();
    assert_eq!(
        (held, sold_out),
        (UNITS as usize, HOLDERS - UNITS as usize),
        "{outcomes:?}"
    );
    let holding: i64 =
        sqlx::query_scalar("SELECT count(*) FROM attempts WHERE sale_id = $1 AND state = 'HOLD'")
            .bind(sale_uuid)
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(holding, UNITS as i64, "0 oversold in the ledger");
    assert_eq!(
        queue
            .stats(SaleId::parse(&sale).unwrap())
            .await
            .unwrap()
            .remaining,
        0,
        "nor in Redis"
    );

    crate::reliability::record(
        "Replica holding the admission lease SIGKILLed (3 replicas, Redis Cluster)",
        &[
            ("users", USERS.to_string()),
            ("admitted when killed", admitted_at_kill.to_string()),
            (
                "takeover",
                format!("{} ms (lease {LEASE_TTL_MS} ms)", takeover.as_millis()),
            ),
            ("inversions", inversions.to_string()),
            ("admitted twice or skipped", "0".into()),
            (
                "held / tried",
                format!("{held} / {HOLDERS} for {UNITS} units"),
            ),
        ],
    );
}
