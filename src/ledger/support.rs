//! The ledger's reads for support and operations, and the operators' own tables: sales and
//! attempts by page, an attempt's trail and provider events, the named admin keys, the admin
//! audit log, and a sale's figures over time.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AttemptRecord, Audit, LedgerResult};
use crate::domain::{AdminAction, AttemptId, SaleId, SaleStatus, UserId};

/// Which of a sale's attempts a support lookup wants, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptQuery {
    /// Only attempts in this state (its stored name, e.g. `CONFIRMED`).
    pub state: Option<&'static str>,
    /// Only this user's attempts.
    pub user: Option<UserId>,
    /// Only attempts older than this one (the previous page's last): ids are UUIDv7, so new
    /// attempts land before the first page and never shift a later one.
    pub before: Option<Uuid>,
    pub limit: u32,
}

/// A sale in a list: its row without its units (a seat sale's seats are not read).
#[derive(Debug, Clone, PartialEq)]
pub struct SaleSummary {
    pub id: SaleId,
    pub name: String,
    pub status: SaleStatus,
    pub stock_kind: crate::domain::StockKind,
    pub total: u32,
    pub opens_at: DateTime<Utc>,
    pub closes_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// One row of an attempt's audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRow {
    pub from: String,
    pub to: String,
    pub reason: Option<String>,
    pub cause: String,
    /// The trace it was made in, when one was recorded.
    pub trace_id: Option<String>,
    pub at: DateTime<Utc>,
}

/// A payment provider's event as the ledger recorded it (once per provider event id).
#[derive(Debug, Clone, PartialEq)]
pub struct PaymentEventRow {
    pub provider_event_id: String,
    pub kind: String,
    pub received_at: DateTime<Utc>,
}

/// A named admin key as the ledger keeps it (its secret only as a hash, never here).
#[derive(Debug, Clone, PartialEq)]
pub struct AdminKeyRow {
    pub id: Uuid,
    pub name: String,
    pub role: crate::domain::Role,
    /// The name of the key that created it.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// Set once the key is revoked: from then on it is refused.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// One sample of a sale's figures (`sale_figures`), at the start of its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct SaleFigures {
    pub sale: SaleId,
    pub at: DateTime<Utc>,
    pub waiting: u64,
    /// Attempts admitted, holding or paying (the active set).
    pub active: u64,
    /// Attempts ever admitted: two samples' difference is the admissions between them.
    pub admitted_total: u64,
    pub holding_units: u64,
    pub paying_units: u64,
    pub sold_units: u64,
    pub remaining: u64,
    /// The admission rate in force (the controller's in adaptive mode).
    pub rate_per_minute: f64,
    /// The adaptive controller's last decision (`increase`, `decrease`, `hold`, `stale`).
    pub decision: Option<String>,
}

/// Which entries of the admin audit log a reader wants, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only actions on this sale (and its attempts).
    pub sale: Option<SaleId>,
    /// Only entries older than this one (the previous page's last).
    pub before: Option<Uuid>,
    pub limit: u32,
}

/// Support's reads and the operators' tables.
#[async_trait]
pub trait SupportLedger: Send + Sync {
    /// Sales newest first, `status` only if given, older than `before` (a page's last id).
    async fn list_sales(
        &self,
        status: Option<SaleStatus>,
        before: Option<SaleId>,
        limit: u32,
    ) -> LedgerResult<Vec<SaleSummary>>;

    /// A sale's attempts (from ADMITTED on) as `query` says, newest first.
    async fn list_attempts(
        &self,
        sale: SaleId,
        query: &AttemptQuery,
    ) -> LedgerResult<Vec<AttemptRecord>>;

    /// The attempt's audit trail, oldest first.
    async fn trail(&self, id: AttemptId) -> LedgerResult<Vec<TransitionRow>>;

    /// The provider events recorded for the attempt's payment, oldest first.
    async fn payment_events(&self, id: AttemptId) -> LedgerResult<Vec<PaymentEventRow>>;

    /// Stores a new admin key by the hash of its secret; a name already used (by a revoked key
    /// too) is refused with [`LedgerError::NameTaken`](super::LedgerError::NameTaken).
    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()>;

    /// The key whose secret hashes to `key_hash`, revoked or not.
    async fn admin_key(&self, key_hash: &str) -> LedgerResult<Option<AdminKeyRow>>;

    /// Every admin key, revoked ones too, oldest first.
    async fn admin_keys(&self) -> LedgerResult<Vec<AdminKeyRow>>;

    /// Revokes the key named `name`; the key after. A second revoke keeps the first time and
    /// writes no audit entry.
    async fn revoke_admin_key(
        &self,
        name: &str,
        audit: &Audit<'_, AdminKeyRow>,
    ) -> LedgerResult<Option<AdminKeyRow>>;

    /// Keeps a sample of a sale's figures; a sample of the same sale and time is kept once.
    async fn record_figures(&self, figures: &SaleFigures) -> LedgerResult<()>;

    /// The sale's samples from `since` on, oldest first.
    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>>;

    /// Deletes samples older than `before`; how many.
    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64>;

    /// Entries of the admin audit log as `query` says, newest first.
    async fn admin_audit(&self, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>>;
}
