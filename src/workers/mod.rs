//! Background work: the admission loop (the valve) and the expiry reapers. Both are safe to run
//! in every replica: admission is leased per sale, reapers claim rows with SKIP LOCKED.

pub mod admission;
pub mod reapers;

use tokio::task::JoinHandle;

use crate::service::App;

/// Handles of the running workers; dropping them does not stop them, [`Workers::stop`] does.
pub struct Workers {
    admission: JoinHandle<()>,
    reapers: tokio_cron_scheduler::JobScheduler,
}

impl Workers {
    pub async fn start(app: &App) -> anyhow::Result<Workers> {
        let admission = tokio::spawn(admission::run(app.clone()));
        let reapers = reapers::start(app.clone()).await?;
        Ok(Workers { admission, reapers })
    }

    pub async fn stop(mut self) {
        self.admission.abort();
        let _ = self.reapers.shutdown().await;
    }
}
