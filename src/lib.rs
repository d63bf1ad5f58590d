//! sluice: a waiting room and first-come-first-served reservations for flash sales and ticket
//! openings.
//!
//! An *attempt* is one user's way through one sale: QUEUED → ADMITTED → HOLD →
//! PAYMENT_PENDING → CONFIRMED, or EXPIRED (with a reason) from any step, the stock given back
//! exactly once. The admission loop is the valve: it lets people in at the rate the back end
//! can take, so the ledger only ever sees admitted traffic.
//!
//! # Layout
//!
//! - [`domain`]: sales, attempts and the one machine that decides every transition of an
//!   attempt, QUEUED ones included ([`domain::decide`]), what a sale holds
//!   ([`domain::holding`]: the words the queue store and the ledger share), the built-in
//!   pressure signals ([`domain::signal_catalogue`]) and the domain events. Pure: no I/O.
//! - [`queue`]: the queue store, the hot path — queue order, positions, the active set, stock
//!   counters. A trait; [`queue::RedisQueue`] runs one Lua script (`lua/`) per operation, on
//!   one Redis or a Redis Cluster (all of a sale's keys in one slot); joins and status lookups
//!   of one sale that arrive together go in one call.
//! - [`gather`]: what arrives together goes together — one sale's calls that arrive while
//!   earlier ones are out, gathered into one batch (Redis calls, ledger transactions).
//! - [`ledger`]: the durable truth from ADMITTED on — attempts, holds (a quantity sale's free
//!   units one counter, a seat one row), payments, audit trail, idempotency keys, outbox, the named admin keys and the
//!   admin audit log. A trait, implemented once in SQL (`ledger/sql`) and compiled for each
//!   dialect: [`ledger::PgLedger`] is PostgreSQL (`migrations/postgres`, behind the breaker),
//!   [`ledger::SqliteLedger`] the embedded SQLite (`migrations/sqlite`, the same column names).
//!   A dialect gives only what really differs (`ledger/postgres.rs`, `ledger/sqlite.rs`); the
//!   transitions and flows (admissions, payments, reapers, a sale's creation and status) are
//!   written once over the statements of `ledger/transition.rs`'s `LedgerTx`.
//! - [`service`]: the use cases, one file each (join, status and its streams, leave, hold,
//!   checkout, payment, sales, support's reads, the operators' keys and audit log, the
//!   sandbox payment provider). They call the queue store first
//!   where it is the gate and the ledger where it is the truth; every decision then takes one
//!   path ([`service::transition`]: counted, the queue store brought in line, the attempt's
//!   streams told), and a user's event for an attempt only the queue store knows is decided
//!   on the state it has there ([`service::attempt_event`]).
//!   [`service::line`] is each replica's view of the waiting lines, refreshed by one store
//!   call per sale and interval: a waiting user's status (with its queue ticket) and status
//!   streams are answered from it. [`service::seat_map`] is the same for a sale's seats
//!   (venue layouts, [`domain::venue`]): one call per sale and interval carries the seats
//!   changed since (the store's seat log); best available ([`domain::best_seats`]) picks and
//!   holds seats side by side in one store call.
//! - [`api`]: HTTP (poem-openapi), the waiting-room page at `/` and the operator console at
//!   `/admin` (`api/page/`, `api/console/`). One module per group of operations, its request and
//!   response types beside its handlers (`api/sales/types.rs`, `api/attempts/types.rs`);
//!   thin handlers; errors are problem+json.
//! - [`workers`]: the admission loop (one admitter per sale across replicas, by a fenced lease
//!   in the queue store; the rate set by hand or by the adaptive controller), the expiry
//!   reapers (cron) and the outbox relay (one at a time, by a lease in the ledger).
//! - [`signals`]: the back end's pressure for the adaptive valve ([`domain::valve`]) — PromQL
//!   through the Prometheus HTTP API, or the process's own metrics.
//! - [`notify`]: "it's your turn" — the admitting replica's Web Push message (RFC 8291 and
//!   8292 on `ring`) and the shop's signed `attempt.admitted` webhook, once per attempt and
//!   bounded in rate.
//! - [`events`]: where relayed events go — Kafka, or a JSON lines file — and the reference
//!   consumer.
//! - [`gate`] and [`service::gate`]: a waiting room in front of a site that cannot call the API,
//!   through the proxy it runs — the gates' settings and challenge check, and each replica's
//!   gates, the forward-auth check (a session cookie's HMAC, no store call), visitors without
//!   an account, their sessions and renewal ([`domain::gate`]: what a gate guards and lets
//!   pass).
//! - [`auth`], [`payments`]: user tokens, admission tokens (Ed25519 + JWKS), queue tickets
//!   (HMAC: a waiting attempt's place in its line), admin keys (the configured one, and named
//!   keys with a role, [`domain::Role`], kept as hashes); the payment providers behind one
//!   seam, each in its module (`payments::providers` lists them), and webhook signatures.
//! - [`config`], [`secrets`], [`telemetry`], [`server`]: layered configuration (a leaf: it
//!   parses and checks the whole of it, reporting every bad setting at once; its secrets are
//!   [`config::Secret`]s, which never print), the embedded default's generated secrets (and [`secrets::load`],
//!   the configuration start-up runs with), logs and metrics, start-up and the HTTP server (a
//!   task per connection, HTTP/1.1 or HTTP/2 told by a peek).
//!
//! # Where state lives
//!
//! Waiting users exist only in the queue store: join and the status of a waiting user never
//! touch the database, and a waiting user's status is answered from the replica's view of the
//! line (refreshed from the queue store), not by a lookup of its own. From admission on, the
//! ledger decides, and taking stock there is conditional (a counter that never goes below
//! zero, a seat row with at most one holder), so a wiped or stale queue store can never
//! oversell.

pub mod api;
pub mod auth;
pub mod config;
pub mod domain;
pub mod events;
pub mod gate;
pub mod gather;
pub mod ledger;
pub mod notify;
pub mod payments;
pub mod queue;
pub mod secrets;
pub mod server;
pub mod service;
pub mod setting;
pub mod signals;
pub mod telemetry;
pub mod workers;
