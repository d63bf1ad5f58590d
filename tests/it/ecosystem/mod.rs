//! The tools sluice's users bring, run for real against it: the committed OpenAPI contract and
//! a client generated from it, the waiting-room page in headless Chromium, promtool on the
//! metrics, alert rules and dashboards, k6, and the production docker-compose file.

mod browser;
mod compose;
mod contract;
mod k6;
mod prometheus;
mod spec;
mod typescript;
