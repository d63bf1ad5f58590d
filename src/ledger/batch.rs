//! What arrives together is written together: events of one sale's attempts (holds,
//! checkouts) and an instant sale's claims, many in one transaction and one commit, written
//! with one statement of each kind for the whole batch rather than a few per attempt. Each
//! ask keeps its own outcome: one refused (sold out, a seat taken, a state the event does not
//! apply to) fails alone, and the others go on. Written once for every database over
//! [`LedgerTx`]; a dialect gives each statement for many rows (arrays on PostgreSQL, a row at
//! a time on SQLite, whose statements cost no round trip).
//!
//! The machine decides each ask as [`super::transition::apply_in`] does. What the batch writes
//! set-based is the common case: a decision whose only effect is taking stock (or none). An
//! attempt past a deadline, an event that gives stock back or asks a refund, and an attempt
//! asked twice in one batch take the one-at-a-time path, in the same transaction after the
//! rest.

use std::collections::{BTreeMap, HashMap, HashSet};

use uuid::Uuid;

use super::transition::{apply_in, as_asked, deadline, LedgerTx};
use super::{Applied, AttemptRecord, LedgerError, LedgerResult, PendingSync, Step, SyncChange};
use crate::domain::{
    decide, AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent, Effect, Refunding,
    SaleId, Take, UserId,
};

/// One event for one attempt, asked in a batch ([`super::Ledger::apply_all`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EventAsk {
    pub id: AttemptId,
    /// When given, must own the attempt (else `NotFound`).
    pub user: Option<UserId>,
    pub event: AttemptEvent,
    /// What a `Hold` takes.
    pub take: Option<Take>,
}

/// An instant sale's claim the queue store made: the user's attempt and its join serial
/// ([`super::Ledger::record_claims`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimAsk {
    pub attempt: AttemptId,
    pub user: UserId,
    pub seq: u64,
}

/// What the ledger made of a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// Recorded, now or before (a claim recorded twice answers the same): the attempt after.
    Recorded(Applied),
    /// The user had claimed before with another attempt (the queue store lost that claim):
    /// that attempt, and nothing taken for this one.
    Before(AttemptRecord),
}

/// The attempts `ids` of `sale` that exist, locked, by id.
async fn locked<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    ids: &[Uuid],
) -> LedgerResult<HashMap<Uuid, AttemptRecord>> {
    Ok(tx
        .lock_attempts(sale, ids)
        .await?
        .into_iter()
        .map(|r| (r.id.local, r))
        .collect())
}

/// A decision the batch writes set-based, for the ask at `at`.
struct Planned {
    at: usize,
    id: AttemptId,
    user: UserId,
    decision: Decision,
    take: Option<Take>,
}

/// [`super::Ledger::apply_all`] inside an open transaction: each ask's outcome, in order;
/// `Err` only when the transaction as a whole failed.
pub(crate) async fn apply_all_in<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    asks: &[EventAsk],
) -> LedgerResult<Vec<LedgerResult<Applied>>> {
    tx.by_index().await?;
    let mut answers: Vec<Option<LedgerResult<Applied>>> = vec![None; asks.len()];
    let mut ids: Vec<Uuid> = asks.iter().map(|a| a.id.local).collect();
    ids.sort();
    ids.dedup();
    let records = locked(tx, sale, &ids).await?;
    let now = tx.now().await?;
    let mut first = HashSet::new();
    let mut planned = Vec::new();
    let mut one_by_one = Vec::new();
    for (at, ask) in asks.iter().enumerate() {
        if ask.id.sale != sale || !first.insert(ask.id.local) {
            one_by_one.push(at);
            continue;
        }
        let record = match records.get(&ask.id.local) {
            Some(record) if ask.user.as_ref().is_none_or(|u| *u == record.user) => record,
            _ => {
                answers[at] = Some(Err(LedgerError::NotFound));
                continue;
            }
        };
        if deadline(record).is_some_and(|(_, at)| at <= now) {
            one_by_one.push(at);
            continue;
        }
        match decide(record.state, as_asked(ask.event, record)) {
            Err(rejected) => answers[at] = Some(Err(rejected.into())),
            Ok(decision) if !decision.changed => {
                answers[at] = Some(Ok(unchanged(decision, record.clone())))
            }
            Ok(decision) if decision.effects.iter().all(|e| *e == Effect::TakeStock) => planned
                .push(Planned {
                    at,
                    id: ask.id,
                    user: record.user.clone(),
                    decision,
                    take: ask.take.clone(),
                }),
            Ok(_) => one_by_one.push(at),
        }
    }
    let planned = take_stock(tx, sale, planned, &mut answers).await?;
    for (at, applied) in write(tx, sale, planned).await? {
        answers[at] = Some(Ok(applied));
    }
    for at in one_by_one {
        let ask = &asks[at];
        let applied = apply_in(
            tx,
            ask.id,
            ask.user.as_ref(),
            ask.event,
            ask.take.as_ref(),
            Refunding::Owed,
        )
        .await;
        answers[at] = Some(match applied {
            Ok(answer) => answer,
            Err(e) if e.is_refusal() => Err(e),
            Err(e) => return Err(e),
        });
    }
    Ok(answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(LedgerError::Other("an ask went unanswered".into()))))
        .collect())
}

/// An event that changed nothing: the attempt as it is.
fn unchanged(decision: Decision, record: AttemptRecord) -> Applied {
    Applied {
        expired_first: None,
        step: Step {
            decision,
            sync: None,
        },
        record,
    }
}

/// Takes the stock of the planned decisions that take some: the units of a quantity sale
/// with one read and one write of its counter, in the order asked; seats an attempt at a time.
/// Those refused are answered and left out; the hold rows of the rest are written.
async fn take_stock<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    planned: Vec<Planned>,
    answers: &mut [Option<LedgerResult<Applied>>],
) -> LedgerResult<Vec<Planned>> {
    let takes = |p: &Planned| p.decision.effects.contains(&Effect::TakeStock);
    let wants: Vec<u32> = planned
        .iter()
        .filter(|p| takes(p))
        .filter_map(|p| match &p.take {
            Some(Take::Quantity(n)) => Some(*n),
            _ => None,
        })
        .collect();
    let mut granted = if wants.is_empty() {
        Vec::new()
    } else {
        tx.take_each(sale, &wants).await?
    }
    .into_iter();
    let mut kept = Vec::with_capacity(planned.len());
    for p in planned {
        if !takes(&p) {
            kept.push(p);
            continue;
        }
        let refusal = match &p.take {
            Some(Take::Quantity(_)) => {
                (!granted.next().unwrap_or(false)).then_some(LedgerError::SoldOut)
            }
            Some(Take::Seats(seats)) => tx.claim_seats(p.id, seats).await.err(),
            None => Some(LedgerError::Other("hold without a take".into())),
        };
        match refusal {
            Some(e) if e.is_refusal() => answers[p.at] = Some(Err(e)),
            Some(e) => return Err(e),
            None => kept.push(p),
        }
    }
    let holds: Vec<(AttemptId, &Take)> = kept
        .iter()
        .filter(|p| takes(p))
        .filter_map(|p| Some((p.id, p.take.as_ref()?)))
        .collect();
    if !holds.is_empty() {
        tx.insert_holds(sale, &holds).await?;
    }
    Ok(kept)
}

/// Writes the planned decisions, one statement of each kind for all of them: the queue
/// store's side, the new states, the audit rows, then the events (with the amounts the
/// attempts hold after). The attempts after, by the ask each answers.
async fn write<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    planned: Vec<Planned>,
) -> LedgerResult<Vec<(usize, Applied)>> {
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let changes: Vec<(AttemptId, SyncChange)> = planned
        .iter()
        .filter_map(|p| Some((p.id, SyncChange::of(&p.decision)?)))
        .collect();
    let sync_ids = tx.record_syncs(&changes).await?;
    let mut syncs: HashMap<Uuid, PendingSync> = changes
        .into_iter()
        .zip(sync_ids)
        .map(|((attempt, change), id)| {
            let sync = PendingSync {
                id,
                attempt,
                change,
            };
            (attempt.local, sync)
        })
        .collect();
    // One statement per state entered and per kind of decision, in a stable order.
    let mut by_state: BTreeMap<String, (AttemptState, Vec<Uuid>)> = BTreeMap::new();
    let mut by_decision: Vec<(&Decision, Vec<AttemptId>)> = Vec::new();
    for p in &planned {
        by_state
            .entry(p.decision.to.to_string())
            .or_insert_with(|| (p.decision.to, Vec::new()))
            .1
            .push(p.id.local);
        match by_decision.iter_mut().find(|(d, _)| **d == p.decision) {
            Some((_, ids)) => ids.push(p.id),
            None => by_decision.push((&p.decision, vec![p.id])),
        }
    }
    for (to, ids) in by_state.into_values() {
        tx.enter_states(&ids, to).await?;
    }
    for (decision, ids) in &by_decision {
        tx.audit_all(ids, decision).await?;
    }
    let ids: Vec<Uuid> = planned.iter().map(|p| p.id.local).collect();
    let mut after = locked(tx, sale, &ids).await?;
    let mut events = Vec::with_capacity(planned.len());
    let mut done = Vec::with_capacity(planned.len());
    for p in planned {
        let record = after.remove(&p.id.local).ok_or(LedgerError::NotFound)?;
        let amount = record.hold.as_ref().and_then(|h| h.amount.as_ref());
        events.extend(DomainEvent::for_decision(
            p.id,
            p.user.as_str(),
            &p.decision,
            amount,
        ));
        let step = Step {
            decision: p.decision,
            sync: syncs.remove(&p.id.local),
        };
        done.push((
            p.at,
            Applied {
                expired_first: None,
                step,
                record,
            },
        ));
    }
    tx.insert_events(&events).await?;
    Ok(done)
}

/// [`super::Ledger::record_claims`] inside an open transaction: each claim's outcome, in
/// order; `Err` only when the transaction as a whole failed. A claim recorded before answers
/// its attempt as it is; a user with a CONFIRMED attempt already answers that one; the rest
/// take one unit each, in order, while the ledger has units (sold out after).
pub(crate) async fn record_claims_in<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    claims: &[ClaimAsk],
) -> LedgerResult<Vec<LedgerResult<Claimed>>> {
    tx.by_index().await?;
    let mut answers: Vec<Option<LedgerResult<Claimed>>> = vec![None; claims.len()];
    let mut ids: Vec<Uuid> = claims.iter().map(|c| c.attempt.local).collect();
    ids.sort();
    ids.dedup();
    let recorded = locked(tx, sale, &ids).await?;
    let decision = decide(AttemptState::Queued, AttemptEvent::Claim)?;
    let mut users: Vec<String> = Vec::new();
    let mut fresh = Vec::new();
    for (at, claim) in claims.iter().enumerate() {
        if claim.attempt.sale != sale {
            answers[at] = Some(Err(LedgerError::NotFound));
        } else if let Some(record) = recorded.get(&claim.attempt.local) {
            answers[at] = Some(match record.user == claim.user {
                true => decide(record.state, AttemptEvent::Claim)
                    .map(|d| Claimed::Recorded(unchanged(d, record.clone())))
                    .map_err(LedgerError::from),
                false => Err(LedgerError::NotFound),
            });
        } else {
            users.push(claim.user.to_string());
            fresh.push(at);
        }
    }
    // A user's claim made before, under another attempt (or earlier in this batch).
    let before: HashMap<String, Uuid> = tx.confirmed_of(sale, &users).await?.into_iter().collect();
    let before_ids: Vec<Uuid> = before.values().copied().collect();
    let before_records = locked(tx, sale, &before_ids).await?;
    let mut in_batch: HashSet<&UserId> = HashSet::new();
    let mut taking = Vec::new();
    for at in fresh {
        let claim = &claims[at];
        let earlier = before
            .get(claim.user.as_str())
            .and_then(|id| before_records.get(id));
        match earlier {
            Some(record) => answers[at] = Some(Ok(Claimed::Before(record.clone()))),
            None if !in_batch.insert(&claim.user) => {
                answers[at] = Some(Err(LedgerError::Other(
                    "one user's two claims in one batch".into(),
                )))
            }
            None => taking.push(at),
        }
    }
    // The counter's row stays locked until the commit, so it is taken last: one sale's
    // batches overlap in everything else. Every claim is recorded, then their units taken in
    // one conditional write; when the ledger has fewer free units than claims (the sale's last
    // units), the batch goes back to its mark and takes the units first, claim by claim.
    if !taking.is_empty() {
        tx.mark().await?;
        record_taken(tx, sale, claims, &taking, &decision, &mut answers).await?;
        if !tx.take_all(sale, taking.len() as u32).await? {
            tx.back_to_mark().await?;
            let granted = tx.take_each(sale, &vec![1; taking.len()]).await?;
            let mut planned = Vec::with_capacity(taking.len());
            for (at, granted) in taking.into_iter().zip(granted) {
                match granted {
                    true => planned.push(at),
                    false => answers[at] = Some(Err(LedgerError::SoldOut)),
                }
            }
            record_taken(tx, sale, claims, &planned, &decision, &mut answers).await?;
        }
    }
    Ok(answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(LedgerError::Other("a claim went unanswered".into()))))
        .collect())
}

/// Records the claims at `planned` (units taken apart): their attempts CONFIRMED with a hold,
/// their transitions and their events; each one's answer.
async fn record_taken<T: LedgerTx + ?Sized>(
    tx: &mut T,
    sale: SaleId,
    claims: &[ClaimAsk],
    planned: &[usize],
    decision: &Decision,
    answers: &mut [Option<LedgerResult<Claimed>>],
) -> LedgerResult<()> {
    if planned.is_empty() {
        return Ok(());
    }
    let rows: Vec<(Uuid, &str, i64)> = planned
        .iter()
        .map(|at| {
            let c = &claims[*at];
            (c.attempt.local, c.user.as_str(), c.seq as i64)
        })
        .collect();
    tx.insert_claims(sale, &rows).await?;
    let ids: Vec<AttemptId> = planned.iter().map(|at| claims[*at].attempt).collect();
    tx.audit_all(&ids, decision).await?;
    let locals: Vec<Uuid> = ids.iter().map(|id| id.local).collect();
    let mut after = locked(tx, sale, &locals).await?;
    let mut events = Vec::with_capacity(planned.len());
    for &at in planned {
        let claim = &claims[at];
        let record = after
            .remove(&claim.attempt.local)
            .ok_or(LedgerError::NotFound)?;
        let amount = record.hold.as_ref().and_then(|h| h.amount.as_ref());
        events.extend(DomainEvent::for_decision(
            claim.attempt,
            claim.user.as_str(),
            decision,
            amount,
        ));
        answers[at] = Some(Ok(Claimed::Recorded(Applied {
            expired_first: None,
            step: Step {
                decision: decision.clone(),
                sync: None,
            },
            record,
        })));
    }
    tx.insert_events(&events).await
}
