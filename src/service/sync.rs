//! After the ledger committed a transition, the queue store follows: held stock comes back (at
//! most once: the restore script deletes the hold record it restores), the slot is freed, or
//! the active deadline moves. The transition wrote that change to the ledger's queue-sync log
//! in its own transaction; the request applies it at once and marks it applied. When the queue
//! store cannot be reached, the failure is logged and counted, never returned to the client
//! (the ledger holds the truth), and the queue-sync worker (`workers::queue_sync`) applies the
//! change once the store answers again: units given back while Redis was away are sellable
//! again within a few seconds of its return. The store records each change's id as it
//! applies it, so the request and the worker (or a replay after a failover) apply it once.

use super::App;
use crate::ledger::Applied;
use crate::telemetry::warn_throttled;

/// Brings the queue store in line with committed transitions (the fast path).
/// For several attempts (a reaper's batch), marking the changes applied in one ledger write.
pub(super) async fn sync_queue_all(app: &App, applied: &[Applied]) {
    let mut synced = Vec::new();
    let steps = applied.iter().flat_map(Applied::steps);
    for sync in steps.filter_map(|step| step.sync.as_ref()) {
        match app.queue.apply_sync(sync).await {
            Ok(_) => synced.push(sync.id),
            Err(e) => {
                metrics::counter!("sluice_queue_sync_errors_total").increment(1);
                // Every transition's sync fails alike while the store is away.
                warn_throttled!(attempt = %sync.attempt, change = sync.change.as_str(), error = %e, "queue store not updated after a ledger transition: the queue-sync worker retries it");
            }
        }
    }
    // The attempts' status streams on this replica say so at once.
    for transition in applied {
        app.lines.nudges.nudge(transition.record.id);
    }
    if synced.is_empty() {
        return;
    }
    if let Err(e) = app.ledger.mark_synced(&synced).await {
        // Applied but not marked: the worker applies them again, which changes nothing.
        tracing::debug!(error = %e, "queue changes applied, not marked");
    }
}
