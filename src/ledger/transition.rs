//! How an attempt changes, once for every database: the state machine decides, then the
//! effects, the new state, the audit row and the outbox event are written through
//! [`LedgerTx`] — one database's statements — inside the caller's transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use uuid::Uuid;

use super::{
    AdminKeyRow, AdmissionPlan, Applied, AttemptRecord, LedgerError, LedgerResult, PendingSync,
    SaleRecord, Step, SyncChange,
};
use crate::domain::events::EventType;
use crate::domain::{
    decide, AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent, Effect, Refunding, Sale,
    SaleId, SaleStatus, UserId,
};
use crate::domain::{AdminAction, Admission, ProofOfWork, StockKind, Take};
use crate::queue::Admitted;

/// The statements the shared transitions and flows need, on an open transaction of one
/// database: each dialect gives these, and the logic over them is written once. Those of one
/// table are a trait of their own, implemented in the table's module of the SQL ledger
/// (`ledger/sql/attempts.rs`, `stock.rs`, `sales.rs`, `operators.rs`); the rest are in
/// `ledger/sql/tx.rs`.
#[async_trait]
pub(crate) trait LedgerTx: AttemptRows + StockRows + SaleRows + OperatorRows + Send {
    /// Whether `deadline` has passed by the database's clock.
    async fn is_past(&mut self, deadline: DateTime<Utc>) -> LedgerResult<bool>;
    async fn insert_event(&mut self, event: &DomainEvent) -> LedgerResult<()>;
    /// Writes the queue store's side of the transition (a queue-sync row); returns its id.
    async fn record_sync(&mut self, id: AttemptId, change: SyncChange) -> LedgerResult<i64>;

    /// The database's clock.
    async fn now(&mut self) -> LedgerResult<DateTime<Utc>>;
    /// For the rest of the transaction, rows are found by index, never by reading a table
    /// whole: a batch's statements all go by key, and a planner whose statistics predate the
    /// rows a drop wrote in seconds took the tables for small.
    async fn by_index(&mut self) -> LedgerResult<()>;
    /// Marks the transaction's state so far, for [`LedgerTx::back_to_mark`].
    async fn mark(&mut self) -> LedgerResult<()>;
    /// Undoes everything since the last [`LedgerTx::mark`], which stays set.
    async fn back_to_mark(&mut self) -> LedgerResult<()>;
    /// The hold rows of attempts that took their units or seats.
    async fn insert_holds(
        &mut self,
        sale: SaleId,
        holds: &[(AttemptId, &Take)],
    ) -> LedgerResult<()>;
    /// Queue-sync rows of many transitions; their ids, in order.
    async fn record_syncs(&mut self, changes: &[(AttemptId, SyncChange)])
        -> LedgerResult<Vec<i64>>;
    async fn insert_events(&mut self, events: &[DomainEvent]) -> LedgerResult<()>;
    /// The CONFIRMED attempt of each of `users` in the sale that has one, `(user, attempt)`.
    async fn confirmed_of(
        &mut self,
        sale: SaleId,
        users: &[String],
    ) -> LedgerResult<Vec<(String, Uuid)>>;
    /// The rows of attempts an instant sale's claims confirmed: each attempt CONFIRMED with
    /// its hold of one unit, `(attempt, user, join serial)`.
    async fn insert_claims(
        &mut self,
        sale: SaleId,
        claims: &[(Uuid, &str, i64)],
    ) -> LedgerResult<()>;

    /// The audit rows of one decision for many attempts (an admission batch).
    async fn audit_all(&mut self, ids: &[AttemptId], decision: &Decision) -> LedgerResult<()> {
        for id in ids {
            self.audit(*id, decision).await?;
        }
        Ok(())
    }
    /// Inserts the rows of attempts the queue store admitted; returns the ids that were new.
    async fn insert_admitted(
        &mut self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<Uuid>>;
    /// The attempt a payment reference belongs to.
    async fn payment_attempt(&mut self, reference: Uuid) -> LedgerResult<Option<AttemptId>>;
    /// Records a provider event id as seen; false when it was seen before.
    async fn claim_payment_event(
        &mut self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<bool>;
    /// Up to `limit` attempts past the deadline of the timeout `event`, oldest first, locked
    /// for this transaction (on PostgreSQL, rows another reaper holds are skipped).
    async fn due(&mut self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<AttemptId>>;
}

/// The statements on attempts (and their holds) the shared transitions and flows run.
#[async_trait]
pub(crate) trait AttemptRows: Send {
    /// Loads the attempt and keeps it locked until the transaction ends.
    async fn lock_attempt(&mut self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>>;
    /// Claims the hold's units, all or nothing (SoldOut / SeatTaken / UnknownSeat otherwise).
    async fn take_units(&mut self, id: AttemptId, take: &Take) -> LedgerResult<()>;
    /// Ends a held hold and frees its units; nothing if the hold had ended already.
    async fn return_units(&mut self, id: AttemptId) -> LedgerResult<()>;
    /// Writes the new state and what entering it implies (deadlines, payment rows).
    async fn enter_state(&mut self, id: AttemptId, to: AttemptState) -> LedgerResult<()>;
    /// Writes the decision's row of the audit trail (from, to, cause).
    async fn audit(&mut self, id: AttemptId, decision: &Decision) -> LedgerResult<()>;
    /// Loads and locks the attempts `ids` of `sale` that exist, in the order of their ids.
    async fn lock_attempts(
        &mut self,
        sale: SaleId,
        ids: &[Uuid],
    ) -> LedgerResult<Vec<AttemptRecord>>;
    /// Claims named seats for the attempt, all or none.
    async fn claim_seats(&mut self, id: AttemptId, seats: &[String]) -> LedgerResult<()>;
    /// The new state of many attempts ([`AttemptRows::enter_state`] for each).
    async fn enter_states(&mut self, ids: &[Uuid], to: AttemptState) -> LedgerResult<()>;
}

/// The statements on a quantity sale's counter of free units.
#[async_trait]
pub(crate) trait StockRows: Send {
    /// Takes each of `wants` units of a quantity sale that is free once those before it are
    /// taken; whether each was.
    async fn take_each(&mut self, sale: SaleId, wants: &[u32]) -> LedgerResult<Vec<bool>>;
    /// Takes `n` units of a quantity sale, all or none, in one write: whether they were free.
    async fn take_all(&mut self, sale: SaleId, n: u32) -> LedgerResult<bool>;
}

/// The statements on a sale's row and its units the shared flows run.
#[async_trait]
pub(crate) trait SaleRows: Send {
    /// Inserts a new sale's row.
    async fn insert_sale(&mut self, sale: &Sale) -> LedgerResult<()>;
    /// Inserts a new sale's units (its seats, or "1".."total").
    async fn insert_units(&mut self, sale: &Sale) -> LedgerResult<()>;
    /// The sale's stored status, locked until the transaction ends.
    async fn lock_sale_status(&mut self, id: SaleId) -> LedgerResult<Option<String>>;
    async fn write_sale_status(&mut self, id: SaleId, status: SaleStatus) -> LedgerResult<()>;
    /// The sale's kind of stock and total, its row locked until the transaction ends.
    async fn lock_sale_stock(&mut self, id: SaleId) -> LedgerResult<Option<(StockKind, u32)>>;
    /// Adds `n` units to a quantity sale, numbered on from its highest.
    async fn add_units(&mut self, id: SaleId, n: u32) -> LedgerResult<()>;
    /// Adds seats; a seat the sale has already is [`LedgerError::SeatExists`].
    async fn add_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<()>;
    /// Deletes up to `n` free units of a quantity sale; how many it deleted.
    async fn withdraw_units(&mut self, id: SaleId, n: u32) -> LedgerResult<u32>;
    /// Deletes the named seats that are free; how many it deleted.
    async fn withdraw_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<u32>;
    async fn write_sale_total(&mut self, id: SaleId, total: u32) -> LedgerResult<()>;
    /// The sale with its free units counted.
    async fn load_sale(&mut self, id: SaleId) -> LedgerResult<Option<SaleRecord>>;
    async fn write_admission(&mut self, id: SaleId, admission: Admission) -> LedgerResult<()>;
    async fn write_proof_of_work(&mut self, id: SaleId, pow: &ProofOfWork) -> LedgerResult<()>;
    /// A new name and end to joins, each only if given.
    async fn write_details(
        &mut self,
        id: SaleId,
        name: Option<&str>,
        closes_at: Option<DateTime<Utc>>,
    ) -> LedgerResult<()>;
}

/// The statements on admin keys and the admin audit log.
#[async_trait]
pub(crate) trait OperatorRows: Send {
    /// Inserts one entry of the admin audit log.
    async fn insert_admin_action(&mut self, action: &AdminAction) -> LedgerResult<()>;
    /// Inserts a named admin key; [`LedgerError::NameTaken`] if its name is used.
    async fn insert_admin_key(&mut self, key: &AdminKeyRow, key_hash: &str) -> LedgerResult<()>;
    /// The named key, locked until the transaction ends.
    async fn lock_admin_key(&mut self, name: &str) -> LedgerResult<Option<AdminKeyRow>>;
    /// Marks the named key revoked now; the key after.
    async fn write_key_revoked(&mut self, name: &str) -> LedgerResult<AdminKeyRow>;
}

/// Applies `event` to a locked attempt; `refunding` says who gives the money back should the
/// machine ask for a refund.
pub(crate) async fn transition<T: LedgerTx + ?Sized>(
    tx: &mut T,
    record: AttemptRecord,
    event: AttemptEvent,
    take: Option<&Take>,
    refunding: Refunding,
) -> LedgerResult<Applied> {
    let (step, record) = write(tx, record, event, take, refunding).await?;
    Ok(Applied {
        expired_first: None,
        step,
        record,
    })
}

/// Writes what the machine decides for `event`: its effects, and if the state changes, the new
/// state, the audit row, the event it announces and the queue store's side. Returns the step
/// and the attempt after it.
async fn write<T: LedgerTx + ?Sized>(
    tx: &mut T,
    record: AttemptRecord,
    event: AttemptEvent,
    take: Option<&Take>,
    refunding: Refunding,
) -> LedgerResult<(Step, AttemptRecord)> {
    let decision = decide(record.state, event)?;
    let id = record.id;
    for effect in &decision.effects {
        match effect {
            Effect::TakeStock => {
                let take = take.ok_or_else(|| LedgerError::Other("hold without a take".into()))?;
                tx.take_units(id, take).await?;
            }
            Effect::ReturnStock => tx.return_units(id).await?,
            Effect::RefundRequired => {
                let event = DomainEvent::new(
                    EventType::RefundRequired,
                    id.sale,
                    Some(id),
                    serde_json::json!({
                        "user_id": record.user.as_str(),
                        "payment_reference": record.payment_reference,
                        "state": decision.to.to_string(),
                        "refund": refunding.as_str(),
                    }),
                );
                tx.insert_event(&event).await?;
            }
        }
    }
    let mut sync = None;
    if decision.changed {
        if let Some(change) = SyncChange::of(&decision) {
            let row = tx.record_sync(id, change).await?;
            sync = Some(PendingSync {
                id: row,
                attempt: id,
                change,
            });
        }
        tx.enter_state(id, decision.to).await?;
        tx.audit(id, &decision).await?;
    }
    let record = tx.lock_attempt(id).await?.ok_or(LedgerError::NotFound)?;
    if decision.changed {
        let amount = record.hold.as_ref().and_then(|h| h.amount.as_ref());
        if let Some(event) = DomainEvent::for_decision(id, record.user.as_str(), &decision, amount)
        {
            tx.insert_event(&event).await?;
        }
    }
    Ok((Step { decision, sync }, record))
}

/// The timeout event that applies to a locked attempt now, by the database's clock.
pub(crate) async fn due_timeout<T: LedgerTx + ?Sized>(
    tx: &mut T,
    record: &AttemptRecord,
) -> LedgerResult<Option<AttemptEvent>> {
    match deadline(record) {
        Some((event, deadline)) if tx.is_past(deadline).await? => Ok(Some(event)),
        _ => Ok(None),
    }
}

/// The timeout an attempt's state has and when it falls due. A payment success that arrives
/// after the payment deadline but before the reaper still confirms: the units are still held
/// for the attempt, and the customer paid.
pub(crate) fn deadline(record: &AttemptRecord) -> Option<(AttemptEvent, DateTime<Utc>)> {
    match record.state {
        AttemptState::Admitted => {
            Some((AttemptEvent::AdmissionTimeout, record.admission_expires_at))
        }
        AttemptState::Hold => Some((AttemptEvent::HoldTimeout, record.hold_expires_at?)),
        AttemptState::PaymentPending
        | AttemptState::Queued
        | AttemptState::Confirmed
        | AttemptState::Expired { .. } => None,
    }
}

/// The event as the machine is asked it for `record`: which checkout it is depends on what
/// the hold costs (the domain's rule).
pub(crate) fn as_asked(event: AttemptEvent, record: &AttemptRecord) -> AttemptEvent {
    match event {
        AttemptEvent::Checkout => {
            AttemptEvent::checkout_of(record.hold.as_ref().and_then(|h| h.amount.as_ref()))
        }
        other => other,
    }
}

/// The body of `Ledger::apply` inside an open transaction (`refunding` as for [`transition`]).
/// `Ok(Err(..))` means the event was refused but the transaction holds a due expiry worth
/// committing ([`LedgerError::RejectedAfterExpiry`] carries it, for the caller to settle).
pub(crate) async fn apply_in<T: LedgerTx + ?Sized>(
    tx: &mut T,
    id: AttemptId,
    user: Option<&UserId>,
    event: AttemptEvent,
    take: Option<&Take>,
    refunding: Refunding,
) -> LedgerResult<Result<Applied, LedgerError>> {
    let mut record = tx.lock_attempt(id).await?.ok_or(LedgerError::NotFound)?;
    if user.is_some_and(|u| *u != record.user) {
        return Err(LedgerError::NotFound);
    }
    // An attempt past its deadline expires before the event is looked at; the expiry is kept
    // even when the event is then refused.
    let mut expired_first = None;
    if let Some(timeout) = due_timeout(tx, &record).await? {
        if timeout != event {
            // (a timeout asks no refund)
            let (step, after) = write(tx, record, timeout, None, Refunding::Owed).await?;
            expired_first = Some(step);
            record = after;
        }
    }
    let after_expiry = expired_first.is_some().then(|| record.clone());
    let event = as_asked(event, &record);
    match write(tx, record, event, take, refunding).await {
        Ok((step, record)) => Ok(Ok(Applied {
            expired_first,
            step,
            record,
        })),
        Err(LedgerError::Rejected(rejected)) => Ok(Err(match (expired_first, after_expiry) {
            (Some(step), Some(record)) => LedgerError::RejectedAfterExpiry {
                rejected,
                expired: Box::new(Applied {
                    expired_first: None,
                    step,
                    record,
                }),
            },
            _ => LedgerError::Rejected(rejected),
        })),
        Err(other) => Err(other),
    }
}

/// What a reaper pass for a timeout event looks at: the state it expires, and the deadline
/// column's name (the same in both schemas).
pub(crate) fn timeout_state(event: AttemptEvent) -> LedgerResult<(&'static str, &'static str)> {
    match event {
        AttemptEvent::AdmissionTimeout => Ok(("ADMITTED", "admission_expires_at")),
        AttemptEvent::HoldTimeout => Ok(("HOLD", "hold_expires_at")),
        AttemptEvent::PaymentTimeout => Ok(("PAYMENT_PENDING", "payment_expires_at")),
        AttemptEvent::Admit
        | AttemptEvent::Leave
        | AttemptEvent::Abandon
        | AttemptEvent::SaleClosed
        | AttemptEvent::Hold
        | AttemptEvent::Release
        | AttemptEvent::Checkout
        | AttemptEvent::ClaimFree
        | AttemptEvent::Claim
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::Refund => Err(LedgerError::Other(format!("{event:?} is not a timeout"))),
    }
}
