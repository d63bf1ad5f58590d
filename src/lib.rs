//! sluice: a waiting room and first-come-first-served reservations for flash sales.
pub mod api;
pub mod auth;
pub mod config;
pub mod domain;
pub mod ledger;
pub mod payments;
pub mod queue;
pub mod server;
pub mod service;
pub mod telemetry;
pub mod workers;
