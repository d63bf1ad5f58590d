//! Background work: the admission loop (the valve) with its signal reader, the expiry reapers,
//! and the outbox relay with its backlog gauges. All are safe to run in every replica:
//! admission is leased per sale, reapers claim rows with SKIP LOCKED, the relay is leased.

pub mod admission;
pub mod controller;
pub mod reapers;
pub mod relay;

use tokio::task::JoinHandle;

use crate::service::App;

/// Handles of the running workers; dropping them does not stop them, [`Workers::stop`] does.
pub struct Workers {
    /// The loops, aborted together on stop.
    tasks: Vec<JoinHandle<()>>,
    reapers: tokio_cron_scheduler::JobScheduler,
}

impl Workers {
    pub async fn start(app: &App) -> anyhow::Result<Workers> {
        let source = crate::signals::from_config(&app.config)?;
        let every = std::time::Duration::from_millis(app.config.valve.tick_ms);
        let (rounds, signals) = crate::signals::spawn_reader(source, every);
        let admission = tokio::spawn(admission::run(app.clone(), rounds));
        let sink = crate::events::from_config(&app.config).await?;
        let relay = tokio::spawn(relay::run(app.clone(), sink));
        let backlog = tokio::spawn(relay::watch_backlog(app.clone()));
        let reapers = reapers::start(app.clone()).await?;
        Ok(Workers {
            tasks: vec![signals, admission, relay, backlog],
            reapers,
        })
    }

    pub async fn stop(mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = self.reapers.shutdown().await;
    }
}
