//! The SQLite ledger of the embedded default (sqlx, migrations in `migrations/sqlite`): the
//! same guarantees as PostgreSQL — conditional stock (a unit has one holder), unique payment
//! event ids, a transition and its outbox row in one transaction — with writers serialised by
//! `BEGIN IMMEDIATE`. Layout: `sales.rs`, `attempts.rs` (the statements of `LedgerTx` in
//! `ledger/transition.rs` that the shared transitions and flows run), `figures.rs` (a sale's
//! figures over time), `idempotency.rs`, `operators.rs` (admin keys and the admin audit log),
//! `outbox.rs`, `queue_sync.rs`, `support.rs` (support's reads).

mod attempts;
mod figures;
mod idempotency;
mod operators;
mod outbox;
mod queue_sync;
mod sales;
mod support;

use crate::ledger::metered;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use uuid::Uuid;

use super::*;

/// The database's clock, in Unix milliseconds.
pub(crate) const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// A backlog from a `(count, min(created_at))` row: the count and the oldest's age in s.
pub(crate) fn backlog_of((count, oldest): (i64, Option<i64>)) -> (u64, f64) {
    let now = chrono::Utc::now().timestamp_millis();
    let age = oldest.map(|t| (now - t).max(0) as f64 / 1000.0);
    (count as u64, age.unwrap_or(0.0))
}

#[derive(Clone)]
pub struct SqliteLedger {
    pool: SqlitePool,
}

impl SqliteLedger {
    /// Opens (creating if needed) the ledger file; `:memory:`-style paths are not supported,
    /// the embedded ledger is meant to survive restarts.
    pub fn open(
        path: &Path,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options);
        Ok(SqliteLedger { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// A write transaction: takes the database's write lock at once, so two writers never
    /// deadlock upgrading a read lock.
    pub(crate) async fn write(&self) -> LedgerResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_error)
    }
}

pub(crate) fn db_error(e: sqlx::Error) -> LedgerError {
    match &e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::WorkerCrashed => LedgerError::Unavailable(e.to_string()),
        _ => LedgerError::Other(e.to_string()),
    }
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn migrate(&self) -> LedgerResult<()> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.pool)
            .await
            .map_err(|e| match e {
                sqlx::migrate::MigrateError::Execute(e) => db_error(e),
                other => LedgerError::Other(other.to_string()),
            })
    }

    async fn ping(&self) -> LedgerResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(db_error)
    }

    async fn create_sale(&self, sale: &Sale, entry: Option<&AdminAction>) -> LedgerResult<()> {
        sales::create(self, sale, entry).await
    }

    async fn sale(&self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        sales::load(&mut conn, id).await
    }

    async fn sale_settings(&self, id: SaleId) -> LedgerResult<Option<Sale>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        sales::settings(&mut conn, id).await
    }

    async fn change_sale(
        &self,
        id: SaleId,
        change: SaleChange<'_>,
        audit: Option<&Audit<'_, SaleRecord>>,
    ) -> LedgerResult<SaleRecord> {
        sales::change(self, id, change, audit).await
    }

    async fn admitting_sales(&self) -> LedgerResult<Vec<AdmissionPlan>> {
        sales::admitting(&self.pool).await
    }

    async fn stats(&self, id: SaleId) -> LedgerResult<LedgerStats> {
        sales::stats(&self.pool, id).await
    }

    async fn snapshot(&self, id: SaleId) -> LedgerResult<SaleSnapshot> {
        let free = sales::free_stock(&self.pool, id).await?;
        let (live, bought) = attempts::live(&self.pool, id).await?;
        let buyers = attempts::buyers(&self.pool, id).await?;
        Ok(SaleSnapshot {
            free,
            live,
            bought,
            buyers,
            reset: true,
        })
    }

    async fn free_stock(&self, id: SaleId) -> LedgerResult<crate::domain::Stock> {
        sales::free_stock(&self.pool, id).await
    }

    async fn record_admissions(
        &self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<()> {
        metered("record_admissions", async {
            let mut tx = self.write().await?;
            super::flows::record_admissions(&mut *tx, plan, admitted).await?;
            tx.commit().await.map_err(db_error)
        })
        .await
    }

    async fn attempt(&self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        attempts::load(&mut conn, id).await
    }

    async fn list_sales(
        &self,
        status: Option<SaleStatus>,
        before: Option<SaleId>,
        limit: u32,
    ) -> LedgerResult<Vec<SaleSummary>> {
        support::sales(&self.pool, status, before, limit).await
    }

    async fn list_attempts(
        &self,
        sale: SaleId,
        query: &AttemptQuery,
    ) -> LedgerResult<Vec<AttemptRecord>> {
        support::attempts(&self.pool, sale, query).await
    }

    async fn trail(&self, id: AttemptId) -> LedgerResult<Vec<TransitionRow>> {
        support::trail(&self.pool, id).await
    }

    async fn payment_events(&self, id: AttemptId) -> LedgerResult<Vec<PaymentEventRow>> {
        support::payment_events(&self.pool, id).await
    }

    async fn record_figures(&self, figures: &SaleFigures) -> LedgerResult<()> {
        figures::record(self, figures).await
    }

    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>> {
        figures::since(&self.pool, sale, since).await
    }

    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64> {
        figures::prune(self, before).await
    }

    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        operators::create_key(self, key, key_hash, entry).await
    }

    async fn admin_key(&self, key_hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
        operators::key(&self.pool, key_hash).await
    }

    async fn admin_keys(&self) -> LedgerResult<Vec<AdminKeyRow>> {
        operators::keys(&self.pool).await
    }

    async fn revoke_admin_key(
        &self,
        name: &str,
        audit: &Audit<'_, AdminKeyRow>,
    ) -> LedgerResult<Option<AdminKeyRow>> {
        operators::revoke_key(self, name, audit).await
    }

    async fn admin_audit(&self, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
        operators::audit(&self.pool, query).await
    }

    async fn apply(
        &self,
        id: AttemptId,
        user: Option<&UserId>,
        event: AttemptEvent,
        take: Option<&Take>,
    ) -> LedgerResult<Applied> {
        metered("apply", async {
            let mut tx = self.write().await?;
            let outcome = super::transition::apply_in(&mut *tx, id, user, event, take).await?;
            tx.commit().await.map_err(db_error)?;
            outcome
        })
        .await
    }

    async fn refund(
        &self,
        id: AttemptId,
        audit: &Audit<'_, AttemptRecord>,
    ) -> LedgerResult<Applied> {
        metered("apply", async {
            let mut tx = self.write().await?;
            let outcome = super::flows::refund(&mut *tx, id, audit).await?;
            tx.commit().await.map_err(db_error)?;
            outcome
        })
        .await
    }

    async fn payment_event(
        &self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<PaymentApplied> {
        metered("payment_event", async {
            let mut tx = self.write().await?;
            let applied =
                super::flows::payment_event(&mut *tx, provider_event_id, reference, succeeded)
                    .await?;
            tx.commit().await.map_err(db_error)?;
            Ok(applied)
        })
        .await
    }

    async fn expire_due(&self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<Applied>> {
        metered("expire_due", async {
            let mut tx = self.write().await?;
            let expired = super::flows::expire_due(&mut *tx, event, limit).await?;
            tx.commit().await.map_err(db_error)?;
            Ok(expired)
        })
        .await
    }

    async fn saved_response(
        &self,
        user: &UserId,
        key: &str,
    ) -> LedgerResult<Option<SavedResponse>> {
        idempotency::saved_response(&self.pool, user, key).await
    }

    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool> {
        idempotency::reserve_key(&self.pool, user, key, request_hash, stale_after_secs).await
    }

    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()> {
        idempotency::release_key(&self.pool, user, key).await
    }

    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()> {
        idempotency::save_response(&self.pool, user, key, saved).await
    }

    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64> {
        idempotency::purge_saved_responses(&self.pool, older_than_secs).await
    }

    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>> {
        outbox::pending_events(&self.pool, limit, after).await
    }

    async fn pending_syncs(
        &self,
        older_than_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<PendingSync>> {
        queue_sync::pending(&self.pool, older_than_ms, limit).await
    }

    async fn sales_behind_store(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::behind_store(&self.pool, limit).await
    }

    async fn store_followed(&self, id: SaleId, version: u64) -> LedgerResult<()> {
        sales::store_followed(self, id, version).await
    }

    async fn sales_settings_to_check(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::settings_to_check(&self.pool, limit).await
    }

    async fn sales_followed_within(
        &self,
        within_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::followed_within(&self.pool, within_ms, limit).await
    }

    async fn mark_synced(&self, ids: &[i64]) -> LedgerResult<()> {
        queue_sync::mark(self, ids).await
    }

    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)> {
        queue_sync::backlog(&self.pool).await
    }

    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>> {
        queue_sync::recent(&self.pool, within_ms, limit).await
    }

    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64> {
        queue_sync::prune(self, older_than_ms).await
    }

    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()> {
        outbox::mark_published(self, ids).await
    }

    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)> {
        outbox::outbox_backlog(&self.pool).await
    }

    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
        outbox::record_refusal(self, id, max_tries).await
    }

    /// One process owns the SQLite file: its relay always holds the lease.
    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>> {
        struct Always;
        #[async_trait]
        impl RelayLease for Always {
            async fn alive(&mut self) -> bool {
                true
            }
        }
        Ok(Some(Box::new(Always)))
    }
}
