//! The ledger: the durable truth. Sales, attempts from ADMITTED on, holds, payments, the audit
//! trail, idempotency keys and the outbox. Every transition is one database transaction that
//! also writes its audit row and its outbox event. Stock is taken conditionally here too, so a
//! wiped or stale queue store can never oversell. Deadlines are judged by the database's clock.

mod batch;
pub mod breaker;
mod flows;
mod gates;
mod idempotency;
mod layouts;
mod outbox;
mod payments;
mod phases;
pub mod postgres;
mod push;
mod queue_sync;
pub mod sql_types;
pub mod sqlite;
mod support;
mod transition;

pub use batch::{ClaimAsk, Claimed, EventAsk};
pub use gates::GateLedger;
pub use idempotency::{IdempotencyLedger, SavedResponse};
pub use layouts::{LayoutLedger, LayoutSummary};
pub use outbox::{OutboxEvent, OutboxLedger, RelayLease};
pub use payments::{OpenPayment, PaymentLedger};
pub use phases::{AccessCode, PhaseCounts, PhaseLedger, Redeemed};
pub use push::PushLedger;
pub use queue_sync::QueueSyncLedger;
pub(crate) use queue_sync::{sale_versions_from, sync_rows_from};
pub use support::{
    AdminKeyRow, AttemptQuery, AuditQuery, PaymentEventRow, SaleFigures, SaleSummary,
    SupportLedger, TransitionRow,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::{
    AdminAction, Admission, AttemptEvent, AttemptId, AttemptState, Decision, ExpiryReason, Opening,
    Operator, ProofOfWork, Rejected, Sale, SaleId, SaleStatus, StockChange, Target, UserId,
};
use crate::domain::{LiveAttempt, Refunding, SaleSnapshot, Take};
use crate::queue::Admitted;
pub use crate::queue::{PendingSync, SyncChange};

pub use self::postgres::PgLedger;
pub use self::sqlite::SqliteLedger;

/// The ledger named by the configuration: SQLite in the data directory when `ledger.url` is
/// empty, PostgreSQL otherwise.
pub fn from_config(config: &crate::config::Config) -> anyhow::Result<std::sync::Arc<dyn Ledger>> {
    let c = &config.ledger;
    let timeout = c.acquire_timeout_ms.duration();
    Ok(if config.ledger_is_embedded() {
        let path = config.embedded.data_dir.join("sluice.db");
        std::sync::Arc::new(SqliteLedger::open(
            &path,
            c.max_connections.get().min(8),
            timeout,
        )?)
    } else {
        // A database server can go away: the PostgreSQL ledger fails fast while it is (see
        // `breaker`). The embedded file cannot, and its busy moments are no outage.
        std::sync::Arc::new(PgLedger::new(&c.url, c.max_connections.get(), timeout)?)
    })
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LedgerError {
    /// The database is down or too slow: answer 503 + Retry-After.
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
    #[error("not found")]
    NotFound,
    /// The event does not apply to the attempt's state.
    #[error(transparent)]
    Rejected(#[from] Rejected),
    /// The attempt had passed a deadline: it expired (committed, and to be settled like every
    /// transition), and then the event did not apply to EXPIRED.
    #[error("{rejected}")]
    RejectedAfterExpiry {
        rejected: Rejected,
        expired: Box<Applied>,
    },
    /// A closed sale cannot be reopened.
    #[error("the sale is closed")]
    SaleClosed,
    #[error("sold out")]
    SoldOut,
    #[error("seat {0} is taken")]
    SeatTaken(String),
    #[error("seat {0} does not exist")]
    UnknownSeat(String),
    /// Units or seats to withdraw are not all free: `free` of the `asked` were.
    #[error("{free} of the {asked} units to withdraw are free (the rest are held, sold or unknown; a sale keeps at least one)")]
    NotFree { asked: u32, free: u32 },
    /// A seat to add is one the sale has.
    #[error("seat {0} is already in the sale")]
    SeatExists(String),
    /// A unique name (an admin key's) is already used.
    #[error("the name {0} is already used")]
    NameTaken(String),
    /// A phase's list or codes would be more than it may have (nothing was added); `field`
    /// is the request's field that asked for them.
    #[error("a phase has at most {max} {what}; this would make {would}")]
    TooMany {
        field: &'static str,
        what: &'static str,
        max: u64,
        would: u64,
    },
    /// What was asked clashes with what is there (a sale that already fronts a gate).
    #[error("{0}")]
    Conflict(String),
    #[error("ledger: {0}")]
    Other(String),
}

pub type LedgerResult<T> = Result<T, LedgerError>;

impl LedgerError {
    /// Whether the ledger said no to what was asked (it changed nothing for it), rather than
    /// failed: in a batch, a refusal answers one ask and the others go on.
    pub fn is_refusal(&self) -> bool {
        match self {
            LedgerError::NotFound
            | LedgerError::Rejected(_)
            | LedgerError::RejectedAfterExpiry { .. }
            | LedgerError::SaleClosed
            | LedgerError::SoldOut
            | LedgerError::SeatTaken(_)
            | LedgerError::UnknownSeat(_)
            | LedgerError::NotFree { .. }
            | LedgerError::SeatExists(_)
            | LedgerError::NameTaken(_)
            | LedgerError::Conflict(_)
            | LedgerError::TooMany { .. } => true,
            LedgerError::Unavailable(_) | LedgerError::Other(_) => false,
        }
    }
}

/// Times one write transaction, begin to commit, into `sluice_ledger_commit_duration_seconds`
/// (refused ones too: a slow refusal is as much database pressure). The adaptive valve reads
/// its p99.
pub(crate) async fn metered<T>(
    op: &'static str,
    work: impl std::future::Future<Output = LedgerResult<T>>,
) -> LedgerResult<T> {
    use tracing::Instrument;
    let started = std::time::Instant::now();
    let span = crate::telemetry::traces::span(|| tracing::info_span!("ledger.transaction", op));
    let result = work.instrument(span).await;
    metrics::histogram!("sluice_ledger_commit_duration_seconds", "op" => op)
        .record(started.elapsed().as_secs_f64());
    result
}

/// A sale with its live stock count.
#[derive(Debug, Clone, PartialEq)]
pub struct SaleRecord {
    pub sale: Sale,
    pub remaining: u32,
    /// Counts the changes to what the queue store keeps of the sale (status, admission, name,
    /// end to joins): the store has followed them once [`QueueSyncLedger::store_followed`] records it.
    pub settings_version: u64,
}

/// What the admission loop needs of an open sale.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionPlan {
    pub sale: SaleId,
    pub admission: Admission,
    pub admission_ttl_secs: u32,
    /// A lottery sale's draw is made by its admitter before the first admission.
    pub opening: Opening,
    /// Joins end then; its admitter closes the sale once nobody waits past it.
    pub closes_at: Option<DateTime<Utc>>,
    /// An instant sale: an admission is a claim, recorded as one, and the line drains as fast
    /// as the ledger records claims (the rate is not used).
    pub instant: bool,
}

/// What an attempt holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeldStock {
    pub quantity: u32,
    pub seats: Vec<String>,
    /// What it costs, fixed when it was taken (`None`: the sale is not priced).
    pub amount: Option<crate::domain::Money>,
}

/// An attempt as the ledger knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub id: AttemptId,
    pub user: UserId,
    pub seq: i64,
    pub state: AttemptState,
    pub admission_expires_at: DateTime<Utc>,
    pub hold_expires_at: Option<DateTime<Utc>>,
    pub payment_expires_at: Option<DateTime<Utc>>,
    pub hold: Option<HeldStock>,
    pub payment_reference: Option<Uuid>,
    /// The provider's id of the payment, once started there.
    pub provider_payment_id: Option<String>,
    /// The provider's last failed try of the payment (the buyer may try again).
    pub payment_failure: Option<String>,
}

impl AttemptRecord {
    /// What the attempt holds or bought.
    pub fn take(&self) -> Option<Take> {
        self.hold.as_ref().map(|h| match h.seats.is_empty() {
            true => Take::Quantity(h.quantity),
            false => Take::Seats(h.seats.clone()),
        })
    }

    /// The attempt as the queue store keeps a purchase, once CONFIRMED.
    pub fn buyer(&self) -> Option<crate::domain::Buyer> {
        (self.state == AttemptState::Confirmed).then(|| crate::domain::Buyer {
            user: self.user.clone(),
            attempt: self.id,
            bought: self.take(),
        })
    }

    /// The attempt as the queue store tracks it, while it is admitted, holding or paying.
    pub fn live(&self) -> Option<LiveAttempt> {
        let deadline = match self.state {
            AttemptState::Admitted => Some(self.admission_expires_at),
            AttemptState::Hold => self.hold_expires_at,
            AttemptState::PaymentPending => self.payment_expires_at,
            AttemptState::Queued | AttemptState::Confirmed | AttemptState::Expired { .. } => None,
        }?;
        Some(LiveAttempt {
            attempt: self.id,
            user: self.user.clone(),
            deadline_ms: deadline.timestamp_millis(),
            hold: self.take(),
        })
    }
}

/// The result of one applied event.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// A deadline the attempt had passed, expired before the event was looked at.
    pub expired_first: Option<Step>,
    /// The event's own decision and queue-store change.
    pub step: Step,
    /// The attempt after both.
    pub record: AttemptRecord,
}

/// One decision the ledger wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub decision: Decision,
    /// The change the transition asks of the queue store, as its queue-sync row, if any.
    pub sync: Option<PendingSync>,
}

impl Applied {
    /// The event's decision.
    pub fn decision(&self) -> &Decision {
        &self.step.decision
    }

    /// Every step, in the order the ledger wrote them.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.expired_first.iter().chain(std::iter::once(&self.step))
    }
}

/// What a payment webhook did.
#[derive(Debug, Clone, PartialEq)]
pub enum PaymentApplied {
    /// First delivery of this provider event: the attempt after it.
    Applied(Applied),
    /// The provider event id was seen before: nothing changed.
    Duplicate { record: AttemptRecord },
    /// No payment with this reference.
    UnknownReference,
}

/// An operator's change to a sale ([`Ledger::change_sale`]).
#[derive(Debug, Clone, Copy)]
pub enum SaleChange<'a> {
    Status(SaleStatus),
    Admission(Admission),
    ProofOfWork(&'a ProofOfWork),
    /// Units or seats added or withdrawn (`ledger/flows.rs`).
    Stock(&'a StockChange),
    /// A new name, or a new end to joins; what is not given stays.
    Details {
        name: Option<&'a str>,
        closes_at: Option<DateTime<Utc>>,
    },
}

/// Who does an admin action and what it is called, for its entry in the admin audit log. The
/// ledger writes the entry (and its event) in the action's own transaction, so an action is
/// done with its entry or not at all; `show` is how the entry shows the target, before and
/// after, as the ledger reads it inside that transaction.
pub struct Audit<'a, T> {
    pub actor: &'a Operator,
    pub action: &'a str,
    pub show: &'a (dyn Fn(&T) -> Option<serde_json::Value> + Sync),
}

impl<T> Audit<'_, T> {
    /// The entry of the action on `target`, shown before and after.
    pub fn entry(&self, target: &Target, before: Option<&T>, after: Option<&T>) -> AdminAction {
        let show = |t: Option<&T>| t.and_then(|t| (self.show)(t));
        AdminAction::new(self.actor, self.action, target, show(before), show(after))
    }
}

/// Counts of a sale's attempts, and of its units, in the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LedgerStats {
    /// Attempts by state.
    pub admitted: u64,
    pub holding: u64,
    pub paying: u64,
    pub confirmed: u64,
    pub expired: Vec<(ExpiryReason, u64)>,
    /// Units free to hold.
    pub remaining: u32,
    /// Units the sale has.
    pub total: u32,
    /// Units held by attempts in HOLD, in PAYMENT_PENDING, and sold (CONFIRMED).
    pub units_held: u64,
    pub units_paying: u64,
    pub units_sold: u64,
    /// Money, in the sale's currency's smallest unit, of the holds of attempts in HOLD, in
    /// PAYMENT_PENDING, CONFIRMED, and refunded (EXPIRED `refunded`); 0 when not priced.
    pub money_held: u64,
    pub money_paying: u64,
    pub money_sold: u64,
    pub money_refunded: u64,
    /// The currency of the money figures (`None`: the sale is not priced).
    pub currency: Option<crate::domain::Currency>,
}

#[async_trait]
pub trait Ledger:
    SupportLedger
    + IdempotencyLedger
    + OutboxLedger
    + QueueSyncLedger
    + PaymentLedger
    + PushLedger
    + PhaseLedger
    + LayoutLedger
    + GateLedger
    + Send
    + Sync
    + 'static
{
    async fn migrate(&self) -> LedgerResult<()>;

    async fn ping(&self) -> LedgerResult<()>;

    /// Whether the database answers at all (the breaker's question after an `Unavailable`).
    async fn reachable(&self) -> bool {
        self.ping().await.is_ok()
    }

    /// A new sale; with `entry`, the operator's action that made it, written with it.
    async fn create_sale(&self, sale: &Sale, entry: Option<&AdminAction>) -> LedgerResult<()>;

    /// The sale with its free units counted (a scan of them: not for every request).
    async fn sale(&self, id: SaleId) -> LedgerResult<Option<SaleRecord>>;

    /// The sale without counting its free units: its settings, status and (seated) seats.
    async fn sale_settings(&self, id: SaleId) -> LedgerResult<Option<Sale>>;

    /// Changes the sale in one transaction, with the audit entry of the operator who did it
    /// (none for sluice's own changes, such as a close at `closes_at`); the sale after.
    async fn change_sale(
        &self,
        id: SaleId,
        change: SaleChange<'_>,
        audit: Option<&Audit<'_, SaleRecord>>,
    ) -> LedgerResult<SaleRecord>;

    /// Sales that admit now: status open and opened. Past `closes_at` too: it refuses joins,
    /// and who waits by then is still admitted in turn (closing the sale ends that).
    async fn admitting_sales(&self) -> LedgerResult<Vec<AdmissionPlan>>;

    async fn stats(&self, id: SaleId) -> LedgerResult<LedgerStats>;

    /// The sale as the queue store must mirror it: free units, live attempts, per-user counts.
    async fn snapshot(&self, id: SaleId) -> LedgerResult<SaleSnapshot>;

    /// Just the free units (what a buyer may still choose).
    async fn free_stock(&self, id: SaleId) -> LedgerResult<crate::domain::Stock>;

    /// A quantity sale's free units (its counter: one row read); `None` for named seats.
    async fn free_units(&self, id: SaleId) -> LedgerResult<Option<u32>>;

    /// Records attempts the queue store just admitted (QUEUED → ADMITTED). Returns those the
    /// ledger had admitted before (a batch recorded twice, or an attempt the store admitted
    /// again after a failover lost its first admission): they keep the state they have.
    async fn record_admissions(
        &self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<AttemptId>>;

    async fn attempt(&self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>>;

    /// Applies one event to one attempt in one transaction. `user`, when given, must own the
    /// attempt (else NotFound); `take` is what a Hold takes. An attempt past its deadline is
    /// expired first, so the event then meets an EXPIRED attempt.
    async fn apply(
        &self,
        id: AttemptId,
        user: Option<&UserId>,
        event: AttemptEvent,
        take: Option<&Take>,
    ) -> LedgerResult<Applied>;

    /// Events of one sale's attempts that arrived together, as [`Ledger::apply`] applies each,
    /// in one transaction: each ask's own outcome, in order (one refused does not stop the
    /// others); `Err` when the transaction failed, for all of them.
    async fn apply_all(
        &self,
        sale: SaleId,
        asks: &[EventAsk],
    ) -> LedgerResult<Vec<LedgerResult<Applied>>>;

    /// Records an instant sale's claims that the queue store made (QUEUED → CONFIRMED, one
    /// unit each), in one transaction: each claim's outcome, in order. Idempotent: a claim
    /// recorded before answers as it is.
    async fn record_claims(
        &self,
        sale: SaleId,
        claims: &[ClaimAsk],
    ) -> LedgerResult<Vec<LedgerResult<Claimed>>>;

    /// An operator's refund: the `Refund` event applied as [`Ledger::apply`] does, with its
    /// audit entry when it changes the attempt (a second refund changes nothing);
    /// `refunding`: whether the provider took the money back already (its `refund_required`
    /// event says so).
    async fn refund(
        &self,
        id: AttemptId,
        audit: &Audit<'_, AttemptRecord>,
        refunding: Refunding,
    ) -> LedgerResult<Applied>;

    /// A payment webhook, idempotent by `provider_event_id`; `late`: who gives back a success
    /// that comes after its attempt expired (its `refund_required` event says so).
    async fn payment_event(
        &self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
        late: Refunding,
    ) -> LedgerResult<PaymentApplied>;

    /// Expires up to `limit` attempts whose deadline for `event` passed (reapers; several may
    /// run at once: rows are claimed with SKIP LOCKED).
    async fn expire_due(&self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<Applied>>;
}

impl LedgerStats {
    /// Counts from `(state, reason, count)` rows of one sale's attempts and `(state, units)`
    /// rows of the units its attempts hold (returned units not among them).
    pub(crate) fn tally(
        remaining: u32,
        total: u32,
        rows: Vec<(String, Option<String>, i64)>,
        holds: Vec<(String, Option<String>, i64, Option<i64>)>,
    ) -> Self {
        let mut stats = LedgerStats {
            remaining,
            total,
            expired: ExpiryReason::ALL.iter().map(|r| (*r, 0)).collect(),
            ..LedgerStats::default()
        };
        for (state, reason, n) in rows {
            let n = n as u64;
            match AttemptState::from_parts(&state, reason.as_deref()) {
                Some(AttemptState::Admitted) => stats.admitted += n,
                Some(AttemptState::Hold) => stats.holding += n,
                Some(AttemptState::PaymentPending) => stats.paying += n,
                Some(AttemptState::Confirmed) => stats.confirmed += n,
                Some(AttemptState::Expired { reason }) => {
                    if let Some(slot) = stats.expired.iter_mut().find(|(r, _)| *r == reason) {
                        slot.1 += n;
                    }
                }
                Some(AttemptState::Queued) | None => {}
            }
        }
        for (state, reason, units, amount) in holds {
            let (n, money) = (units.max(0) as u64, amount.unwrap_or(0).max(0) as u64);
            match AttemptState::from_parts(&state, reason.as_deref()) {
                Some(AttemptState::Hold) => {
                    stats.units_held += n;
                    stats.money_held += money;
                }
                Some(AttemptState::PaymentPending) => {
                    stats.units_paying += n;
                    stats.money_paying += money;
                }
                Some(AttemptState::Confirmed) => {
                    stats.units_sold += n;
                    stats.money_sold += money;
                }
                Some(AttemptState::Expired {
                    reason: ExpiryReason::Refunded,
                }) => stats.money_refunded += money,
                Some(
                    AttemptState::Queued | AttemptState::Admitted | AttemptState::Expired { .. },
                )
                | None => {}
            }
        }
        stats
    }
}

/// `(user, units)` rows as the per-user counts of a snapshot (rows with a bad user are skipped).
pub(crate) fn bought_from(rows: Vec<(String, i64)>) -> Vec<(UserId, u32)> {
    rows.into_iter()
        .filter_map(|(user, n)| Some((UserId::parse(&user).ok()?, n as u32)))
        .collect()
}
