//! The queue store's side of a committed transition: the change the ledger's queue-sync log
//! records in the transition's own transaction (see `migrations/*/…_queue_sync.sql`) and the
//! store applies, once, by its id ([`super::QueueStore::apply_sync`]).

use crate::domain::{AttemptEvent, AttemptId, AttemptState, Decision};

/// What a committed transition asks of the queue store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncChange {
    /// EXPIRED: the hold's units go back (once: the store drops the hold record it restores).
    Restore,
    /// CONFIRMED: the slot is freed, the units stay sold.
    Finish,
    /// PAYMENT_PENDING: the slot's deadline moves to the payment's.
    Extend,
}

impl SyncChange {
    /// The change entering `to` asks for.
    pub fn entering(to: AttemptState) -> Option<SyncChange> {
        match to {
            AttemptState::Expired { .. } => Some(SyncChange::Restore),
            AttemptState::Confirmed => Some(SyncChange::Finish),
            AttemptState::PaymentPending => Some(SyncChange::Extend),
            AttemptState::Queued | AttemptState::Admitted | AttemptState::Hold => None,
        }
    }

    /// The change a committed decision asks of the store: none for an instant sale's claim,
    /// which the store made before the ledger recorded it (as it takes a hold's units first).
    pub fn of(decision: &Decision) -> Option<SyncChange> {
        match decision.event {
            AttemptEvent::Claim => None,
            _ => Self::entering(decision.to),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SyncChange::Restore => "restore",
            SyncChange::Finish => "finish",
            SyncChange::Extend => "extend",
        }
    }

    pub fn parse(s: &str) -> Option<SyncChange> {
        [SyncChange::Restore, SyncChange::Finish, SyncChange::Extend]
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// One row of the queue-sync log: a change, its attempt, and the id the store records once
/// it applied it (so a retry or a replay after a failover applies it once).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingSync {
    pub id: i64,
    pub attempt: AttemptId,
    pub change: SyncChange,
}
