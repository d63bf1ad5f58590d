//! Background work: the admission loop (the valve), the expiry reapers and the outbox relay. Both are safe to run
//! in every replica: admission is leased per sale, reapers claim rows with SKIP LOCKED.

pub mod admission;
pub mod reapers;
pub mod relay;

use tokio::task::JoinHandle;

use crate::service::App;

/// Handles of the running workers; dropping them does not stop them, [`Workers::stop`] does.
pub struct Workers {
    admission: JoinHandle<()>,
    relay: JoinHandle<()>,
    reapers: tokio_cron_scheduler::JobScheduler,
}

impl Workers {
    pub async fn start(app: &App) -> anyhow::Result<Workers> {
        let admission = tokio::spawn(admission::run(app.clone()));
        let sink = crate::events::from_config(&app.config).await?;
        let relay = tokio::spawn(relay::run(app.clone(), sink));
        let reapers = reapers::start(app.clone()).await?;
        Ok(Workers {
            admission,
            relay,
            reapers,
        })
    }

    pub async fn stop(mut self) {
        self.admission.abort();
        self.relay.abort();
        let _ = self.reapers.shutdown().await;
    }
}
