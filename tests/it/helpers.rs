//! `TestApp::spawn()`: a real sluice on port 0 against the test Redis (a key prefix of its own)
//! and the test PostgreSQL (a database of its own), with short worker ticks.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice::config::Config;
use sluice::domain::UserId;
use sluice::service::App;
use sqlx::Connection;

pub const ADMIN_KEY: &str = "test-admin-key-0123456789";
pub const WEBHOOK_SECRET: &str = "whsec-test-0123456789abcdef";
pub const USER_SECRET: &str = "user-secret-0123456789abcdef";

/// A URL setting from a test's address (it is one).
pub fn url(text: impl AsRef<str>) -> sluice::config::HttpUrl {
    sluice::config::HttpUrl::parse(text.as_ref()).expect("a test's URL")
}

pub fn redis_url() -> String {
    std::env::var("SLUICE_TEST_REDIS_URL")
        .expect("SLUICE_TEST_REDIS_URL is unset: run the tests with scripts/test")
}

/// The seed nodes of the six-node Redis Cluster `scripts/services` runs, comma-separated.
pub fn redis_cluster_nodes() -> String {
    std::env::var("SLUICE_TEST_REDIS_CLUSTER")
        .expect("SLUICE_TEST_REDIS_CLUSTER is unset: run the tests with scripts/test")
}

pub fn pg_url() -> String {
    std::env::var("SLUICE_TEST_PG_URL")
        .expect("SLUICE_TEST_PG_URL is unset: run the tests with scripts/test")
}

/// A fresh, migrated-on-start database; returns its URL.
pub async fn fresh_database() -> String {
    let admin = pg_url();
    let name = format!("sluice_t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("test PostgreSQL is up");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let base = admin.rsplit_once('/').expect("url has a database").0;
    format!("{base}/{name}")
}

pub fn test_config() -> Config {
    let mut c = Config::default();
    c.http.listen = "127.0.0.1:0".parse().unwrap();
    c.queue.url = redis_url();
    c.queue.key_prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    // The test process shares two cores with Redis and PostgreSQL; bursts of thousands of
    // requests must not trip the production-tight timeout (the outage test sets its own).
    c.queue.timeout_ms = sluice::config::Millis(2000);
    c.ledger.max_connections = std::num::NonZeroU32::new(30).unwrap();
    c.auth.admin_key = ADMIN_KEY.into();
    c.auth.user_jwt_hs256_secret = Some(USER_SECRET.into());
    c.payments.webhook_secret = WEBHOOK_SECRET.into();
    // Replicas must share the admission key (each test has its own).
    c.auth.admission_key_seed_hex = Some(hex::encode(rand::random::<[u8; 32]>()).into());
    c.workers.admission_tick_ms = sluice::config::Millis(50);
    c.workers.lease_ttl_ms = sluice::config::Millis(1000);
    c.workers.reaper_cron = "* * * * * *".into();
    c.events.file = std::env::temp_dir().join(format!(
        "sluice-events-{}.jsonl",
        uuid::Uuid::new_v4().simple()
    ));
    c.events.poll_ms = sluice::config::Millis(50);
    // The helpers poll fast; the limits have a test of their own.
    c.limits.status_per_second = 10_000;
    c.limits.status_burst = 10_000;
    c.limits.join_per_second = 10_000;
    c.limits.join_burst = 10_000;
    // Every test client is 127.0.0.1.
    c.limits.ip_join_per_second = 100_000;
    c.limits.ip_join_burst = 100_000;
    c.limits.ip_status_per_second = 100_000;
    c.limits.ip_status_burst = 100_000;
    c
}

/// Which backends a test server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Redis and PostgreSQL (a key prefix and a database of the test's own).
    Servers,
    /// The embedded default: in-process queue store, SQLite in a directory of the test's own.
    Embedded,
    /// The Redis Cluster and PostgreSQL (a key prefix and a database of the test's own).
    ServersOnCluster,
}

/// Each named test (an `async fn(Backend)`) runs once per listed configuration, as a module
/// of tests named after them: `on_configurations!([servers: Servers, embedded: Embedded] a, b)`.
#[macro_export]
macro_rules! on_configurations {
    (@one [$($test:ident: $backend:ident),+ $(,)?] $name:ident) => {
        mod $name {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$name($crate::helpers::Backend::$backend).await
                }
            )+
        }
    };
    ($configurations:tt $($name:ident),* $(,)?) => {$(
        $crate::on_configurations!(@one $configurations $name);
    )*};
}

/// Each named test runs once per configuration, and once more on the Redis Cluster.
#[macro_export]
macro_rules! on_every_configuration {
    ($($name:ident),* $(,)?) => {
        $crate::on_configurations!(
            [servers: Servers, servers_on_cluster: ServersOnCluster, embedded: Embedded]
            $($name),*
        );
    };
}

/// Each named test runs once per configuration.
#[macro_export]
macro_rules! on_both_configurations {
    ($($name:ident),* $(,)?) => {
        $crate::on_configurations!([servers: Servers, embedded: Embedded] $($name),*);
    };
}

pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub app: App,
    /// Stops the server's runtime when sent (or dropped).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server_thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs sluice on a runtime of its own, as a separate process would be: the test's client
/// tasks do not queue in front of the server's.
type Started = (
    std::net::SocketAddr,
    App,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
);

fn start_server(config: Config) -> Started {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let running = sluice::server::start(config).await.expect("sluice starts");
            let info = (running.addr, running.app.clone());
            started_tx.send(info).unwrap();
            let _ = stop_rx.await;
            running.stop().await;
        });
    });
    let (addr, app) = started_rx
        .recv()
        .expect("server thread reports its address");
    (addr, app, stop_tx, thread)
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_on_with(Backend::Servers, tweak).await
    }

    pub async fn spawn_on(backend: Backend) -> TestApp {
        Self::spawn_on_with(backend, |_| {}).await
    }

    pub async fn spawn_on_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = test_config();
        match backend {
            Backend::Servers => config.ledger.url = fresh_database().await,
            Backend::ServersOnCluster => {
                config.ledger.url = fresh_database().await;
                config.queue.url = redis_cluster_nodes();
                config.queue.cluster = true;
            }
            Backend::Embedded => {
                config.queue.url = String::new();
                config.ledger.url = String::new();
                config.embedded.data_dir = std::env::temp_dir()
                    .join(format!("sluice-test-{}", uuid::Uuid::new_v4().simple()));
            }
        }
        tweak(&mut config);
        Self::spawn_config(config).await
    }

    /// A server with exactly this configuration (a second replica passes the first's).
    pub async fn spawn_config(config: Config) -> TestApp {
        // Logs go to the test's captured output (shown when it fails).
        sluice::telemetry::init_tracing(None, false);
        config.validate().expect("test config is valid");
        let (addr, app, stop, server_thread) =
            tokio::task::spawn_blocking(move || start_server(config))
                .await
                .unwrap();
        TestApp {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .unwrap(),
            app,
            stop: Some(stop),
            server_thread: Some(server_thread),
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.server_thread.take() {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .unwrap()
                .unwrap();
        }
    }

    /// An admin request's JSON answer, whatever its status.
    pub async fn admin_json(&self, method: reqwest::Method, path: &str) -> Value {
        json_of(self.admin(method, path)).await
    }

    /// A user's request's JSON answer, whatever its status.
    pub async fn user_json(&self, method: reqwest::Method, path: &str, user: &str) -> Value {
        json_of(self.as_user(method, path, user)).await
    }

    /// A GET's JSON answer, whatever its status.
    pub async fn get_json(&self, path: &str) -> Value {
        json_of(self.http.get(self.url(path))).await
    }

    /// What `/metrics` shows.
    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The value of the counter `name` in the series with all of `labels` (0 if none shows).
    pub async fn counter(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let metrics = self.metrics().await;
        let (series, bare) = (format!("{name}{{"), format!("{name} "));
        metrics
            .lines()
            .filter(|line| line.starts_with(&series) || line.starts_with(&bare))
            .find(|line| {
                labels
                    .iter()
                    .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
            })
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn token(&self, user: &str) -> String {
        self.app
            .users
            .mint(&UserId::parse(user).unwrap(), 3600)
            .unwrap()
    }

    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("X-Admin-Key", ADMIN_KEY)
    }

    pub fn as_user(
        &self,
        method: reqwest::Method,
        path: &str,
        user: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(self.token(user))
    }

    /// Creates a sale from defaults overridden by `overrides`; returns its id.
    pub async fn create_sale(&self, overrides: Value) -> String {
        let mut body = json!({
            "name": "Test sale", "quantity": 10, "per_user_limit": 4,
            "admission_ttl_secs": 60, "hold_ttl_secs": 60, "payment_ttl_secs": 60,
            "rate_per_minute": 600000, "max_active": 1000
        });
        for (k, v) in overrides.as_object().unwrap() {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        let resp = self
            .admin(reqwest::Method::POST, "/v1/sales")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
        resp.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn join(&self, sale: &str, user: &str) -> Value {
        let resp = self
            .as_user(
                reqwest::Method::POST,
                &format!("/v1/sales/{sale}/attempts"),
                user,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202, "{}", resp.text().await.unwrap());
        resp.json().await.unwrap()
    }

    pub async fn status(&self, attempt: &str, user: &str) -> Value {
        let resp = self
            .as_user(
                reqwest::Method::GET,
                &format!("/v1/attempts/{attempt}"),
                user,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
        resp.json().await.unwrap()
    }

    /// Polls the attempt until it is in `state` (fails after `within`).
    pub async fn wait_for(
        &self,
        attempt: &str,
        user: &str,
        state: &str,
        within: Duration,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let status = self.status(attempt, user).await;
            if status["state"] == state {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "attempt never reached {state}: {status}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Joins and waits for admission; returns (attempt id, admission token).
    pub async fn admitted(&self, sale: &str, user: &str) -> (String, String) {
        let joined = self.join(sale, user).await;
        let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
        let status = self
            .wait_for(&attempt, user, "ADMITTED", Duration::from_secs(10))
            .await;
        (
            attempt,
            status["admission_token"].as_str().unwrap().to_owned(),
        )
    }

    pub async fn hold(&self, attempt: &str, user: &str, body: Value) -> reqwest::Response {
        self.as_user(
            reqwest::Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            user,
        )
        .json(&body)
        .send()
        .await
        .unwrap()
    }

    /// Joins, waits for admission and holds `quantity`; returns the attempt id.
    pub async fn holding(&self, sale: &str, user: &str, quantity: u32) -> String {
        let (attempt, token) = self.admitted(sale, user).await;
        let held = self
            .hold(
                &attempt,
                user,
                json!({ "admission_token": token, "quantity": quantity }),
            )
            .await;
        assert_eq!(held.status(), 200, "{user} holds {quantity}");
        attempt
    }

    /// Joins, waits for admission, holds `quantity` and checks out; returns the attempt id and
    /// its `payment` object.
    pub async fn paying(&self, sale: &str, user: &str, quantity: u32) -> (String, Value) {
        let attempt = self.holding(sale, user, quantity).await;
        let paying: Value = self.checkout(&attempt, user).await.json().await.unwrap();
        assert_eq!(paying["state"], "PAYMENT_PENDING");
        (attempt, paying["payment"].clone())
    }

    pub async fn checkout(&self, attempt: &str, user: &str) -> reqwest::Response {
        self.as_user(
            reqwest::Method::POST,
            &format!("/v1/attempts/{attempt}/checkout"),
            user,
        )
        .send()
        .await
        .unwrap()
    }

    /// Posts a correctly signed webhook.
    pub async fn webhook(&self, event_id: &str, kind: &str, reference: &str) -> reqwest::Response {
        let body =
            json!({ "id": event_id, "type": kind, "payment_reference": reference }).to_string();
        let signature = self
            .app
            .webhooks
            .sign(chrono::Utc::now().timestamp(), body.as_bytes());
        self.http
            .post(self.url("/v1/webhooks/payments"))
            .header("Sluice-Signature", signature)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Asserts that every attempt of `attempts` is CONFIRMED in the ledger (`why` says why
    /// it must be).
    pub async fn assert_confirmed<'a>(
        &self,
        attempts: impl IntoIterator<Item = &'a String>,
        why: &str,
    ) {
        for attempt in attempts {
            let id = sluice::domain::AttemptId::parse(attempt).unwrap();
            let record = self.app.ledger.attempt(id).await.unwrap().unwrap();
            assert_eq!(record.state.name(), "CONFIRMED", "{why}: {attempt}");
        }
    }

    /// Asserts that the ledger accounts for each of the sale's `units` once: free, held,
    /// paying or sold.
    pub async fn assert_stock_conserved(&self, sale: sluice::domain::SaleId, units: u64) {
        let ledger = self.app.ledger.stats(sale).await.unwrap();
        assert_eq!(
            u64::from(ledger.remaining)
                + ledger.units_held
                + ledger.units_paying
                + ledger.units_sold,
            units,
            "stock conserved: {ledger:?}"
        );
    }

    /// A connection to this app's (single) Redis, for a test to read or break its keys.
    pub async fn queue_redis(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.app.config.queue.url.as_str()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    /// Deletes every key this app has in its (single) Redis, as a flush would: the queue
    /// store loses every sale.
    pub async fn wipe_queue_keys(&self) {
        let mut conn = self.queue_redis().await;
        let pattern = format!("{}:*", self.app.config.queue.key_prefix);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "no keys to wipe");
        let _: () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    pub async fn stats(&self, sale: &str) -> Value {
        let resp = self
            .admin(reqwest::Method::GET, &format!("/v1/sales/{sale}/stats"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }

    /// The events the relay wrote to the JSON lines sink so far.
    pub fn published_events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.app.config.events_file()).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
            .collect()
    }

    /// The number of outbox rows of `event_type`.
    pub async fn outbox_count(&self, event_type: &str) -> i64 {
        match self.ledger_pool().await {
            Pool::Pg(pool) => {
                sqlx::query_scalar("SELECT count(*) FROM outbox WHERE event_type = $1")
                    .bind(event_type)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
            Pool::Sqlite(pool) => {
                sqlx::query_scalar("SELECT count(*) FROM outbox WHERE event_type = ?")
                    .bind(event_type)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        }
    }

    /// How many `refund_required` events the ledger wrote for the attempt.
    pub async fn refunds_for(&self, attempt: &str) -> i64 {
        self.refund_events(attempt).await.len() as i64
    }

    /// Who gives the money back (`data.refund`) in each `refund_required` event of the attempt.
    pub async fn refund_events(&self, attempt: &str) -> Vec<String> {
        const KIND: &str = "sluice.payment.refund_required";
        match self.ledger_pool().await {
            Pool::Pg(pool) => sqlx::query_scalar(
                "SELECT payload->'data'->>'refund' FROM outbox
                 WHERE event_type = $1 AND payload->>'attempt_id' = $2",
            )
            .bind(KIND)
            .bind(attempt)
            .fetch_all(&pool)
            .await
            .unwrap(),
            Pool::Sqlite(pool) => sqlx::query_scalar(
                "SELECT json_extract(payload, '$.data.refund') FROM outbox
                 WHERE event_type = ? AND json_extract(payload, '$.attempt_id') = ?",
            )
            .bind(KIND)
            .bind(attempt)
            .fetch_all(&pool)
            .await
            .unwrap(),
        }
    }

    /// The attempt's audit trail: (from, to, cause), in order.
    pub async fn audit_trail(&self, attempt: &str) -> Vec<(String, String, String)> {
        let local = sluice::domain::AttemptId::parse(attempt).unwrap().local;
        match self.ledger_pool().await {
            Pool::Pg(pool) => sqlx::query_as(
                "SELECT from_state, to_state, cause FROM attempt_transitions WHERE attempt_id = $1 ORDER BY id",
            )
            .bind(local)
            .fetch_all(&pool)
            .await
            .unwrap(),
            Pool::Sqlite(pool) => sqlx::query_as(
                "SELECT from_state, to_state, cause FROM attempt_transitions WHERE attempt_id = ? ORDER BY id",
            )
            .bind(local)
            .fetch_all(&pool)
            .await
            .unwrap(),
        }
    }

    /// Makes the ledger refuse every new entry of the admin audit log (a trigger that raises),
    /// as a full disk or a broken table would: what the log cannot take must not be done.
    pub async fn refuse_admin_audit(&self) {
        match self.ledger_pool().await {
            Pool::Pg(pool) => {
                for sql in [
                    "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql
                     AS $$ BEGIN RAISE EXCEPTION 'the audit log refuses'; END $$",
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON admin_audit
                     FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
                ] {
                    sqlx::query(sql).execute(&pool).await.unwrap();
                }
            }
            Pool::Sqlite(pool) => {
                sqlx::query(
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON admin_audit
                     BEGIN SELECT RAISE(ABORT, 'the audit log refuses'); END",
                )
                .execute(&pool)
                .await
                .unwrap();
            }
        }
    }

    /// Moves the deadline that the timeout `event` judges a second into the past, by the
    /// ledger's clock (the next reaper pass or request expires the attempt).
    /// Waits (at most 15 s) until the attempt's state, with its reason, is `want` (e.g.
    /// `EXPIRED(payment_timeout)`); its status then.
    pub async fn wait_state(&self, attempt: &str, user: &str, want: &str) -> Value {
        for _ in 0..150 {
            let status = self.status(attempt, user).await;
            let now = match status["reason"].as_str() {
                Some(reason) => format!("{}({reason})", status["state"].as_str().unwrap()),
                None => status["state"].as_str().unwrap().to_owned(),
            };
            if now == want {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{attempt} never reached {want}: {}",
            self.status(attempt, user).await
        );
    }

    /// Holds `units` and checks out: (attempt, checkout's answer).
    pub async fn checked_out(&self, sale: &str, user: &str, units: u32) -> (String, Value) {
        let attempt = self.holding(sale, user, units).await;
        let resp = self.checkout(&attempt, user).await;
        assert_eq!(resp.status(), 200);
        (attempt, resp.json().await.unwrap())
    }

    /// An operator refunds the attempt: its file after (the answer must be 200).
    pub async fn refund(&self, sale: &str, attempt: &str) -> Value {
        let resp = self
            .admin(
                reqwest::Method::POST,
                &format!("/v1/sales/{sale}/attempts/{attempt}/refund"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }

    pub async fn pass_deadline(&self, attempt: &str, event: sluice::domain::AttemptEvent) {
        use sluice::domain::AttemptEvent as E;
        let column = match event {
            E::AdmissionTimeout => "admission_expires_at",
            E::HoldTimeout => "hold_expires_at",
            E::PaymentTimeout => "payment_expires_at",
            other => panic!("{other:?} has no deadline"),
        };
        let local = sluice::domain::AttemptId::parse(attempt).unwrap().local;
        let changed = match self.ledger_pool().await {
            Pool::Pg(pool) => sqlx::query(&format!(
                "UPDATE attempts SET {column} = now() - interval '1 second' WHERE id = $1"
            ))
            .bind(local)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected(),
            Pool::Sqlite(pool) => sqlx::query(&format!(
                "UPDATE attempts SET {column} = CAST(unixepoch('subsec') * 1000 AS INTEGER) - 1000 WHERE id = ?"
            ))
            .bind(local)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected(),
        };
        assert_eq!(changed, 1, "the attempt has a ledger row");
    }

    /// Locks the attempt's ledger row (PostgreSQL) or the whole ledger for writing (SQLite)
    /// from a connection of the test's own, until released: the attempt's next transition
    /// waits for it.
    pub async fn lock_attempt_row(&self, attempt: &str) -> RowLock {
        let local = sluice::domain::AttemptId::parse(attempt).unwrap().local;
        match self.ledger_pool().await {
            Pool::Pg(pool) => {
                let mut conn = pool.acquire().await.unwrap().detach();
                sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
                let locked = sqlx::query("SELECT 1 FROM attempts WHERE id = $1 FOR UPDATE")
                    .bind(local)
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(locked.len(), 1, "the attempt has a ledger row");
                RowLock::Pg(conn)
            }
            Pool::Sqlite(pool) => {
                let mut conn = pool.acquire().await.unwrap().detach();
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                RowLock::Sqlite(conn)
            }
        }
    }

    async fn ledger_pool(&self) -> Pool {
        let config = &self.app.config;
        if config.ledger_is_embedded() {
            let path = config.embedded.data_dir.join("sluice.db");
            Pool::Sqlite(
                sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
                    .await
                    .unwrap(),
            )
        } else {
            Pool::Pg(sqlx::PgPool::connect(&config.ledger.url).await.unwrap())
        }
    }
}

enum Pool {
    Pg(sqlx::PgPool),
    Sqlite(sqlx::SqlitePool),
}

/// A ledger lock held by the test ([`TestApp::lock_attempt_row`]).
pub enum RowLock {
    Pg(sqlx::PgConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl RowLock {
    pub async fn release(self) {
        match self {
            RowLock::Pg(mut conn) => {
                sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
            }
            RowLock::Sqlite(mut conn) => {
                sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
            }
        }
    }
}

/// The seconds an answer's `Retry-After` asks a client to wait.
pub fn retry_after(resp: &reqwest::Response) -> u64 {
    resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Asserts a problem+json answer with `status` and `type`.
pub async fn assert_problem(resp: reqwest::Response, status: u16, kind: &str) -> Value {
    assert_eq!(resp.status().as_u16(), status, "status");
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body: Value = resp.json().await.expect("a JSON body");
    assert_eq!(ct.as_deref(), Some("application/problem+json"), "{body}");
    assert_eq!(body["type"], kind, "{body}");
    assert_eq!(body["status"], status, "{body}");
    body
}

/// A redis-server of this test's own, on a free loopback port.
pub struct PrivateRedis {
    child: std::process::Child,
    pub dir: std::path::PathBuf,
}

impl PrivateRedis {
    pub fn start(port: u16, dir: &std::path::Path) -> PrivateRedis {
        let child = std::process::Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/services installs it)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "private redis did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        PrivateRedis {
            child,
            dir: dir.to_owned(),
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A TCP proxy to a loopback port that can be cut: while cut, its connections are closed and
/// new ones closed at once, so what a client sends never arrives (a network cut, the server's
/// data kept). Runs on the test's runtime.
pub struct CuttableProxy {
    pub port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl CuttableProxy {
    pub async fn start(to: u16) -> CuttableProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if *watch.borrow() {
                    continue; // dropped: closed at once
                }
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        CuttableProxy { port, cut }
    }

    pub fn cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

/// A TCP proxy to a loopback port that delays every byte by its delay each way, as a server a
/// few milliseconds away (throughput is not capped: chunks are timestamped, not queued behind
/// each other's sleeps). The delay can change while connections are open (`set_delay`): a
/// network that slows down and recovers. Runs on the test's runtime.
pub struct DelayProxy {
    pub port: u16,
    /// The delay each way, in microseconds; read for every chunk.
    delay_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl DelayProxy {
    pub async fn start(to: u16, delay: Duration) -> DelayProxy {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_us = Arc::new(AtomicU64::new(delay.as_micros() as u64));
        // Copies `from` into `to`, each chunk the delay after it was read (in order).
        async fn late<R, W>(mut from: R, mut to: W, delay_us: Arc<AtomicU64>)
        where
            R: tokio::io::AsyncRead + Unpin + Send + 'static,
            W: tokio::io::AsyncWrite + Unpin + Send + 'static,
        {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
            tokio::spawn(async move {
                while let Some((due, bytes)) = rx.recv().await {
                    tokio::time::sleep_until(due.into()).await;
                    if to.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = from.read(&mut buf).await {
                let delay = Duration::from_micros(delay_us.load(Ordering::Relaxed));
                if n == 0
                    || tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                {
                    return;
                }
            }
        }
        let delay = delay_us.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(late(client_read, server_write, delay.clone()));
                tokio::spawn(late(server_read, client_write, delay.clone()));
            }
        });
        DelayProxy { port, delay_us }
    }

    /// From now on, every chunk read is delayed by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_us.store(
            delay.as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// A free loopback port for a server that a test starts a moment later (Redis, Prometheus, a
/// sluice process). It is drawn below the kernel's range of ephemeral ports (32768-60999),
/// from which every outgoing connection of the suite takes its local port, so no client
/// connection can take it before its server binds it. It also stays below the Redis
/// Cluster's bus ports (27001-27006).
pub fn free_port() -> u16 {
    use rand::Rng;
    for _ in 0..1000 {
        let port = rand::thread_rng().gen_range(20_000..27_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in 20000-26999")
}

pub fn kafka_brokers() -> String {
    std::env::var("SLUICE_TEST_KAFKA")
        .expect("SLUICE_TEST_KAFKA is unset: run the tests with scripts/test")
}

/// A tansu broker of the test's own (memory engine) on a free loopback port.
pub struct PrivateBroker {
    pub brokers: String,
    child: std::process::Child,
}

impl PrivateBroker {
    pub fn start() -> PrivateBroker {
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = std::process::Command::new("tansu")
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tansu is installed (scripts/services installs it)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "private broker did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        PrivateBroker {
            brokers: format!("127.0.0.1:{port}"),
            child,
        }
    }

    /// SIGSTOP (`false`) or SIGCONT (`true`): the broker stops answering without losing data.
    pub fn signal(&self, resume: bool) {
        let signal = if resume { "-CONT" } else { "-STOP" };
        let status = std::process::Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every distinct event of `topic`, in the order first seen (the reference consumer's way).
pub async fn consume(brokers: &str, topic: &str, max: u64) -> Vec<Value> {
    let options = sluice::events::tail::TailOptions {
        brokers: brokers.to_owned(),
        topic: topic.to_owned(),
        group: format!("test-{}", uuid::Uuid::new_v4().simple()),
        from_beginning: true,
        max: Some(max),
        idle: Some(std::time::Duration::from_secs(20)),
    };
    let mut out = Vec::new();
    sluice::events::tail::tail(options, &mut out)
        .await
        .expect("the topic can be read");
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A Prometheus of the test's own on a loopback port, scraping one sluice every second
/// (`scripts/services` installs the Debian package). Stop and start it again to play an
/// outage; its data directory survives.
pub struct PrivatePrometheus {
    pub port: u16,
    dir: std::path::PathBuf,
    child: Option<std::process::Child>,
}

impl PrivatePrometheus {
    /// The address to give sluice's `valve.prometheus_url` before anything runs.
    pub fn reserve() -> PrivatePrometheus {
        let dir =
            std::env::temp_dir().join(format!("sluice-prom-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        PrivatePrometheus {
            port: free_port(),
            dir,
            child: None,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts scraping `target` (`host:port` of a sluice) and waits until it is ready.
    pub async fn start(&mut self, target: &str) {
        let config = self.dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus is installed (scripts/services installs it)");
        self.child = Some(child);
        let ready = format!("{}/-/ready", self.url());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(&ready).await {
                if r.status().is_success() {
                    return;
                }
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() >= deadline {
                // The directory goes with this value: what Prometheus said goes in the message.
                let log =
                    std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                panic!(
                    "prometheus did not start on port {} ({exited:?}); its log ends:\n{}",
                    self.port,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivatePrometheus {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// sluice as a separate process of the real binary (`serve`), for what needs a real process:
/// SIGKILL and restart, and reading everything it logs. The configuration is the test's,
/// written to a TOML file.
pub struct SluiceProcess {
    pub base: String,
    pub config: Config,
    pub log: std::path::PathBuf,
    config_file: std::path::PathBuf,
    child: Option<std::process::Child>,
    /// Environment variables it runs with, besides `PATH` and `RUST_LOG` (the rest is cleared).
    env: Vec<(String, String)>,
}

impl SluiceProcess {
    pub async fn start(config: Config, rust_log: &str) -> SluiceProcess {
        let process = SluiceProcess::launch(config, rust_log);
        process.until_ready().await;
        process
    }

    /// Starts the binary with the environment variables `env` too, and waits until it is ready.
    pub async fn start_with_env(
        config: Config,
        rust_log: &str,
        env: &[(&str, String)],
    ) -> SluiceProcess {
        let mut process = SluiceProcess::prepare(config);
        process.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        process.start_child(rust_log);
        process.until_ready().await;
        process
    }

    /// Starts the binary and returns at once, while it starts.
    pub fn launch(config: Config, rust_log: &str) -> SluiceProcess {
        let mut process = SluiceProcess::prepare(config);
        process.start_child(rust_log);
        process
    }

    /// Its configuration file and log, on a free port; not started.
    fn prepare(mut config: Config) -> SluiceProcess {
        let port = free_port();
        config.http.listen = format!("127.0.0.1:{port}").parse().unwrap();
        let dir =
            std::env::temp_dir().join(format!("sluice-proc-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let config_file = dir.join("sluice.toml");
        std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
        SluiceProcess {
            base: format!("http://127.0.0.1:{port}"),
            config,
            log: dir.join("sluice.log"),
            config_file,
            child: None,
            env: Vec::new(),
        }
    }

    /// Its metrics, as Prometheus scrapes them.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Starts the binary (again) and waits until it answers ready.
    pub async fn spawn(&mut self, rust_log: &str) {
        self.start_child(rust_log);
        self.until_ready().await;
    }

    fn start_child(&mut self, rust_log: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("--config")
            .arg(&self.config_file)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            // "": sluice's own default.
            .envs((!rust_log.is_empty()).then_some(("RUST_LOG", rust_log)))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the sluice binary");
        self.child = Some(child);
    }

    async fn until_ready(&self) {
        let ready = format!("{}/health/ready", self.base);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(&ready).await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not start: {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, as from Kubernetes or `docker stop`: returns how the process exited and how
    /// long it took (`None` if it was still running after `within`; it is killed then).
    pub async fn terminate(
        &mut self,
        within: Duration,
    ) -> Option<(std::process::ExitStatus, Duration)> {
        let mut child = self.child.take()?;
        let sent = Instant::now();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        while sent.elapsed() < within {
            if let Some(exit) = child.try_wait().unwrap() {
                return Some((exit, sent.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        None
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the running process.
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// SIGKILL: no shutdown, no flushing, as a crashed host.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the ledger at `ledger` has relayed every outbox row (none pending, none dead);
/// fails after 30 s.
pub async fn outbox_relayed(ledger: &mut sqlx::PgConnection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox WHERE published_at IS NULL AND dead_at IS NULL",
        )
        .fetch_one(&mut *ledger)
        .await
        .unwrap();
        if pending == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{pending} events never published"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Who admits for `sale` as the sluice at `base` reports it: (instance, fence).
pub async fn admitter_of(http: &reqwest::Client, base: &str, sale: &str) -> Option<(String, u64)> {
    let view: Value = http
        .get(format!("{base}/v1/sales/{sale}/admission"))
        .header("X-Admin-Key", ADMIN_KEY)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let admitter = view.get("admitter")?;
    Some((
        admitter["instance"].as_str()?.to_owned(),
        admitter["fence"].as_u64()?,
    ))
}

/// A tool's stdout and stderr together, for assertion messages.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A PostgreSQL cluster of the test's own (initdb into a temp dir, a free loopback port), to
/// stop and start without disturbing other tests. Runs as the `postgres` user when root.
/// Commits are synchronous (as in production): an immediate stop loses no committed
/// transaction. (fsync is off: the OS, not the database, is what never crashes here.)
pub struct PrivatePostgres {
    pub url: String,
    dir: std::path::PathBuf,
    bin: std::path::PathBuf,
}

impl PrivatePostgres {
    pub fn start() -> PrivatePostgres {
        let bin = [
            "/usr/lib/postgresql/15/bin",
            "/usr/lib/postgresql/16/bin",
            "/usr/lib/postgresql/17/bin",
        ]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.join("initdb").exists())
        .expect("PostgreSQL binaries (scripts/services installs them)");
        let dir = std::env::temp_dir().join(format!("sluice-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let pg = PrivatePostgres {
            url: format!("postgres://sluice@127.0.0.1:{port}/postgres"),
            dir,
            bin,
        };
        pg.chown();
        pg.run(
            "initdb",
            &[
                "-D",
                "data",
                "-U",
                "sluice",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        std::fs::write(
            pg.dir.join("data/postgresql.auto.conf"),
            format!(
                "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
                 fsync = off\nmax_connections = 100\n",
                pg.dir.display()
            ),
        )
        .unwrap();
        pg.chown();
        pg.start_again();
        pg
    }

    fn chown(&self) {
        if is_root() {
            let _ = std::process::Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&self.dir)
                .status();
        }
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        let mut command = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            std::process::Command::new(program)
        };
        let out = command.args(args).current_dir(&self.dir).output().unwrap();
        assert!(out.status.success(), "{tool}: {}", output_text(&out));
    }

    pub fn start_again(&self) {
        self.run(
            "pg_ctl",
            &["-D", "data", "-l", "pg.log", "-w", "-t", "30", "start"],
        );
    }

    /// Stops at once, as a crashed or unreachable database would.
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", "data", "-m", "immediate", "-w", "stop"]);
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.bin.join("pg_ctl"))
            .args(["-D", "data", "-m", "immediate", "stop"])
            .current_dir(&self.dir)
            .output();
        if is_root() {
            let _ = std::process::Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", "data", "-m", "immediate", "stop"])
                .current_dir(&self.dir)
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    std::env::var("USER").map(|u| u == "root").unwrap_or(false)
        || std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

/// A request's JSON answer, whatever its status.
async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// A sale made through the admin API of the sluice at `base` (a process a test started); its
/// id.
pub async fn create_sale_at(http: &reqwest::Client, base: &str, body: Value) -> String {
    let created: Value = http
        .post(format!("{base}/v1/sales"))
        .header("X-Admin-Key", ADMIN_KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["id"].as_str().unwrap().to_owned()
}

/// Pauses the sale at `base`: joins queue up, nobody is admitted.
pub async fn pause_sale_at(http: &reqwest::Client, base: &str, sale: &str) {
    let paused = http
        .post(format!("{base}/v1/sales/{sale}/pause"))
        .header("X-Admin-Key", ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert!(paused.status().is_success(), "pause: {}", paused.status());
}

/// A provider's stand-in of `tests/standins/` (a Python script) on a free loopback port, for
/// the test's life.
pub struct StandIn {
    child: std::process::Child,
    pub port: u16,
}

impl StandIn {
    /// Runs `tests/standins/<script>` with the port first, then `args`; waits until it answers.
    pub async fn start(script: &str, args: &[&str]) -> StandIn {
        let port = free_port();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/standins")
            .join(script);
        let child = std::process::Command::new("python3")
            .arg(path)
            .arg(port.to_string())
            .args(args)
            .spawn()
            .expect("python3 runs the stand-ins");
        // Dropped (and so killed and waited for) however this ends.
        let stand_in = StandIn { child, port };
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return stand_in;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the stand-in {script} did not start");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A call of the stand-in's own controls (`/_test/…`, `/_window/…`): its JSON answer.
    pub async fn control(&self, path: &str, body: Value) -> Value {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", self.url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.unwrap()
    }

    /// The API calls it received: `[{method, path, …}]`.
    pub async fn calls(&self) -> Vec<Value> {
        reqwest::get(format!("{}/_test/calls", self.url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One SSE message: (event, id, data).
fn parse_events(text: &str) -> Vec<(String, String, Value)> {
    text.split("\n\n")
        .filter(|m| m.contains("data:"))
        .map(|m| {
            let field = |name: &str| {
                m.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            let data = serde_json::from_str(&field("data:")).unwrap();
            (field("event:"), field("id:"), data)
        })
        .collect()
}

/// An open Server-Sent Events stream: its events as they come.
pub struct SseStream {
    body: reqwest::Response,
    buffer: String,
}

impl SseStream {
    /// Sends `request` and keeps its stream (the answer must be 200).
    pub async fn open(request: reqwest::RequestBuilder) -> Self {
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        SseStream {
            body: resp,
            buffer: String::new(),
        }
    }

    /// The next event (event, id, data) within `within`, if one comes.
    pub async fn next(&mut self, within: Duration) -> Option<(String, String, Value)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let message: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse_events(&message).pop() {
                    return Some(event);
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.chunk())
                .await
                .ok()?
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
