//! The one path every decision of the machine takes once it is made: each step the ledger
//! wrote is counted (`sluice_transitions_total`), the queue store is brought in line
//! (`service/sync.rs`) and the attempt's status streams on this replica are told. A waiting
//! attempt's end, kept in the queue store only, is counted through [`waiting_ended`].

use super::{sync_queue_all, App};
use crate::domain::{decide, AttemptEvent, AttemptState, Decision};
use crate::ledger::{Applied, LedgerError};

/// After the ledger committed one event's transitions.
pub async fn settle(app: &App, applied: &Applied) {
    settle_all(app, std::slice::from_ref(applied)).await
}

/// [`settle`] for several attempts (a reaper's batch).
pub async fn settle_all(app: &App, applied: &[Applied]) {
    for step in applied.iter().flat_map(Applied::steps) {
        count(&step.decision, 1);
    }
    sync_queue_all(app, applied).await;
}

/// A refusal the ledger made after it expired the attempt by a deadline the attempt had
/// passed: the expiry is settled like every transition (counted, the queue store in line), and
/// the refusal stays.
pub async fn settle_refusal(app: &App, error: LedgerError) -> LedgerError {
    match error {
        LedgerError::RejectedAfterExpiry { rejected, expired } => {
            settle(app, &expired).await;
            LedgerError::Rejected(rejected)
        }
        other => other,
    }
}

/// `n` waiting attempts ended by `event` (leave, abandon, sale closed) in the queue store,
/// where they live: the machine decides what they became, and the transitions are counted.
pub fn waiting_ended(event: AttemptEvent, n: u64) -> AttemptState {
    match decide(AttemptState::Queued, event) {
        Ok(decision) => {
            count(&decision, n);
            decision.to
        }
        // Only events that apply to a waiting attempt reach here.
        Err(rejected) => {
            tracing::error!(%rejected, "a waiting attempt was ended by an event that does not apply");
            AttemptState::Queued
        }
    }
}

/// `n` attempts the ledger recorded as admitted.
pub fn admitted(n: u64) {
    if let Ok(decision) = decide(AttemptState::Queued, AttemptEvent::Admit) {
        count(&decision, n);
    }
}

fn count(decision: &Decision, n: u64) {
    if decision.changed {
        crate::telemetry::count_transitions(
            &decision.from,
            &decision.to,
            decision.event.as_str(),
            n,
        );
    }
}
