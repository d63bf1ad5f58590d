//! Background work: the admission loop (the valve) with its signal reader, the expiry reapers,
//! the outbox relay with its backlog gauges, the queue-sync worker, the drift checker, the
//! sampler of sales' figures and the keeper of presale lists. All are safe to run in every
//! replica: admission is leased per sale, reapers claim rows with SKIP LOCKED, the relay is
//! leased, queue-sync changes apply once, a drift repair is a compare-and-set, and each
//! replica keeps copies of its own.

pub mod admission;
pub mod controller;
pub mod drift;
pub mod figures;
pub mod payments;
pub mod presale_lists;
pub mod queue_sync;
pub mod reapers;
pub mod relay;
pub mod turns;

use tokio::task::JoinHandle;

use crate::service::App;

/// Handles of the running workers; dropping them does not stop them, [`Workers::stop`] does.
pub struct Workers {
    /// The loops that stop by themselves at a clean point once the process drains: the
    /// admission loop (its leases given up) and the relay (its batch marked).
    draining: Vec<JoinHandle<()>>,
    /// The loops that hold nothing worth finishing (signal reader, backlog gauges): aborted.
    tasks: Vec<JoinHandle<()>>,
    reapers: tokio_cron_scheduler::JobScheduler,
}

impl Workers {
    pub async fn start(app: &App) -> anyhow::Result<Workers> {
        let source = crate::signals::from_config(&app.config)?;
        let every = app.config.valve.tick_ms.duration();
        let (rounds, signals) = crate::signals::spawn_reader(source, every);
        let admission = tokio::spawn(admission::run(app.clone(), rounds));
        let sink = crate::events::from_config(&app.config).await?;
        let relay = tokio::spawn(relay::run(app.clone(), sink));
        let backlog = tokio::spawn(relay::watch_backlog(app.clone()));
        let sync_every = app.config.workers.queue_sync_ms.duration();
        let queue_sync = tokio::spawn(queue_sync::run(app.clone(), sync_every));
        let mut tasks = vec![signals, backlog, queue_sync];
        if !app.config.workers.drift_check_ms.is_off() {
            let every = app.config.workers.drift_check_ms.duration();
            tasks.push(tokio::spawn(drift::run(app.clone(), every)));
        }
        if !app.config.workers.figures_ms.is_off() {
            let every = app.config.workers.figures_ms.duration();
            tasks.push(tokio::spawn(figures::run(app.clone(), every)));
        }
        tasks.push(tokio::spawn(payments::run(app.clone())));
        tasks.push(tokio::spawn(turns::run(app.clone())));
        tasks.push(tokio::spawn(presale_lists::run(app.clone())));
        tasks.push(tokio::spawn(crate::service::gate::run(app.clone())));
        let reapers = reapers::start(app.clone()).await?;
        Ok(Workers {
            draining: vec![admission, relay],
            tasks,
            reapers,
        })
    }

    /// Stops the workers once the process drains (`app.drain` started): waits up to `bound`
    /// for the admission loop and the relay to reach their clean stop, then aborts the rest.
    pub async fn stop(mut self, bound: std::time::Duration) {
        let _ = self.reapers.shutdown().await;
        for task in &self.tasks {
            task.abort();
        }
        let deadline = tokio::time::Instant::now() + bound;
        for task in self.draining {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                tracing::warn!("a worker did not stop within the shutdown bound: cut off");
                abort.abort();
            }
        }
    }
}
