//! An opening under faults, checked by its history (`scripts/chaos` runs it longer).
//!
//! Two sluice processes share a PostgreSQL and a Redis Cluster of the test's own (three
//! primaries, a replica each), every connection to them through a proxy that can slow it. Buyers, one after
//! another from each of `CHAOS_USERS` clients, join through either replica, poll as they are
//! told, abandon, hold, release, check out and pay; the
//! payment provider (played by the test, signing its own webhooks) sends them duplicated,
//! reordered and late; an operator pauses, adds stock and refunds. Meanwhile faults strike at
//! random: the sale's Redis primary killed (its replica takes over), the sale's Redis nodes
//! restarted empty, PostgreSQL restarted, a replica SIGKILLed and started again, and the
//! network to Redis and PostgreSQL slowed by tens of milliseconds each way for a few seconds.
//! Every answer is recorded; at the end the ledger and the store are read and
//! [`history::check`] holds them to the invariants.
//!
//! Seeded and bounded: `CHAOS_SEED` (default 7), `CHAOS_SECS` (default 20, the opening's
//! length), `CHAOS_USERS` (default 150). Loopback only.

mod cluster;
mod history;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use sqlx::{Connection, Row};

use crate::helpers::{
    test_config, DelayProxy, PrivatePostgres, SluiceProcess, ADMIN_KEY, WEBHOOK_SECRET,
};
use crate::redis_cli::slot_of;
use cluster::PrivateCluster;
use history::{Ending, Fault, Record};

/// A small seeded generator (xorshift64*): the run is the seed's.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the clients share: the replicas' addresses, the clock, the history.
struct Opening {
    http: reqwest::Client,
    bases: Vec<String>,
    sale: String,
    /// A coupon drop beside the sale: an instant sale some buyers claim from instead.
    coupon: String,
    began: Instant,
    ends: Instant,
    users: sluice::auth::UserTokens,
    history: Mutex<Vec<Record>>,
}

impl Opening {
    /// One request, recorded: (status, body); status 0 when no answer came.
    #[allow(clippy::too_many_arguments)]
    async fn call(
        &self,
        replica: usize,
        op: &'static str,
        user: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, String)],
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(
                method,
                format!("{}{path}", self.bases[replica % self.bases.len()]),
            )
            .timeout(Duration::from_secs(15));
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let started = Instant::now();
        let (status, answer) = match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                (status, resp.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        };
        let state = answer["state"]
            .as_str()
            .map(|s| match answer["reason"].as_str() {
                Some(r) => format!("{s}({r})"),
                None => s.to_owned(),
            });
        let note = answer["result"]
            .as_str()
            .or(answer["type"].as_str())
            .unwrap_or_default()
            .to_owned();
        self.history.lock().unwrap().push(Record {
            at: started - self.began,
            took: started.elapsed(),
            who: format!("{}", replica % self.bases.len()),
            op,
            user: user.to_owned(),
            attempt: answer["attempt_id"].as_str().map(str::to_owned),
            status,
            state,
            note,
        });
        (status, answer)
    }

    fn bearer(&self, user: &str) -> (&'static str, String) {
        let user = sluice::domain::UserId::parse(user).unwrap();
        (
            "Authorization",
            format!("Bearer {}", self.users.mint(&user, 3600).unwrap()),
        )
    }

    async fn user_call(
        &self,
        rng: &mut Rng,
        op: &'static str,
        user: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let replica = rng.below(2) as usize;
        let auth = self.bearer(user);
        self.call(replica, op, user, method, path, body, &[auth])
            .await
    }

    async fn admin(
        &self,
        op: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let key = ("X-Admin-Key", ADMIN_KEY.to_owned());
        self.call(0, op, "operator", method, path, body, &[key])
            .await
    }

    /// The provider's webhook for `reference`, signed as the provider signs it (the test's own
    /// HMAC), to either replica.
    async fn webhook(&self, replica: usize, id: &str, kind: &str, reference: &str) {
        let body = json!({ "id": id, "type": kind, "payment_reference": reference }).to_string();
        let t = chrono::Utc::now().timestamp();
        let mut mac = Hmac::<Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes()).unwrap();
        mac.update(format!("{t}.{body}").as_bytes());
        let signature = format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()));
        let body: Value = serde_json::from_str(&body).unwrap();
        self.call(
            replica,
            "webhook",
            id,
            reqwest::Method::POST,
            "/v1/webhooks/payments",
            Some(body),
            &[("Sluice-Signature", signature)],
        )
        .await;
    }

    fn over(&self) -> bool {
        Instant::now() >= self.ends
    }
}

/// One client's buyers, one after the other until the opening ends: each goes through the
/// opening once (joining again when told to rejoin: the line was reset), then the next comes.
async fn buyer(opening: Arc<Opening>, n: u64, mut rng: Rng) {
    let mut k = 0;
    while !opening.over() {
        tokio::time::sleep(Duration::from_millis(rng.below(3000))).await;
        let user = format!("chaos-{n}-{k}");
        if rng.chance(25) {
            one_claim(&opening, &user, &mut rng).await;
        } else {
            while !opening.over() && one_attempt(&opening, &user, n, &mut rng).await {}
        }
        k += 1;
    }
}

/// One claim of `user` on the coupon drop, as a client makes it: asked until answered (a
/// timeout or a 503 is asked again: the same claim, or none made), then, told to wait,
/// polled until CONFIRMED or sold out.
async fn one_claim(opening: &Arc<Opening>, user: &str, rng: &mut Rng) {
    let path = format!("/v1/sales/{}/attempts", opening.coupon);
    let mut attempt = None;
    while attempt.is_none() && !opening.over() {
        let (status, answer) = opening
            .user_call(rng, "claim", user, reqwest::Method::POST, &path, None)
            .await;
        match status {
            201 | 202 => attempt = answer["attempt_id"].as_str().map(str::to_owned),
            409 => return,
            _ => tokio::time::sleep(Duration::from_millis(300 + rng.below(500))).await,
        }
    }
    let Some(attempt) = attempt else { return };
    let path = format!("/v1/attempts/{attempt}");
    while !opening.over() {
        let (status, answer) = opening
            .user_call(rng, "status", user, reqwest::Method::GET, &path, None)
            .await;
        let done = answer["state"] == "CONFIRMED" || answer["sold_out"] == true;
        if status == 410 || (status == 200 && done) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200 + rng.below(300))).await;
    }
}

/// One attempt of `user`, to its end; whether the user was told to join again.
async fn one_attempt(opening: &Arc<Opening>, user: &str, n: u64, rng: &mut Rng) -> bool {
    let user = user.to_owned();
    let sale = opening.sale.clone();
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    let delete = reqwest::Method::DELETE;
    // Join until an answer comes (a client retries).
    let mut attempt = None;
    while attempt.is_none() && !opening.over() {
        let (status, answer) = opening
            .user_call(
                rng,
                "join",
                &user,
                post.clone(),
                &format!("/v1/sales/{sale}/attempts"),
                None,
            )
            .await;
        if status < 300 {
            attempt = answer["attempt_id"].as_str().map(str::to_owned);
        } else {
            tokio::time::sleep(Duration::from_millis(300 + rng.below(500))).await;
        }
    }
    let Some(attempt) = attempt else {
        return false;
    };
    let path = format!("/v1/attempts/{attempt}");
    let mut state = String::new();
    let mut token = None;
    let mut acted = false;
    while !opening.over() {
        let (status, answer) = opening
            .user_call(rng, "status", &user, get.clone(), &path, None)
            .await;
        if status == 410 && answer["type"] == "/problems/rejoin" {
            return true;
        }
        if status == 200 {
            state = answer["state"].as_str().unwrap_or_default().to_owned();
            token = answer["admission_token"]
                .as_str()
                .map(str::to_owned)
                .or(token);
        }
        match state.as_str() {
            "QUEUED" if rng.chance(2) => {
                opening
                    .user_call(rng, "leave", &user, delete.clone(), &path, None)
                    .await;
            }
            "ADMITTED" if !acted => {
                acted = true;
                if rng.chance(10) {
                    opening
                        .user_call(rng, "leave", &user, delete.clone(), &path, None)
                        .await;
                    continue;
                }
                let body = json!({ "admission_token": token, "quantity": 1 + rng.below(2) });
                opening
                    .user_call(
                        rng,
                        "hold",
                        &user,
                        post.clone(),
                        &format!("{path}/hold"),
                        Some(body),
                    )
                    .await;
            }
            "HOLD" => {
                if rng.chance(10) {
                    opening
                        .user_call(
                            rng,
                            "release",
                            &user,
                            delete.clone(),
                            &format!("{path}/hold"),
                            None,
                        )
                        .await;
                } else {
                    let (_, answer) = opening
                        .user_call(
                            rng,
                            "checkout",
                            &user,
                            post.clone(),
                            &format!("{path}/checkout"),
                            None,
                        )
                        .await;
                    if let Some(r) = answer["payment"]["reference"].as_str() {
                        pay(Arc::clone(opening), rng.clone(), n, r.to_owned());
                        rng.next();
                    }
                }
            }
            "CONFIRMED" | "EXPIRED" => return false,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(150 + rng.below(400))).await;
    }
    false
}

/// The provider's word on a payment: a success mostly, sometimes a failure first; sent once or
/// several times, in order or not, now or late (past the payment's deadline).
fn pay(opening: Arc<Opening>, mut rng: Rng, n: u64, reference: String) {
    tokio::spawn(async move {
        let late = rng.chance(10);
        let delay = if late {
            6000 + rng.below(2000)
        } else {
            rng.below(1500)
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let succeeded = rng.chance(85);
        let kind = if succeeded {
            "payment.succeeded"
        } else {
            "payment.failed"
        };
        let id = format!("evt-{n}-{}", rng.below(1_000_000));
        for _ in 0..1 + rng.below(3) {
            let replica = rng.below(2) as usize;
            opening.webhook(replica, &id, kind, &reference).await;
            tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
        }
        // A failure reported after the success (reordered): the first final word stands.
        if succeeded && rng.chance(20) {
            let id = format!("evt-{n}-late-{}", rng.below(1_000_000));
            opening
                .webhook(rng.below(2) as usize, &id, "payment.failed", &reference)
                .await;
        }
    });
}

/// The operator: pauses and resumes, adds stock, refunds purchases.
async fn operator(opening: Arc<Opening>, mut rng: Rng) {
    let sale = opening.sale.clone();
    let post = reqwest::Method::POST;
    while !opening.over() {
        tokio::time::sleep(Duration::from_millis(2000 + rng.below(2000))).await;
        match rng.below(3) {
            0 => {
                opening
                    .admin(
                        "pause",
                        post.clone(),
                        &format!("/v1/sales/{sale}/pause"),
                        None,
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(800)).await;
                opening
                    .admin(
                        "resume",
                        post.clone(),
                        &format!("/v1/sales/{sale}/resume"),
                        None,
                    )
                    .await;
            }
            1 => {
                let body = json!({ "add": 2 });
                opening
                    .admin(
                        "add_stock",
                        post.clone(),
                        &format!("/v1/sales/{sale}/stock"),
                        Some(body),
                    )
                    .await;
            }
            _ => {
                let confirmed: Vec<String> = opening
                    .history
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|r| r.state.as_deref() == Some("CONFIRMED"))
                    .filter_map(|r| r.attempt.clone())
                    .collect();
                if !confirmed.is_empty() {
                    let attempt = &confirmed[rng.below(confirmed.len() as u64) as usize];
                    opening
                        .admin(
                            "refund",
                            post.clone(),
                            &format!("/v1/sales/{sale}/attempts/{attempt}/refund"),
                            None,
                        )
                        .await;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_opening_under_faults_keeps_every_invariant_of_its_history() {
    let seed = env("CHAOS_SEED", 7);
    let secs = env("CHAOS_SECS", 20);
    let users = env("CHAOS_USERS", 150);
    let mut rng = Rng::new(seed);

    let pg = PrivatePostgres::start();
    let pg_port: u16 = pg
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let pg_proxy = DelayProxy::start(pg_port, Duration::ZERO).await;
    let mut cluster = PrivateCluster::start().await;
    let mut config = test_config();
    config.ledger.url = pg
        .url
        .replace(&pg_port.to_string(), &pg_proxy.port.to_string());
    config.queue.url = cluster.urls();
    config.queue.cluster = true;
    config.queue.key_prefix = format!("chaos{}", rng.below(1_000_000));
    let mut replicas = vec![
        SluiceProcess::start(config.clone(), "warn").await,
        SluiceProcess::start(config.clone(), "warn").await,
    ];
    let bases = replicas.iter().map(|r| r.base.clone()).collect();
    let http = reqwest::Client::new();
    let sale: Value = http
        .post(format!("{}/v1/sales", replicas[0].base))
        .header("X-Admin-Key", ADMIN_KEY)
        .json(&json!({
            "name": "chaos", "quantity": 60, "per_user_limit": 2, "rate_per_minute": 600,
            "max_active": 40, "admission_ttl_secs": 4, "hold_ttl_secs": 4, "payment_ttl_secs": 5,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sale = sale["id"].as_str().unwrap().to_owned();
    let coupon: Value = http
        .post(format!("{}/v1/sales", replicas[0].base))
        .header("X-Admin-Key", ADMIN_KEY)
        .json(&json!({
            "name": "chaos coupons", "quantity": 40, "per_user_limit": 1, "instant": true,
            "max_active": 40,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let coupon = coupon["id"].as_str().unwrap().to_owned();
    let slot = slot_of(
        &cluster.any_direct(),
        sluice::domain::SaleId::parse(&sale).unwrap(),
    );
    let began = Instant::now();
    let opening = Arc::new(Opening {
        http,
        bases,
        sale: sale.clone(),
        coupon: coupon.clone(),
        began,
        ends: began + Duration::from_secs(secs),
        users: sluice::auth::UserTokens::from_config(&config.auth).unwrap(),
        history: Mutex::new(Vec::new()),
    });
    let mut tasks = Vec::new();
    for n in 0..users {
        tasks.push(tokio::spawn(buyer(
            opening.clone(),
            n,
            Rng::new(seed ^ (n + 1) << 8),
        )));
    }
    tasks.push(tokio::spawn(operator(
        opening.clone(),
        Rng::new(seed ^ 0xA5A5),
    )));

    // The faults, one at a time, until the opening ends.
    let mut faults = Vec::new();
    let mut order_from = 0i64;
    while !opening.over() {
        tokio::time::sleep(Duration::from_millis(2500 + rng.below(2500))).await;
        if opening.over() {
            break;
        }
        let from = began.elapsed();
        // Each fault's own waits block (redis-cli, pg_ctl): off the clients' threads.
        let what = match rng.below(6) {
            0 => {
                tokio::task::block_in_place(|| cluster.kill_primary(slot));
                "redis primary killed"
            }
            1 => {
                tokio::task::block_in_place(|| cluster.restart_empty(slot));
                "redis restarted empty"
            }
            2 => {
                tokio::task::block_in_place(|| pg.stop());
                tokio::time::sleep(Duration::from_millis(1000)).await;
                tokio::task::block_in_place(|| pg.start_again());
                "postgresql restarted"
            }
            3 => {
                let which = rng.below(2) as usize;
                replicas[which].kill();
                tokio::time::sleep(Duration::from_millis(500)).await;
                replicas[which].spawn("warn").await;
                "replica killed and restarted"
            }
            4 => {
                let delay = Duration::from_millis(20 + rng.below(80));
                cluster.set_delay(delay);
                pg_proxy.set_delay(delay);
                tokio::time::sleep(Duration::from_millis(2000 + rng.below(2000))).await;
                cluster.set_delay(Duration::ZERO);
                pg_proxy.set_delay(Duration::ZERO);
                "network slowed"
            }
            _ => continue,
        };
        if what == "redis restarted empty" {
            // The line starts again: admissions are in order within each numbering.
            order_from = max_transition(&pg.url).await;
        }
        faults.push(Fault {
            what,
            from,
            to: began.elapsed(),
        });
    }
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    }
    let settle = Instant::now();
    // Every deadline passes and the workers settle what is left: the line drains (those still
    // in it are admitted and time out), after which the stores stand still and the drift
    // checker can compare them.
    let stats = format!("/v1/sales/{sale}/stats");
    while settle.elapsed() < Duration::from_secs(90) {
        let (_, figures) = http_get(&opening, &stats).await;
        if figures["waiting"] == 0 && open_attempts(&pg.url).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let primary = tokio::task::block_in_place(|| cluster.primary_of(slot));
    let coupon_primary = tokio::task::block_in_place(|| {
        cluster.primary_of(slot_of(
            &cluster.any_direct(),
            sluice::domain::SaleId::parse(&coupon).unwrap(),
        ))
    });
    let mut end = ending(
        &pg.url,
        &sale,
        &config.queue.key_prefix,
        &primary,
        order_from,
    )
    .await;
    end.coupons = coupons(&pg.url, &coupon, &config.queue.key_prefix, &coupon_primary).await;
    let history = opening.history.lock().unwrap().clone();
    let verdict = history::check(&history, &faults, &end);
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in &faults {
        *kinds.entry(f.what).or_default() += 1;
    }
    let kinds = kinds
        .iter()
        .map(|(what, n)| format!("{what} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let summary = format!(
        "chaos seed {seed}, {secs} s, {users} users: {} answers, {} faults ({kinds}), violations: {}",
        history.len(),
        faults.len(),
        if verdict.is_ok() { 0 } else { 1 }
    );
    println!("{summary}");
    match verdict {
        Ok(figures) => {
            println!("chaos: {figures}");
            crate::reliability::record(
                "An opening under faults, checked by its history (scripts/chaos)",
                &[
                    ("seed, length, users", format!("{seed}, {secs} s, {users}")),
                    ("faults injected", format!("{} ({kinds})", faults.len())),
                    ("answers checked", history.len().to_string()),
                    ("what the ledger ended with", figures),
                    ("violations", "0".into()),
                ],
            );
        }
        Err(violation) => panic!("{summary}\nfirst violation: {violation}"),
    }
    for r in &mut replicas {
        r.kill();
    }
    drop(cluster);
}

/// The coupon drop's end: units claimed (the CONFIRMED attempts' holds), free in the ledger,
/// its total, and free in the queue store (waited for, as the sale's).
async fn coupons(url: &str, coupon: &str, prefix: &str, primary: &str) -> (u64, u64, u64, u64) {
    let mut conn = ledger(url).await;
    let id = sluice::domain::SaleId::parse(coupon).unwrap();
    let one = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).bind(id.0);
    let claimed = one(
        "SELECT coalesce(CAST(sum(h.quantity) AS BIGINT), 0) FROM holds h
         JOIN attempts a ON a.id = h.attempt_id WHERE h.sale_id = $1 AND a.state = 'CONFIRMED'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let free = one("SELECT CAST(free AS BIGINT) FROM quantity_stock WHERE sale_id = $1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let total = one("SELECT CAST(total AS BIGINT) FROM sales WHERE id = $1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let store_free = store_free_as(primary, prefix, coupon, free).await;
    (claimed as u64, free as u64, total as u64, store_free)
}

/// An operator's read, not recorded in the history (the opening is over).
async fn http_get(opening: &Opening, path: &str) -> (u16, Value) {
    let resp = opening
        .http
        .get(format!("{}{path}", opening.bases[0]))
        .header("X-Admin-Key", ADMIN_KEY)
        .send()
        .await;
    match resp {
        Ok(resp) => (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        ),
        Err(_) => (0, Value::Null),
    }
}

async fn ledger(url: &str) -> sqlx::PgConnection {
    for _ in 0..100 {
        if let Ok(conn) = sqlx::PgConnection::connect(url).await {
            return conn;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ledger does not answer");
}

async fn max_transition(url: &str) -> i64 {
    let mut conn = ledger(url).await;
    sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM attempt_transitions")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

async fn open_attempts(url: &str) -> i64 {
    let mut conn = ledger(url).await;
    sqlx::query_scalar(
        "SELECT count(*) FROM attempts WHERE state IN ('ADMITTED', 'HOLD', 'PAYMENT_PENDING')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap_or(1)
}

/// The ledger's and the store's end of the opening.
async fn ending(url: &str, sale: &str, prefix: &str, primary: &str, order_from: i64) -> Ending {
    let mut conn = ledger(url).await;
    let sale_id = sluice::domain::SaleId::parse(sale).unwrap();
    let id_of = |local: uuid::Uuid| {
        sluice::domain::AttemptId {
            sale: sale_id,
            local,
        }
        .to_string()
    };
    let mut end = Ending::default();
    // Every attempt of both sales, the coupon drop's too.
    for row in sqlx::query("SELECT id, sale_id, state, reason FROM attempts")
        .fetch_all(&mut conn)
        .await
        .unwrap()
    {
        let state: String = row.get("state");
        let state = match row.get::<Option<String>, _>("reason") {
            Some(reason) => format!("{state}({reason})"),
            None => state,
        };
        let id = sluice::domain::AttemptId {
            sale: sluice::domain::SaleId(row.get("sale_id")),
            local: row.get("id"),
        };
        end.states.insert(id.to_string(), state);
    }
    for row in sqlx::query(
        "SELECT attempt_id, count(*) AS n FROM attempt_transitions WHERE to_state = 'ADMITTED'
         GROUP BY attempt_id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap()
    {
        end.admissions
            .insert(id_of(row.get("attempt_id")), row.get::<i64, _>("n") as u32);
    }
    end.admission_order = sqlx::query_as(
        "SELECT a.seq, t.id FROM attempt_transitions t JOIN attempts a ON a.id = t.attempt_id
         WHERE t.to_state = 'ADMITTED' AND t.id > $1 ORDER BY t.id",
    )
    .bind(order_from)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for row in sqlx::query("SELECT provider_event_id, count(*) AS n FROM payment_events GROUP BY 1")
        .fetch_all(&mut conn)
        .await
        .unwrap()
    {
        end.provider_events
            .insert(row.get("provider_event_id"), row.get::<i64, _>("n") as u32);
    }
    // A quantity sale's free units are a counter; the units each attempt holds or bought are
    // its hold's, until the hold is returned.
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let of_sale = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).bind(sale_id.0);
    let total = of_sale("SELECT CAST(total AS BIGINT) FROM sales WHERE id = $1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let by_state = |state: &'static str| {
        format!(
            "SELECT coalesce(CAST(sum(h.quantity) AS BIGINT), 0) FROM holds h
             JOIN attempts a ON a.id = h.attempt_id
             WHERE h.status IN ('held', 'confirmed') AND a.state = '{state}'
               AND h.sale_id = $1"
        )
    };
    let mut units = [0i64; 3];
    for (i, state) in ["HOLD", "PAYMENT_PENDING", "CONFIRMED"]
        .into_iter()
        .enumerate()
    {
        units[i] = sqlx::query_scalar(&by_state(state))
            .bind(sale_id.0)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    }
    let free = of_sale("SELECT CAST(free AS BIGINT) FROM quantity_stock WHERE sale_id = $1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    end.total = total as u64;
    end.units = (
        free as u64,
        units[0] as u64,
        units[1] as u64,
        units[2] as u64,
    );
    end.orphan_units = count(
        "SELECT coalesce(CAST(sum(h.quantity) AS BIGINT), 0) FROM holds h
         LEFT JOIN attempts a ON a.id = h.attempt_id
         WHERE h.status IN ('held', 'confirmed')
           AND (a.state IS NULL OR a.state NOT IN ('HOLD', 'PAYMENT_PENDING', 'CONFIRMED'))",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap() as u64;
    // Units sold by the holds, against the units the counter gave out for them (all it gave
    // out, less what is free, held and paying): more sold than given out is a unit sold twice.
    let given_out = total - free - units[0] - units[1];
    end.sold_claims = (units[2] as u64, given_out.max(0) as u64);
    // The store follows the ledger (queue-sync, drift repair): wait for it, then compare.
    let store_free = store_free_as(primary, prefix, sale, free).await;
    end.free_ledger_vs_store = (free as u64, store_free);
    end
}

/// The sale's free units in the store (its primary's), waited for (a minute at most) until
/// they read `free`, as the ledger has them: the store follows the ledger.
async fn store_free_as(primary: &str, prefix: &str, sale: &str, free: i64) -> u64 {
    let redis = redis::Client::open(format!("redis://{primary}")).unwrap();
    let mut store = redis.get_multiplexed_async_connection().await.unwrap();
    let key = format!("{prefix}:{{sale:{sale}}}:stock");
    let mut store_free = -1;
    for _ in 0..120 {
        store_free = redis::cmd("GET")
            .arg(&key)
            .query_async::<Option<i64>>(&mut store)
            .await
            .ok()
            .flatten()
            .unwrap_or(-1);
        if store_free == free {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    store_free.max(0) as u64
}
