//! The queue-sync worker: applies to the queue store the changes committed transitions wrote to
//! the ledger's queue-sync log that no request was seen to apply (the store was away, or the
//! process died between commit and sync), oldest first, and marks them applied. Every change is
//! idempotent, so replicas need no lease: two that apply the same row apply it once. While the
//! store is away it waits and tries again, doubling the wait up to a few seconds. The backlog
//! and its oldest age are gauges (`sluice_queue_sync_pending`,
//! `sluice_queue_sync_oldest_age_seconds`; alert `SluiceQueueSyncBehind`).

use std::time::Duration;

use crate::service::App;

/// A row younger than this is left to the request that wrote it (its fast path).
const GRACE_MS: u64 = 1000;
/// Rows applied per round.
const BATCH: u32 = 500;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub async fn run(app: App, every: Duration) {
    let mut drain = app.drain.subscribe();
    let mut wait = every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = crate::service::drain::started(&mut drain) => return,
        }
        wait = match round(&app).await {
            Ok(()) => every,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "queue sync: the queue store is not answering");
                (wait * 2).min(MAX_BACKOFF)
            }
        };
    }
}

/// Applies the rows due now; stops at the first the store cannot take (it is away: the rest
/// would fail alike).
async fn round(app: &App) -> anyhow::Result<()> {
    if let Ok((pending, oldest)) = app.ledger.sync_backlog().await {
        metrics::gauge!("sluice_queue_sync_pending").set(pending as f64);
        metrics::gauge!("sluice_queue_sync_oldest_age_seconds").set(oldest);
    }
    let due = app.ledger.pending_syncs(GRACE_MS, BATCH).await?;
    let mut applied = Vec::with_capacity(due.len());
    let mut failed = None;
    for sync in &due {
        match crate::service::apply_sync(app.queue.as_ref(), sync.attempt, sync.change).await {
            Ok(()) => applied.push(sync.id),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if !applied.is_empty() {
        metrics::counter!("sluice_queue_sync_applied_total").increment(applied.len() as u64);
        tracing::info!(
            changes = applied.len(),
            "queue sync: changes the queue store missed are applied"
        );
        app.ledger.mark_synced(&applied).await?;
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
