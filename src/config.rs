//! Configuration in three layers: built-in defaults, then an optional TOML file, then
//! `SLUICE__SECTION__KEY` environment variables (`SLUICE__QUEUE__URL=redis://…`).
//! [`Config::load`] validates the result whole and names every offending key in its error. A leaf: it
//! parses and validates; start-up (`secrets::load`) fills the embedded default's secrets first.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

mod validate;
pub use crate::gate::settings::GateConfig;
pub use crate::payments::providers::settings::PaymentsConfig;
pub use crate::payments::providers::ProviderName;
pub use crate::setting::{HttpUrl, Millis, Problem, Seconds, Secret};
pub use crate::telemetry::settings::TelemetryConfig;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub http: HttpConfig,
    pub page: PageConfig,
    pub queue: QueueConfig,
    pub ledger: LedgerConfig,
    pub embedded: EmbeddedConfig,
    pub auth: AuthConfig,
    pub payments: PaymentsConfig,
    pub workers: WorkersConfig,
    pub limits: LimitsConfig,
    pub events: EventsConfig,
    pub valve: ValveConfig,
    pub notify: NotifyConfig,
    pub telemetry: TelemetryConfig,
    /// Gates in front of sites: what they share.
    pub gate: GateConfig,
    pub logging: LoggingConfig,
}

/// How the waiting-room page at `/` looks for the shop (each empty: sluice's own look).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PageConfig {
    /// The shop's name, above the sale's.
    pub shop_name: String,
    /// The shop's logo: a path on sluice's origin, or an `https://` URL (the page's content
    /// policy allows that origin's images).
    pub logo_url: String,
    /// Buttons, links and focus rings, as `#rgb` or `#rrggbb`.
    pub accent_colour: String,
    /// The page's background, as `#rgb` or `#rrggbb`.
    pub background_colour: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to serve on; port 0 picks a free port (the tests do).
    pub listen: SocketAddr,
    /// sluice's address as buyers' browsers reach it (`https://queue.shop.example`, no path):
    /// the base of the URLs a payment provider sends a buyer back to (its window's success and fail
    /// URLs). Empty (the default): those URLs are paths, which the page resolves against the
    /// address it calls sluice at.
    #[serde(with = "crate::setting::or_empty")]
    pub public_url: Option<HttpUrl>,
    /// Largest request body accepted, in bytes; larger bodies get 413.
    pub body_limit_bytes: usize,
    /// Take the client's address from the first `X-Forwarded-For` entry (per-IP limits). Only
    /// behind a proxy you run, which sets the header; otherwise clients could pick their own.
    pub trust_forwarded_for: bool,
    /// How long an HTTP/1.1 connection may wait for a request's headers: one that stays idle
    /// between requests, or sends its headers too slowly, is closed after it. Longer than the
    /// longest poll interval (36 s), so a polling client keeps its connection; a response
    /// being sent (a status stream) is not cut. An HTTP/2 connection quiet for this long is
    /// pinged, and closed if the ping goes unanswered as long. 0: never.
    pub idle_timeout_secs: Seconds,
    /// Origins whose pages may call sluice from the browser (CORS), as
    /// `https://shop.example` (scheme, host and port, no path); `["*"]` for any. Empty (the
    /// default): none, and a browser keeps other origins' pages from reading the answers.
    pub cors_allowed_origins: Vec<String>,
    /// Let those pages send cookies or HTTP auth along (`Access-Control-Allow-Credentials`).
    /// sluice's own credentials are headers (`Authorization`), which need no such grant; never
    /// with `*`.
    pub cors_allow_credentials: bool,
    /// How long a browser may keep a preflight's answer, in seconds.
    pub cors_max_age_secs: Seconds,
    /// Who may read `/metrics`: `open` (default; keep the port off the internet, or scrape
    /// through the network only), `admin` (the admin key, as `X-Admin-Key` or
    /// `Authorization: Bearer <key>`, which Prometheus's `authorization` setting sends) or `off`.
    pub metrics: Exposure,
    /// Who may read the spec (`/openapi.json`) and its docs UI (`/docs`): as `metrics`.
    pub docs: Exposure,
    /// On SIGTERM or SIGINT, how long the drain may take (open requests and streams finished,
    /// workers stopped at a clean point) before what is left is cut off; the process exits 0
    /// either way. Under Kubernetes' default grace period of 30 s.
    pub shutdown_timeout_secs: Seconds,
    /// On SIGTERM or SIGINT, how long the listener still takes new connections before it
    /// closes, while readiness answers 503 and every answer says `Connection: close`: the time
    /// a load balancer, or Kubernetes' endpoints and kube-proxy, take to stop sending new
    /// connections to a replica that is going (a few seconds; without it they meet a closed
    /// port meanwhile). 0 (the default): the listener closes at once, as suits a lone process
    /// or one behind a `preStop` sleep. Part of `shutdown_timeout_secs`, so shorter than it.
    pub drain_delay_secs: Seconds,
}

/// Who may read an operational route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    /// Anyone who reaches the port.
    Open,
    /// Requests that carry the admin key.
    Admin,
    /// Nobody: the route answers 404.
    Off,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Empty: the in-process queue store (embedded). `redis://…`: Redis. With `cluster`, the
    /// seed nodes of a Redis Cluster, comma-separated (one reachable node is enough).
    pub url: String,
    /// `url` names a Redis Cluster: every key of a sale lives in the slot `{sale:<id>}`.
    pub cluster: bool,
    /// Prefix of every key, so several deployments (or tests) can share one Redis.
    pub key_prefix: String,
    /// Longest wait for one Redis call before answering 503.
    pub timeout_ms: Millis,
    /// How often each replica refreshes its view of a waiting line (one store call per sale
    /// per interval answers every waiting user's status there): the most a waiting answer
    /// lags behind the store. 20 to 5,000.
    pub line_refresh_ms: Millis,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// Empty: a SQLite file in `embedded.data_dir` (embedded). `postgres://…`: PostgreSQL.
    pub url: String,
    /// Connections of the ledger's pool, per replica (the embedded SQLite file takes at most 8).
    pub max_connections: NonZeroU32,
    /// Longest wait for a pooled connection before answering 503: long enough to ride out a
    /// burst of holds, short enough that a down database answers quickly.
    pub acquire_timeout_ms: Millis,
    /// Run pending migrations when `serve` starts.
    pub migrate_on_start: bool,
    /// Most holds, checkouts or claims of one sale written in one transaction (one commit).
    /// Writes that arrive while a sale's transactions are out wait and go together, up to
    /// this many; a lone one waits for nobody.
    pub batch_max: u32,
    /// Transactions of one sale's batches out at once, per replica: two keep the database
    /// busy with one batch while the next gathers.
    pub batch_calls: u32,
}

/// Where the embedded backends keep their files.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedConfig {
    /// The SQLite ledger, the events file, and the secrets generated when none are configured.
    pub data_dir: PathBuf,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The `X-Admin-Key` of the admin routes (at least 16 characters). Embedded, when unset:
    /// generated once and kept in the data directory.
    pub admin_key: Secret,
    /// HS256 secret that signs the customer's user tokens; or use `user_jwt_public_key_pem`.
    pub user_jwt_hs256_secret: Option<Secret>,
    /// Ed25519 or RSA public key (PEM) of the customer's identity provider.
    pub user_jwt_public_key_pem: Option<String>,
    /// When set, every user token must name this issuer in `iss` (a string, or an array that
    /// holds it). With `user_oidc_issuer`, that issuer unless this says otherwise.
    pub user_jwt_issuer: Option<String>,
    /// The identity provider's OpenID Connect issuer (`https://shop.eu.auth0.com/`): its keys
    /// are read from the `jwks_uri` of `<issuer>/.well-known/openid-configuration`, kept in
    /// memory, and fetched again as their caching allows or when a token names a new `kid`.
    pub user_oidc_issuer: Option<HttpUrl>,
    /// Or the URL of the identity provider's JWKS itself.
    pub user_jwks_url: Option<HttpUrl>,
    /// When set, every user token must name this audience in `aud` (a string, or an array that
    /// holds it): the identifier the identity provider gives sluice (an API's audience, a
    /// client id). Unset: a token that carries an `aud` is refused.
    pub user_jwt_audience: Option<String>,
    /// More identity providers trusted at once (a shop's own accounts and Kakao Login, say),
    /// each `{issuer, audience, user_prefix, jwks_url}`: a token is checked by the one its
    /// `iss` names, with that issuer's published keys (OIDC discovery, or `jwks_url`), and its
    /// user id is `user_prefix` + `sub`, so two providers' users cannot collide.
    #[serde(default)]
    pub user_issuers: Vec<TrustedIssuer>,
    /// 32-byte Ed25519 seed (hex) that signs admission tokens. Every replica needs the same one;
    /// when unset a key is generated at start (fine for one process, not for replicas).
    pub admission_key_seed_hex: Option<Secret>,
}

/// One more identity provider whose user tokens sluice takes (`auth.user_issuers`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedIssuer {
    /// Its `iss`, and where its OpenID configuration is found.
    pub issuer: HttpUrl,
    /// The `aud` its tokens must name, when set (else a token with an `aud` is refused).
    pub audience: Option<String>,
    /// Put before each token's `sub` to make the user id (e.g. `kakao:`); required.
    pub user_prefix: String,
    /// Its JWKS, when not found by discovery.
    pub jwks_url: Option<HttpUrl>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersConfig {
    /// Run the admission loop and the reapers in this process.
    pub enabled: bool,
    /// How often each sale's admitter takes the head of the queue.
    pub admission_tick_ms: Millis,
    /// How long an admission lease lasts without renewal.
    pub lease_ttl_ms: Millis,
    /// Six-field cron (seconds first, UTC) of the expiry reapers.
    pub reaper_cron: String,
    /// How long saved idempotent responses are kept.
    pub idempotency_ttl_secs: Seconds,
    /// A waiting user who shows no sign of life (join, status poll, status stream) for this
    /// long loses the place: EXPIRED, reason abandoned. 0 turns it off. While on, clients are
    /// told to poll at least three times within it.
    pub abandon_after_secs: Seconds,
    /// How often the queue-sync worker applies the queue-store changes no request applied
    /// (the store was away): units given back meanwhile are sellable again this long after
    /// the store returns, plus a second's grace.
    pub queue_sync_ms: Millis,
    /// How far back the queue-sync worker checks, every few seconds, that the queue store
    /// still has the changes the ledger saw applied, and replays those it lost (a failover's
    /// asynchronous replication, or a restart, drops the last writes). Between 10 s and an
    /// hour (the store keeps its record of applied changes that long).
    pub queue_sync_replay_secs: Seconds,
    /// How often each open sale's holdings in the queue store (free units or seats, active
    /// set, holds, units per user) are compared with the ledger's (a standing difference is
    /// repaired); 0 turns it off. The ledger reads a sale's snapshot for it: keep it seconds
    /// apart for sales of a million units.
    pub drift_check_ms: Millis,
    /// How often each open or paused sale's figures (waiting, admitted, holding, paying, sold,
    /// the rate and the controller's decision) are sampled into the ledger, for
    /// `getSaleFigures` and the console's charts; kept a day. 0 turns it off.
    pub figures_ms: Millis,
}

/// Where domain events go once committed to the outbox.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsConfig {
    /// JSON lines file the relay appends events to; empty: `<data_dir>/events.jsonl`.
    pub file: PathBuf,
    /// How often the relay looks for new outbox rows.
    pub poll_ms: Millis,
    /// Rows relayed per batch.
    pub batch: NonZeroU32,
    /// Kafka bootstrap servers (`127.0.0.1:9092`); empty: the JSON lines file.
    pub kafka_brokers: String,
    /// The topic every event goes to (key = sale id).
    pub topic: String,
    /// Partitions of the topic when sluice creates it.
    pub partitions: i32,
    /// Largest event Kafka is sent; larger ones are refused and, after `max_tries`, dead-lettered.
    pub max_message_bytes: u32,
    /// Refusals of one event before it goes to the dead letters (not counting outages).
    pub max_tries: u32,
}

/// The log lines sluice writes to stderr (which ones: `RUST_LOG`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingConfig {
    /// `text` (a line for people), or `json` (one JSON object a line, for a log pipeline: its
    /// time, level, message and fields, and the request's span with its `trace_id`).
    pub format: String,
}

/// "It's your turn": the messages that tell an admitted user who left the waiting page. Each
/// channel is off until configured.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Web Push: the server's VAPID private key, base64url of the raw P-256 scalar, as
    /// `npx web-push generate-vapid-keys` prints it. Empty: no Web Push.
    pub vapid_private_key: Secret,
    /// The VAPID public key printed beside it (the page subscribes with it).
    pub vapid_public_key: String,
    /// The contact a push service may reach the sender at: `mailto:…` or `https://…`.
    pub vapid_subject: String,
    /// The push services sluice sends to: a host, or `*.` and a domain for its subdomains. A
    /// subscription naming another host is refused, so a client cannot make sluice post to a
    /// host of its choosing.
    pub web_push_hosts: Vec<String>,
    /// The shop's webhook for `attempt.admitted` (`https://…`). Empty: none.
    #[serde(with = "crate::setting::or_empty")]
    pub webhook_url: Option<HttpUrl>,
    /// Signs the webhook (`Sluice-Signature`); at least 16 characters.
    pub webhook_secret: Secret,
    /// Most messages a second, per channel.
    pub max_per_second: NonZeroU32,
}

impl NotifyConfig {
    pub fn any_channel(&self) -> bool {
        !self.vapid_private_key.is_empty() || self.webhook_url.is_some()
    }
}

/// The adaptive admission controller (sales in `adaptive` mode; manual sales ignore it).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValveConfig {
    /// Prometheus (`http://127.0.0.1:9090`) to read the signals from with PromQL; empty: the
    /// process's own metrics (embedded, one process).
    #[serde(with = "crate::setting::or_empty")]
    pub prometheus_url: Option<HttpUrl>,
    /// How often the signals are read and each adaptive sale's rate moves. No faster than
    /// Prometheus scrapes sluice, or one scrape is counted several times.
    pub tick_ms: Millis,
    /// Longest wait for one Prometheus query; a slower one reads as stale (rate held).
    pub query_timeout_ms: Millis,
    /// Fraction of a sale's max rate added per tick while every signal is comfortable.
    pub increase_fraction: f64,
    /// Factor applied to the rate per tick while a signal is over its target (0 to 1).
    pub backoff: f64,
    /// Fraction of its target under which a signal counts as comfortable; between it and the
    /// target the rate holds.
    pub hold_band: f64,
    /// The pressure signals by name. The built-in ones (see `domain/signal_catalogue.rs`) can be
    /// re-targeted, re-queried or disabled; others can be added with a PromQL query
    /// (Prometheus only).
    pub signals: BTreeMap<String, SignalConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalConfig {
    /// PromQL giving an instant vector or scalar; its largest value is the reading.
    pub query: String,
    /// The level the reading should stay under.
    pub target: f64,
    pub enabled: bool,
}

/// Per-user request limits (0 turns one off). A client that honours `poll_after_ms` stays far
/// below them.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Joins a second per user (a token bucket; 0: no limit). A person joins once; a client
    /// that retries a join is answered 429 with `Retry-After`, as it is past the burst.
    pub join_per_second: u32,
    /// Joins a user may make at once before the rate applies.
    pub join_burst: u32,
    /// Status polls a second per user: the page polls as `poll_after_ms` says, far less often.
    pub status_per_second: u32,
    /// Status polls a user may make at once before the rate applies.
    pub status_burst: u32,
    /// Joins a second per client IP, over all its users: generous, since many buyers can
    /// share one address (an office, a campus, a carrier's NAT), yet a bound on one machine
    /// joining as many users. A load test from one machine is one IP: see `k6/README.md`.
    pub ip_join_per_second: u32,
    /// Joins an IP may make at once before its rate applies.
    pub ip_join_burst: u32,
    /// Status polls a second per client IP, over all its users.
    pub ip_status_per_second: u32,
    /// Status polls an IP may make at once before its rate applies.
    pub ip_status_burst: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page: PageConfig::default(),
            http: HttpConfig {
                listen: "127.0.0.1:8080".parse().expect("static address"),
                public_url: None,
                body_limit_bytes: 64 * 1024,
                trust_forwarded_for: false,
                idle_timeout_secs: Seconds(60),
                cors_allowed_origins: Vec::new(),
                cors_allow_credentials: false,
                cors_max_age_secs: Seconds(600),
                metrics: Exposure::Open,
                docs: Exposure::Open,
                shutdown_timeout_secs: Seconds(25),
                drain_delay_secs: Seconds(0),
            },
            queue: QueueConfig {
                url: String::new(),
                cluster: false,
                key_prefix: "sluice".into(),
                timeout_ms: Millis(150),
                line_refresh_ms: Millis(1000),
            },
            ledger: LedgerConfig {
                url: String::new(),
                max_connections: NonZeroU32::new(20).expect("non-zero"),
                acquire_timeout_ms: Millis(3000),
                migrate_on_start: true,
                batch_max: 256,
                batch_calls: 2,
            },
            embedded: EmbeddedConfig {
                data_dir: "sluice-data".into(),
            },
            auth: AuthConfig {
                admin_key: Secret::default(),
                user_jwt_hs256_secret: None,
                user_jwt_public_key_pem: None,
                user_jwt_issuer: None,
                user_oidc_issuer: None,
                user_jwks_url: None,
                user_jwt_audience: None,
                user_issuers: Vec::new(),
                admission_key_seed_hex: None,
            },
            payments: PaymentsConfig::default(),
            workers: WorkersConfig {
                enabled: true,
                admission_tick_ms: Millis(1000),
                lease_ttl_ms: Millis(5000),
                reaper_cron: "*/1 * * * * *".into(),
                idempotency_ttl_secs: Seconds(24 * 3600),
                abandon_after_secs: Seconds(0),
                queue_sync_ms: Millis(500),
                queue_sync_replay_secs: Seconds(300),
                drift_check_ms: Millis(10_000),
                figures_ms: Millis(10_000),
            },
            events: EventsConfig {
                file: PathBuf::new(),
                poll_ms: Millis(200),
                batch: NonZeroU32::new(500).expect("non-zero"),
                kafka_brokers: String::new(),
                topic: "sluice.events".into(),
                partitions: 6,
                max_message_bytes: 1_000_000,
                max_tries: 5,
            },
            logging: LoggingConfig {
                format: "text".into(),
            },
            telemetry: TelemetryConfig::default(),
            gate: GateConfig::default(),
            notify: NotifyConfig {
                vapid_private_key: Secret::default(),
                vapid_public_key: String::new(),
                vapid_subject: String::new(),
                web_push_hosts: [
                    "fcm.googleapis.com",
                    "updates.push.services.mozilla.com",
                    "web.push.apple.com",
                    "*.notify.windows.com",
                ]
                .map(String::from)
                .to_vec(),
                webhook_url: None,
                webhook_secret: Secret::default(),
                max_per_second: NonZeroU32::new(200).expect("non-zero"),
            },
            valve: ValveConfig {
                prometheus_url: None,
                tick_ms: Millis(5000),
                query_timeout_ms: Millis(2000),
                increase_fraction: 0.05,
                backoff: 0.7,
                hold_band: 0.8,
                signals: crate::domain::signal_catalogue::BUILTINS
                    .iter()
                    .map(|b| {
                        let signal = SignalConfig {
                            query: b.query.into(),
                            target: b.target,
                            enabled: true,
                        };
                        (b.name.to_owned(), signal)
                    })
                    .collect(),
            },
            limits: LimitsConfig {
                join_per_second: 2,
                join_burst: 10,
                status_per_second: 5,
                status_burst: 20,
                ip_join_per_second: 20,
                ip_join_burst: 100,
                ip_status_per_second: 200,
                ip_status_burst: 1000,
            },
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer that does not parse (a value of the wrong type, a file that is not TOML).
    #[error("configuration: {0}")]
    Parse(Box<figment::Error>),
    /// Every setting that parses but cannot be used, each naming its key.
    #[error("configuration: {} setting(s) cannot be used:{}", .0.len(), list(.0))]
    Invalid(Vec<Problem>),
}

fn list(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("\n  - {p}")).collect()
}

/// The list settings the environment gives as comma-separated values (`SLUICE__HTTP__
/// CORS_ALLOWED_ORIGINS=https://a.example,https://b.example`), as key paths and items: a
/// Kubernetes manifest or a compose file writes a list so. A value written as a TOML array
/// (`["…"]`) is left to the environment's own parser; an empty value is an empty list.
fn env_lists() -> Vec<(String, Vec<String>)> {
    let defaults = serde_json::to_value(Config::default()).unwrap_or_default();
    std::env::vars()
        .filter_map(|(name, value)| {
            let path: Vec<String> = name
                .strip_prefix("SLUICE__")?
                .split("__")
                .map(str::to_lowercase)
                .collect();
            let is_list = path
                .iter()
                .try_fold(&defaults, |node, part| node.get(part))
                .is_some_and(|v| v.is_array());
            (is_list && !value.trim_start().starts_with('[')).then(|| {
                let items = value
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(str::to_owned)
                    .collect();
                (path.join("."), items)
            })
        })
        .collect()
}

impl Config {
    /// Defaults, then `file` (if given), then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::from_figment(Self::figment(file))
    }

    pub fn figment(file: Option<&Path>) -> Figment {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        figment = figment.merge(Env::prefixed("SLUICE__").split("__"));
        for (key, items) in env_lists() {
            figment = figment.merge(Serialized::default(&key, items));
        }
        figment
    }

    pub fn from_figment(figment: Figment) -> Result<Config, ConfigError> {
        let (config, problems) = Self::parse(figment)?;
        config.checked(problems)
    }

    /// The layers as they are, not validated: start-up fills the embedded default's secrets
    /// (`secrets::load`) before it validates. A value of the wrong type is a problem, and its
    /// default stands in for it, so that the check that follows reports the rest as well.
    /// A layer that does not parse at all (a file that is not TOML) is an error of its own.
    pub fn parse(mut figment: Figment) -> Result<(Config, Vec<Problem>), ConfigError> {
        let defaults = serde_json::to_value(Config::default()).unwrap_or_default();
        let mut problems = Vec::new();
        loop {
            let e = match figment.extract::<Config>() {
                Ok(config) => return Ok((config, problems)),
                Err(e) => e,
            };
            let key = e.path.join(".");
            // The default of the key, or of the nearest section that has one (an entry of a
            // list, `auth.user_issuers.0.issuer`, gives way to the list's default).
            let default = (1..=e.path.len()).rev().find_map(|depth| {
                let path = &e.path[..depth];
                let node = path
                    .iter()
                    .try_fold(&defaults, |node, part| node.get(part))?;
                Some((path.join("."), node))
            });
            let Some((at, default)) = default.filter(|_| problems.len() < 64) else {
                return Err(ConfigError::Parse(Box::new(e)));
            };
            let source = e
                .metadata
                .as_ref()
                .map_or(String::new(), |m| match &m.source {
                    Some(source) => format!(" (in {} {source})", m.name),
                    None => format!(" (in {})", m.name),
                });
            problems.push(Problem {
                message: format!("{}{source}", e.kind),
                key,
            });
            figment = figment.merge(Serialized::default(&at, default.clone()));
        }
    }

    /// `problems` and the check's own, or the configuration if there are none.
    pub fn checked(self, mut problems: Vec<Problem>) -> Result<Config, ConfigError> {
        problems.extend(self.problems());
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// The JSON lines file of the event sink.
    pub fn events_file(&self) -> PathBuf {
        if self.events.file.as_os_str().is_empty() {
            self.embedded.data_dir.join("events.jsonl")
        } else {
            self.events.file.clone()
        }
    }

    /// Whether the sandbox payment provider is served.
    pub fn sandbox_enabled(&self) -> bool {
        self.payment_provider() == ProviderName::Sandbox
    }

    /// Who takes the payments (`payments.provider`, or what its absence means).
    pub fn payment_provider(&self) -> ProviderName {
        self.payments.provider.unwrap_or(
            if self.payments.sandbox.unwrap_or(self.ledger_is_embedded()) {
                ProviderName::Sandbox
            } else {
                ProviderName::Webhook
            },
        )
    }

    /// The ledger is the SQLite file of the data directory (no PostgreSQL configured).
    pub fn ledger_is_embedded(&self) -> bool {
        self.ledger.url.is_empty()
    }

    /// `http.idle_timeout_secs` as the server takes it: `None` for never.
    pub fn http_idle_timeout(&self) -> Option<Duration> {
        (!self.http.idle_timeout_secs.is_off()).then(|| self.http.idle_timeout_secs.duration())
    }

    pub fn queue_timeout(&self) -> Duration {
        self.queue.timeout_ms.duration()
    }
}

#[cfg(test)]
// figment's `Jail` takes closures returning figment's `Result`, whose error is large by design.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use figment::Jail;
    use proptest::prelude::*;

    /// A production base (PostgreSQL, every secret set), so no secrets file is written.
    fn production_base() -> Figment {
        let mut base = Config::default();
        base.ledger.url = "postgres://sluice@127.0.0.1/sluice".into();
        base.auth.admin_key = "admin-key-0123456789".into();
        base.auth.user_jwt_hs256_secret = Some("user-secret-0123456789".into());
        base.payments.webhook_secret = "whsec-0123456789abcdef".into();
        Figment::from(Serialized::defaults(base))
    }

    const KEYS: &[&str] = &[
        "http.listen",
        "http.body_limit_bytes",
        "http.drain_delay_secs",
        "queue.url",
        "queue.cluster",
        "queue.timeout_ms",
        "queue.line_refresh_ms",
        "ledger.max_connections",
        "workers.admission_tick_ms",
        "workers.reaper_cron",
        "events.batch",
        "limits.join_burst",
        "valve.backoff",
        "valve.tick_ms",
        "valve.signals.relay_lag.target",
    ];

    fn toml_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("TOML floats", |f| f.is_finite())
                .prop_map(|f| format!("{f:?}")),
            any::<bool>().prop_map(|b| b.to_string()),
            "[ -~]{0,20}".prop_map(|s| format!("{s:?}")),
        ]
    }

    proptest! {
        /// Whatever a configuration file holds, loading it answers a Config or an error; it
        /// never panics.
        #[test]
        fn any_file_loads_or_is_refused(text in "(?s).{0,300}") {
            let _ = Config::from_figment(production_base().merge(Toml::string(&text)));
        }

        /// A bad value of a known key is refused with that key named.
        #[test]
        fn a_refused_value_names_its_key(key in prop::sample::select(KEYS), value in toml_value()) {
            let (section, field) = key.split_once('.').unwrap();
            let text = match field.split_once('.') {
                Some((table, rest)) => format!("[{section}.{table}]\n{rest} = {value}\n"),
                None => format!("[{section}]\n{field} = {value}\n"),
            };
            if let Err(e) = Config::from_figment(production_base().merge(Toml::string(&text))) {
                let message = e.to_string();
                let last = key.rsplit('.').next().unwrap();
                prop_assert!(message.contains(last) || message.contains(section), "{} → {}", text, message);
            }
        }
    }

    /// Every `SLUICE__…` variable named in the repository's docs, configs and scripts.
    fn documented_variables() -> std::collections::BTreeSet<(String, String)> {
        fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if !name.starts_with('.') && name != "node_modules" && name != "target" {
                        walk(&path, files);
                    }
                } else {
                    files.push(path);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in [
            "config", "deploy", "docs", "k6", "scripts", "src", "examples", "openapi",
        ] {
            walk(&root.join(dir), &mut files);
        }
        for file in ["README.md", "docker-compose.yml", "Dockerfile"] {
            files.push(root.join(file));
        }
        let mut found = std::collections::BTreeSet::new();
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for (at, _) in text.match_indices("SLUICE__") {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let name = name.trim_end_matches('_').to_owned();
                // `SLUICE__SECTION__KEY` is how the docs write the pattern itself.
                if name.len() > "SLUICE__".len() && !name.ends_with("SECTION__KEY") {
                    let shown = file.strip_prefix(root).unwrap().display().to_string();
                    found.insert((name, shown));
                }
            }
        }
        found
    }

    /// Each documented variable names a key sluice has: loaded with that key's default value,
    /// the configuration is accepted (an unknown key is refused by name).
    #[test]
    fn every_variable_the_docs_name_is_a_key_sluice_loads() {
        let defaults = serde_json::to_value(Config::default()).unwrap();
        let documented = documented_variables();
        assert!(documented.len() > 20, "the scan finds the docs' variables");
        for (name, file) in documented {
            let path: Vec<String> = name["SLUICE__".len()..]
                .split("__")
                .map(str::to_lowercase)
                .collect();
            // A signal of any name has the fields of the built-in ones.
            let mut node = &defaults;
            for (i, part) in path.iter().enumerate() {
                let next = match node.get(part) {
                    Some(next) => next,
                    None if i >= 1 && path[i - 1] == "signals" => {
                        &defaults["valve"]["signals"]["relay_lag"]
                    }
                    None => panic!("{file} names {name}, which is no configuration key"),
                };
                node = next;
            }
            let value = match node {
                // A section named as a prefix (`SLUICE__VALVE__SIGNALS__…`): it exists.
                serde_json::Value::Object(_) => continue,
                serde_json::Value::String(s) if s.is_empty() => continue,
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => continue,
                other => other.to_string(),
            };
            // A signal that is not built in needs its other fields too.
            let signal = (path.len() == 4 && path[1] == "signals")
                .then(|| &path[2])
                .filter(|signal| defaults["valve"]["signals"].get(signal.as_str()).is_none());
            Jail::expect_with(|jail| {
                jail.clear_env();
                valid_env(jail);
                jail.set_env("SLUICE__VALVE__PROMETHEUS_URL", "http://127.0.0.1:9090");
                if let Some(signal) = signal {
                    let prefix = format!("SLUICE__VALVE__SIGNALS__{}", signal.to_uppercase());
                    jail.set_env(format!("{prefix}__QUERY"), "max(up)");
                    jail.set_env(format!("{prefix}__TARGET"), "1");
                    jail.set_env(format!("{prefix}__ENABLED"), "true");
                }
                jail.set_env(&name, &value);
                Config::load(None)
                    .map_err(|e| format!("{file} names {name}; with {value:?}: {e}"))?;
                Ok(())
            });
        }
    }

    fn valid_env(jail: &mut Jail) {
        jail.set_env("SLUICE__AUTH__ADMIN_KEY", "admin-key-0123456789");
        jail.set_env(
            "SLUICE__AUTH__USER_JWT_HS256_SECRET",
            "user-secret-0123456789",
        );
        jail.set_env("SLUICE__PAYMENTS__WEBHOOK_SECRET", "whsec-0123456789abcdef");
    }

    #[test]
    fn layers_apply_in_order_defaults_file_env() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.create_file(
                "sluice.toml",
                "[queue]\nkey_prefix = \"fromfile\"\ntimeout_ms = 99\n",
            )?;
            jail.set_env("SLUICE__QUEUE__TIMEOUT_MS", "77");
            let c = Config::load(Some(Path::new("sluice.toml"))).expect("valid");
            assert_eq!(c.queue.key_prefix, "fromfile");
            assert_eq!(c.queue.timeout_ms.0, 77);
            assert_eq!(c.http.body_limit_bytes, 64 * 1024);
            Ok(())
        });
    }

    #[test]
    fn cors_origins_are_origins_and_any_is_never_with_credentials() {
        let with = |origins: &[&str], credentials: bool| {
            let mut c = Config::default();
            c.ledger.url = "postgres://sluice@127.0.0.1/sluice".into();
            c.auth.admin_key = "admin-key-0123456789".into();
            c.auth.user_jwt_hs256_secret = Some("user-secret-0123456789".into());
            c.payments.webhook_secret = "whsec-0123456789abcdef".into();
            c.http.cors_allowed_origins = origins.iter().map(|o| o.to_string()).collect();
            c.http.cors_allow_credentials = credentials;
            c.validate().map_err(|e| e.to_string())
        };
        assert!(with(&[], false).is_ok());
        assert!(with(&["https://shop.example", "http://127.0.0.1:3000"], true).is_ok());
        assert!(with(&["http://[::1]:8080"], false).is_ok());
        assert!(with(&["*"], false).is_ok());
        for (origins, credentials) in [
            (&["*"][..], true),
            (&["*", "https://shop.example"], false),
            (&["https://shop.example/"], false),
            (&["https://shop.example/page"], false),
            (&["shop.example"], false),
            (&["ftp://shop.example"], false),
            (&["https://Shop.example"], false),
            (&["https://shop.example:"], false),
        ] {
            let err = with(origins, credentials).unwrap_err();
            assert!(
                err.contains("http.cors_allowed_origins"),
                "{origins:?}: {err}"
            );
        }
    }

    /// A list setting from the environment takes comma-separated values, as the docs show
    /// it, and the TOML array as well.
    #[test]
    fn a_list_from_the_environment_is_comma_separated_or_an_array() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            for (value, expected) in [
                ("http://shop.example", vec!["http://shop.example"]),
                (
                    "https://a.example, https://b.example:8443",
                    vec!["https://a.example", "https://b.example:8443"],
                ),
                (
                    r#"["https://a.example","https://b.example"]"#,
                    vec!["https://a.example", "https://b.example"],
                ),
                ("", vec![]),
            ] {
                jail.set_env("SLUICE__HTTP__CORS_ALLOWED_ORIGINS", value);
                let c = Config::load(None).unwrap_or_else(|e| panic!("{value}: {e}"));
                assert_eq!(c.http.cors_allowed_origins, expected, "{value}");
            }
            Ok(())
        });
    }

    #[test]
    fn a_drain_delay_is_part_of_the_shutdown_bound() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.set_env("SLUICE__HTTP__SHUTDOWN_TIMEOUT_SECS", "25");
            jail.set_env("SLUICE__HTTP__DRAIN_DELAY_SECS", "25");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("http.drain_delay_secs"), "{err}");
            jail.set_env("SLUICE__HTTP__DRAIN_DELAY_SECS", "5");
            assert_eq!(Config::load(None).unwrap().http.drain_delay_secs.0, 5);
            Ok(())
        });
    }

    #[test]
    fn a_printed_config_shows_no_secret() {
        let mut c = Config::default();
        c.auth.admin_key = "admin-key-0123456789".into();
        c.auth.user_jwt_hs256_secret = Some("user-secret-0123456789".into());
        c.payments.webhook_secret = "payments-secret-0123456789".into();
        c.notify.webhook_secret = "hook-secret-0123456789".into();
        let printed = format!("{c:?}");
        for secret in [
            "admin-key-0123456789",
            "user-secret-0123456789",
            "payments-secret-0123456789",
            "hook-secret-0123456789",
        ] {
            assert!(!printed.contains(secret), "{secret} printed");
        }
        assert!(printed.contains("[secret]"), "{printed}");
    }

    #[test]
    fn a_config_with_five_mistakes_names_all_five() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.create_file(
                "sluice.toml",
                "[queue]\ntimeout_ms = 0\n\n[http]\nbody_limit_bytes = \"lots\"\n\
                 cors_allowed_origins = [\"https://shop.example/path\"]\n",
            )?;
            jail.set_env("SLUICE__LEDGER__URL", "mysql://nope");
            jail.set_env("SLUICE__WORKERS__REAPER_CRON", "* * * * *");
            let err = Config::load(Some(Path::new("sluice.toml"))).unwrap_err();
            let ConfigError::Invalid(problems) = &err else {
                panic!("one error, not the list: {err}")
            };
            let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
            let text = err.to_string();
            for (key, variable) in [
                ("queue.timeout_ms", "SLUICE__QUEUE__TIMEOUT_MS"),
                ("http.body_limit_bytes", "SLUICE__HTTP__BODY_LIMIT_BYTES"),
                (
                    "http.cors_allowed_origins",
                    "SLUICE__HTTP__CORS_ALLOWED_ORIGINS",
                ),
                ("ledger.url", "SLUICE__LEDGER__URL"),
                ("workers.reaper_cron", "SLUICE__WORKERS__REAPER_CRON"),
            ] {
                assert!(keys.contains(&key), "{key} missing from {keys:?}");
                assert!(text.contains(&format!("`{key}` ({variable})")), "{text}");
            }
            assert_eq!(problems.len(), 5, "{text}");
            assert!(
                text.contains("\"lots\""),
                "the wrong value is quoted: {text}"
            );
            Ok(())
        });
    }

    /// Typed settings are checked as they are read: a URL that is not one, a zero where none
    /// is allowed, a duration that is not a number, in a list's entry too, are each reported
    /// by key, all at once.
    #[test]
    fn typed_settings_are_reported_together_as_they_are_read() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.create_file(
                "sluice.toml",
                "[queue]\ntimeout_ms = \"150ms\"\n\n[ledger]\nmax_connections = 0\n\n\
                 [notify]\nwebhook_url = \"hooks.shop.example\"\n\n\
                 [[auth.user_issuers]]\nissuer = \"accounts.kakao\"\nuser_prefix = \"kakao:\"\n",
            )?;
            jail.set_env("SLUICE__TELEMETRY__MAX_QUEUED_SPANS", "0");
            jail.set_env("SLUICE__GATE__REFRESH_MS", "-5");
            let err = Config::load(Some(Path::new("sluice.toml"))).unwrap_err();
            let ConfigError::Invalid(problems) = &err else {
                panic!("one error, not the list: {err}")
            };
            let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
            for key in [
                "queue.timeout_ms",
                "ledger.max_connections",
                "notify.webhook_url",
                "auth.user_issuers.0.issuer",
                "telemetry.max_queued_spans",
                "gate.refresh_ms",
            ] {
                assert!(keys.contains(&key), "{key} missing from {keys:?}: {err}");
            }
            assert_eq!(problems.len(), 6, "{err}");
            assert!(err.to_string().contains("not an http(s) URL"), "{err}");
            Ok(())
        });
    }

    /// A URL is read as a URL, not by its prefix: a scheme with no host, or a host that is
    /// not one, is refused by name at start, not at the first call to it.
    #[test]
    fn urls_are_parsed_not_matched_by_their_prefix() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.set_env("SLUICE__VALVE__PROMETHEUS_URL", "http://");
            jail.set_env("SLUICE__AUTH__USER_JWKS_URL", "https://idp example/jwks");
            jail.set_env("SLUICE__HTTP__PUBLIC_URL", "https://");
            let err = Config::load(None).unwrap_err();
            let ConfigError::Invalid(problems) = &err else {
                panic!("one error, not the list: {err}")
            };
            let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
            for key in [
                "valve.prometheus_url",
                "auth.user_jwks_url",
                "http.public_url",
            ] {
                assert!(keys.contains(&key), "{key} missing from {keys:?}");
            }
            Ok(())
        });
    }

    #[test]
    fn errors_name_the_bad_key() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.set_env("SLUICE__HTTP__BODY_LIMIT_BYTES", "lots");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(
                err.to_lowercase().contains("http.body_limit_bytes"),
                "{err}"
            );
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            // Several nodes are a cluster: said so, or refused.
            jail.set_env(
                "SLUICE__QUEUE__URL",
                "redis://127.0.0.1:1,redis://127.0.0.1:2",
            );
            let err = Config::load(None).unwrap_err().to_string();
            assert!(
                err.contains("queue.url") && err.contains("cluster"),
                "{err}"
            );
            jail.set_env("SLUICE__QUEUE__CLUSTER", "true");
            let config = Config::load(None).unwrap();
            assert!(config.queue.cluster);
            jail.set_env(
                "SLUICE__QUEUE__URL",
                "redis://127.0.0.1:1,http://127.0.0.1:2",
            );
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("queue.url"), "{err}");
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.set_env("SLUICE__WORKERS__REAPER_CRON", "* * * * *");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("workers.reaper_cron"), "{err}");
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            // Production (PostgreSQL) needs every secret configured.
            jail.set_env("SLUICE__LEDGER__URL", "postgres://x@127.0.0.1/y");
            jail.set_env("SLUICE__PAYMENTS__WEBHOOK_SECRET", "whsec-0123456789abcdef");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("auth.admin_key"), "{err}");
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            jail.set_env("SLUICE__VALVE__SIGNALS__HTTP_5XX_RATIO__TARGET", "-1");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(
                err.contains("valve.signals") && err.contains("http_5xx_ratio"),
                "{err}"
            );
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            valid_env(jail);
            // A custom PromQL signal cannot be computed from the process's own metrics.
            jail.set_env("SLUICE__VALVE__SIGNALS__CPU__QUERY", "max(cpu)");
            jail.set_env("SLUICE__VALVE__SIGNALS__CPU__TARGET", "0.8");
            jail.set_env("SLUICE__VALVE__SIGNALS__CPU__ENABLED", "true");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(
                err.contains("`cpu`") && err.contains("prometheus_url"),
                "{err}"
            );
            jail.set_env("SLUICE__VALVE__PROMETHEUS_URL", "http://127.0.0.1:9090");
            let c = Config::load(None).expect("valid with Prometheus");
            assert_eq!(c.valve.signals["cpu"].target, 0.8);
            assert_eq!(c.valve.signals.len(), 7, "built-ins kept beside it");
            Ok(())
        });
        Jail::expect_with(|jail| {
            jail.clear_env();
            jail.set_env("SLUICE__LEDGER__URL", "mysql://nope");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("ledger.url"), "{err}");
            Ok(())
        });
    }
}
