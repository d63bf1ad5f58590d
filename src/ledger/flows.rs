//! The ledger's flows beyond one event on one attempt, written once for every database over
//! [`LedgerTx`]: a sale's creation, its changes (a closed sale stays closed; stock), the named
//! admin keys and an operator's refund — each with its admin audit entry — admissions
//! (QUEUED → ADMITTED, the attempt's first row), payment webhooks (each provider event applied
//! once) and the reapers' expiry by deadline. Each runs inside
//! the caller's transaction; the dialects differ only in the statements they give.

use std::collections::HashSet;

use uuid::Uuid;

use super::transition::{apply_in, transition, LedgerTx};
use super::{
    AdminKeyRow, AdmissionPlan, Applied, AttemptRecord, Audit, LedgerError, LedgerResult,
    PaymentApplied, SaleChange, SaleRecord,
};
use crate::domain::{
    decide, AdminAction, AttemptEvent, AttemptId, AttemptState, DomainEvent, Refunding, Sale,
    SaleId, SaleStatus, StockChange, Target,
};
use crate::queue::Admitted;

/// A new sale: its row, its units and its event, and the audit entry of the operator who made
/// it.
pub(crate) async fn create_sale<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: &Sale,
    entry: Option<&AdminAction>,
) -> LedgerResult<()> {
    tx.insert_sale(sale).await?;
    tx.insert_units(sale).await?;
    tx.insert_event(&DomainEvent::sale_created(sale)).await?;
    match entry {
        Some(entry) => record_admin_action(tx, entry).await,
        None => Ok(()),
    }
}

/// A change to a sale: the sale locked, changed, and read before and after for the audit
/// entry of the operator who made the change.
pub(crate) async fn change_sale<T: LedgerTx + ?Sized>(
    tx: &mut T,
    id: SaleId,
    change: SaleChange<'_>,
    audit: Option<&Audit<'_, SaleRecord>>,
) -> LedgerResult<SaleRecord> {
    let previous = tx
        .lock_sale_status(id)
        .await?
        .ok_or(LedgerError::NotFound)?;
    let before = match audit {
        Some(_) => tx.load_sale(id).await?,
        None => None,
    };
    match change {
        SaleChange::Status(status) => set_sale_status(tx, id, &previous, status).await?,
        SaleChange::Admission(admission) => tx.write_admission(id, admission).await?,
        SaleChange::ProofOfWork(pow) => tx.write_proof_of_work(id, pow).await?,
        SaleChange::Stock(stock) => change_stock(tx, id, stock).await?,
        SaleChange::Details { name, closes_at } => tx.write_details(id, name, closes_at).await?,
    }
    let after = tx.load_sale(id).await?.ok_or(LedgerError::NotFound)?;
    if let Some(audit) = audit {
        let entry = audit.entry(&Target::Sale(id), before.as_ref(), Some(&after));
        record_admin_action(tx, &entry).await?;
    }
    Ok(after)
}

/// Moves a sale, locked by the caller in the `previous` status, to `status`, with its event
/// when it changes. A closed sale stays closed: closing is final for every attempt's
/// expectations.
async fn set_sale_status<T: LedgerTx + ?Sized>(
    tx: &mut T,
    id: SaleId,
    previous: &str,
    status: SaleStatus,
) -> LedgerResult<()> {
    if previous == SaleStatus::Closed.as_str() && status != SaleStatus::Closed {
        return Err(LedgerError::SaleClosed);
    }
    if previous != status.as_str() {
        tx.write_sale_status(id, status).await?;
        tx.insert_event(&DomainEvent::sale_status(id, previous, status))
            .await?;
    }
    Ok(())
}

/// An operator's change to a sale's stock, in one transaction: units or seats added, or free
/// ones withdrawn — all that were asked or none ([`LedgerError::NotFree`]: some are held or
/// sold, or do not exist) — and the sale's total. A sale keeps at least one unit.
pub(crate) async fn change_stock<T: LedgerTx + ?Sized>(
    tx: &mut T,
    id: SaleId,
    change: &StockChange,
) -> LedgerResult<()> {
    let (kind, total) = tx.lock_sale_stock(id).await?.ok_or(LedgerError::NotFound)?;
    if kind != change.kind() {
        return Err(LedgerError::Other(format!(
            "a {} change to a sale of {}",
            change.kind().as_str(),
            kind.as_str()
        )));
    }
    let wanted = change.units();
    let done = match change {
        StockChange::Add(n) => tx.add_units(id, *n).await.map(|()| *n)?,
        StockChange::AddSeats(seats) => tx.add_seats(id, seats).await.map(|()| wanted)?,
        StockChange::Withdraw(_) | StockChange::WithdrawSeats(_) if wanted >= total => {
            return Err(LedgerError::NotFree {
                asked: wanted,
                free: total.saturating_sub(1),
            })
        }
        StockChange::Withdraw(n) => tx.withdraw_units(id, *n).await?,
        StockChange::WithdrawSeats(seats) => tx.withdraw_seats(id, seats).await?,
    };
    if done != wanted {
        return Err(LedgerError::NotFree {
            asked: wanted,
            free: done,
        });
    }
    tx.write_sale_total(id, change.total_after(total)).await
}

/// One entry of the admin audit log and its event, in the caller's transaction.
pub(crate) async fn record_admin_action<T: LedgerTx + ?Sized>(
    tx: &mut T,
    action: &AdminAction,
) -> LedgerResult<()> {
    tx.insert_admin_action(action).await?;
    tx.insert_event(&DomainEvent::admin_action(action)).await
}

/// A new named admin key ([`LedgerError::NameTaken`] if its name is used) and its entry.
pub(crate) async fn create_admin_key<T: LedgerTx + ?Sized>(
    tx: &mut T,
    key: &AdminKeyRow,
    key_hash: &str,
    entry: &AdminAction,
) -> LedgerResult<()> {
    tx.insert_admin_key(key, key_hash).await?;
    record_admin_action(tx, entry).await
}

/// Revokes a named key with its entry; a key revoked already stays as it is, unlogged.
pub(crate) async fn revoke_admin_key<T: LedgerTx + ?Sized>(
    tx: &mut T,
    name: &str,
    audit: &Audit<'_, AdminKeyRow>,
) -> LedgerResult<Option<AdminKeyRow>> {
    let Some(before) = tx.lock_admin_key(name).await? else {
        return Ok(None);
    };
    if before.revoked_at.is_some() {
        return Ok(Some(before));
    }
    let after = tx.write_key_revoked(name).await?;
    let target = Target::AdminKey(name.into());
    record_admin_action(tx, &audit.entry(&target, Some(&before), Some(&after))).await?;
    Ok(Some(after))
}

/// An operator's refund: the machine's `Refund` event, and the entry when it changed the
/// attempt; `refunding` says whether the provider took the money back already.
/// `Ok(Err(..))` as [`apply_in`].
pub(crate) async fn refund<T: LedgerTx + ?Sized>(
    tx: &mut T,
    id: AttemptId,
    audit: &Audit<'_, AttemptRecord>,
    refunding: Refunding,
) -> LedgerResult<Result<Applied, LedgerError>> {
    let applied = match apply_in(tx, id, None, AttemptEvent::Refund, None, refunding).await? {
        Ok(applied) => applied,
        refused => return Ok(refused),
    };
    if applied.decision().changed {
        // A refund changes the state alone: the attempt before it is the one after, in the
        // state the decision left.
        let before = AttemptRecord {
            state: applied.decision().from,
            ..applied.record.clone()
        };
        let entry = audit.entry(&Target::Attempt(id), Some(&before), Some(&applied.record));
        record_admin_action(tx, &entry).await?;
    }
    Ok(Ok(applied))
}

/// Records attempts the queue store admitted: their rows, the audit trail and each one's
/// event, as the machine decides QUEUED + admit. A retried batch (after a timeout that did
/// commit) records nothing twice.
pub(crate) async fn record_admissions<T: LedgerTx + ?Sized>(
    tx: &mut T,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> LedgerResult<Vec<AttemptId>> {
    if admitted.is_empty() {
        return Ok(Vec::new());
    }
    let decision = decide(AttemptState::Queued, AttemptEvent::Admit)?;
    let inserted: HashSet<Uuid> = tx
        .insert_admitted(plan, admitted)
        .await?
        .into_iter()
        .collect();
    let new: Vec<&Admitted> = admitted
        .iter()
        .filter(|a| inserted.contains(&a.attempt.local))
        .collect();
    let ids: Vec<_> = new.iter().map(|a| a.attempt).collect();
    tx.audit_all(&ids, &decision).await?;
    for a in new {
        if let Some(event) = DomainEvent::for_decision(a.attempt, a.user.as_str(), &decision, None)
        {
            tx.insert_event(&event).await?;
        }
    }
    Ok(admitted
        .iter()
        .filter(|a| !inserted.contains(&a.attempt.local))
        .map(|a| a.attempt)
        .collect())
}

/// Applies one provider event to the attempt its payment reference names, once: the attempt
/// is locked first and the event id claimed second, so concurrent deliveries of one event
/// queue on the lock and all but the first find the id taken. `late`: who gives back a success
/// that comes after its attempt expired.
pub(crate) async fn payment_event<T: LedgerTx + ?Sized>(
    tx: &mut T,
    provider_event_id: &str,
    reference: Uuid,
    succeeded: bool,
    late: Refunding,
) -> LedgerResult<PaymentApplied> {
    let Some(id) = tx.payment_attempt(reference).await? else {
        return Ok(PaymentApplied::UnknownReference);
    };
    let record = tx.lock_attempt(id).await?.ok_or(LedgerError::NotFound)?;
    if !tx
        .claim_payment_event(provider_event_id, reference, succeeded)
        .await?
    {
        return Ok(PaymentApplied::Duplicate { record });
    }
    let event = if succeeded {
        AttemptEvent::PaymentSucceeded
    } else {
        AttemptEvent::PaymentFailed
    };
    Ok(PaymentApplied::Applied(
        transition(tx, record, event, None, late).await?,
    ))
}

/// Expires up to `limit` attempts whose deadline for the timeout `event` has passed, by the
/// database's clock, oldest deadline first.
pub(crate) async fn expire_due<T: LedgerTx + ?Sized>(
    tx: &mut T,
    event: AttemptEvent,
    limit: u32,
) -> LedgerResult<Vec<Applied>> {
    let due = tx.due(event, limit).await?;
    let mut expired = Vec::with_capacity(due.len());
    for id in due {
        let record = tx.lock_attempt(id).await?.ok_or(LedgerError::NotFound)?;
        // (a timeout asks no refund)
        expired.push(transition(tx, record, event, None, Refunding::Owed).await?);
    }
    Ok(expired)
}
