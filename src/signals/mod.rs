//! Admission signals: the back end's pressure, read every controller tick and handed to the
//! valve ([`crate::domain::valve`]). Two sources behind one trait, picked by configuration:
//! the Prometheus HTTP API (PromQL, production: every replica's metrics together) and the
//! process's own metrics (embedded: no Prometheus needed). A signal that cannot be read is
//! `None` — the valve then holds its rate — and is flagged in `sluice_valve_signal_stale`.
//!
//! The reader runs in a task of its own and publishes each round through a `watch` channel,
//! so a slow or dead Prometheus never delays an admission tick. The built-in signals are
//! [`crate::domain::signal_catalogue`] (configuration names them too).

pub mod own_metrics;
pub mod prometheus;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::config::Config;
use crate::domain::valve::Reading;

/// One configured signal: a name, what to ask, and the level it should stay under.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub name: String,
    /// PromQL (the Prometheus source); the embedded source uses the built-in computation.
    pub query: String,
    pub target: f64,
}

#[async_trait]
pub trait SignalSource: Send + Sync + 'static {
    /// One reading per signal, in order; `value: None` when it could not be read.
    async fn read(&self) -> Vec<Reading>;
}

/// The enabled signals of the configuration, in name order.
pub fn configured(config: &Config) -> Vec<Signal> {
    config
        .valve
        .signals
        .iter()
        .filter(|(_, s)| s.enabled)
        .map(|(name, s)| Signal {
            name: name.clone(),
            query: s.query.clone(),
            target: s.target,
        })
        .collect()
}

/// The source named by the configuration: Prometheus when `valve.prometheus_url` is set.
pub fn from_config(config: &Config) -> anyhow::Result<Arc<dyn SignalSource>> {
    let signals = configured(config);
    let valve = &config.valve;
    match &valve.prometheus_url {
        None => Ok(Arc::new(own_metrics::OwnMetrics::new(
            crate::telemetry::metrics_handle(),
            signals,
        ))),
        Some(url) => Ok(Arc::new(prometheus::PrometheusSignals::new(
            url,
            valve.query_timeout_ms.duration(),
            signals,
        )?)),
    }
}

/// One round of readings (the `watch` channel tells the admitter which it has not applied).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    pub readings: Vec<Reading>,
}

/// Reads `source` every `every`, exports each signal as metrics, logs when one goes stale or
/// comes back, and publishes the round.
pub fn spawn_reader(
    source: Arc<dyn SignalSource>,
    every: Duration,
) -> (watch::Receiver<Round>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Round::default());
    let task = tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stale: HashMap<String, bool> = HashMap::new();
        loop {
            interval.tick().await;
            let readings = source.read().await;
            for r in &readings {
                export(r);
                let now_stale = r.value.is_none();
                let was_stale = stale.insert(r.name.clone(), now_stale).unwrap_or(false);
                if now_stale && !was_stale {
                    tracing::warn!(signal = %r.name, "admission signal unreadable: holding the rate");
                } else if was_stale && !now_stale {
                    tracing::info!(signal = %r.name, "admission signal readable again");
                }
            }
            if tx.send(Round { readings }).is_err() {
                return; // nobody listens any more
            }
        }
    });
    (rx, task)
}

fn export(r: &Reading) {
    let name = r.name.clone();
    metrics::gauge!("sluice_valve_signal_target", "signal" => name.clone()).set(r.target);
    metrics::gauge!("sluice_valve_signal_stale", "signal" => name.clone())
        .set(if r.value.is_some() { 0.0 } else { 1.0 });
    if let Some(v) = r.value {
        metrics::gauge!("sluice_valve_signal_value", "signal" => name).set(v);
    }
}
