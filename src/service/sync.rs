//! After the ledger committed a transition, the queue store follows: the slot is freed, held
//! stock comes back (at most once: the restore script deletes the hold record it restores), or
//! the active deadline moves. A failure here is logged and counted, never returned to the
//! client: the ledger already holds the truth, and a forgotten slot is dropped by admit_batch
//! once well past its deadline.

use crate::domain::AttemptState;
use crate::ledger::Applied;
use crate::queue::QueueStore;

pub async fn sync_queue(queue: &dyn QueueStore, applied: &Applied) {
    let decision = &applied.decision;
    if !decision.changed {
        return;
    }
    let id = applied.record.id;
    let result = match decision.to {
        AttemptState::Expired { .. } => queue.restore(id, None).await.map(|_| ()),
        AttemptState::Confirmed { .. } => queue.finish(id).await,
        AttemptState::PaymentPending { .. } => queue.extend(id).await,
        AttemptState::Queued { .. } | AttemptState::Admitted { .. } | AttemptState::Hold { .. } => {
            Ok(())
        }
    };
    if let Err(e) = result {
        metrics::counter!("sluice_queue_sync_errors_total").increment(1);
        tracing::error!(attempt = %id, to = %decision.to, error = %e, "queue store not updated after a ledger transition");
    }
}
