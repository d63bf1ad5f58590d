//! Samples each open or paused sale's figures into the ledger once an interval
//! ([`crate::service::figures`]), and drops samples older than a day. Every replica runs it;
//! the first sample of an interval stands.

use std::time::Duration;

use crate::service::App;

pub async fn run(app: App, every: Duration) {
    let mut drain = app.drain.subscribe();
    let interval = chrono::Duration::from_std(every).unwrap_or(chrono::Duration::seconds(10));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = crate::service::drain::started(&mut drain) => return,
        }
        if let Err(e) = crate::service::figures::sample(&app, chrono::Utc::now(), interval).await {
            tracing::debug!(error = %e, "figures not sampled this time");
        }
    }
}
