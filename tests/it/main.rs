//! One integration test binary: every test starts a real sluice against real Redis and
//! PostgreSQL (started by `scripts/services`), with its own key prefix and database.

mod helpers;

mod adaptive;
mod admin;
mod catalogue;
mod chaos;
mod cli;
mod connections;
mod contention;
mod cors;
mod double_taps;
mod drift;
mod ecosystem;
mod errors;
mod events;
mod figures;
mod generated;
mod kafka;
mod layout;
mod ledger;
mod lifecycle;
mod line;
mod model;
mod notify;
mod oidc;
mod operators;
mod phases;
mod portone;
mod prices;
mod queue_store;
mod reapers;
mod rebuild;
mod redis_cli;
mod redis_outage;
mod refunds;
mod reliability;
mod sandbox;
mod scale_out;
mod seat_map;
mod stock;
mod stripe;
mod support;
mod toss;
mod tour;
mod webhooks;
