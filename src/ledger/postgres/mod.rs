//! The PostgreSQL ledger (sqlx, migrations in `migrations/postgres`).
//!
//! Layout: `sales.rs` (sales and their stats), `attempts.rs` (loading, and the statements of
//! `LedgerTx` in `ledger/transition.rs` that the shared transitions and flows run),
//! `figures.rs` (a sale's figures over time), `idempotency.rs`, `operators.rs` (admin keys and
//! the admin audit log), `outbox.rs` (the event row every transition writes), `queue_sync.rs`,
//! `support.rs` (support's reads). The trait impl below delegates, opening and committing the
//! transaction of each shared flow.

mod attempts;
mod figures;
mod idempotency;
mod operators;
mod outbox;
mod queue_sync;
mod sales;
mod support;

pub use attempts::{CLAIM_FREE_UNITS, FREE_UNITS_BY_INDEX};

use crate::ledger::metered;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use uuid::Uuid;

use super::*;

#[derive(Clone)]
pub struct PgLedger {
    pool: PgPool,
    /// How to reach the database without the pool (the breaker asks whether it is there).
    options: PgConnectOptions,
}

impl PgLedger {
    /// Builds the pool without connecting, so sluice starts (not ready) while PostgreSQL is down.
    pub fn new(url: &str, max_connections: u32, acquire_timeout: Duration) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options.clone());
        Ok(PgLedger { pool, options })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Maps a database error: connection trouble is `Unavailable` (503), the rest `Other`.
pub(crate) fn db_error(e: sqlx::Error) -> LedgerError {
    match &e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => LedgerError::Unavailable(e.to_string()),
        sqlx::Error::Database(d)
            if d.code()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")) =>
        {
            LedgerError::Unavailable(e.to_string())
        }
        _ => LedgerError::Other(e.to_string()),
    }
}

#[async_trait]
impl Ledger for PgLedger {
    async fn migrate(&self) -> LedgerResult<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await
            .map_err(|e| match e {
                sqlx::migrate::MigrateError::Execute(e) => db_error(e),
                other => LedgerError::Other(other.to_string()),
            })
    }

    /// A connection of its own, not the pool's: a pool that is only busy does not read as a
    /// database that is down.
    async fn reachable(&self) -> bool {
        use sqlx::{ConnectOptions, Connection};
        let attempt = async {
            let mut conn = self.options.connect().await?;
            sqlx::query("SELECT 1").execute(&mut conn).await?;
            conn.close().await
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), attempt).await,
            Ok(Ok(()))
        )
    }

    async fn ping(&self) -> LedgerResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(db_error)
    }

    async fn create_sale(&self, sale: &Sale, entry: Option<&AdminAction>) -> LedgerResult<()> {
        sales::create(&self.pool, sale, entry).await
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
        sales::change(&self.pool, id, change, audit).await
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
            let mut tx = self.pool.begin().await.map_err(db_error)?;
            super::flows::record_admissions(&mut *tx, plan, admitted).await?;
            tx.commit().await.map_err(db_error)
        })
        .await
    }

    async fn attempt(&self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        attempts::load(&self.pool, id).await
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
        figures::record(&self.pool, figures).await
    }

    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>> {
        figures::since(&self.pool, sale, since).await
    }

    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64> {
        figures::prune(&self.pool, before).await
    }

    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        operators::create_key(&self.pool, key, key_hash, entry).await
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
        operators::revoke_key(&self.pool, name, audit).await
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
        metered("apply", attempts::apply(&self.pool, id, user, event, take)).await
    }

    async fn refund(
        &self,
        id: AttemptId,
        audit: &Audit<'_, AttemptRecord>,
    ) -> LedgerResult<Applied> {
        metered("apply", attempts::refund(&self.pool, id, audit)).await
    }

    async fn payment_event(
        &self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<PaymentApplied> {
        metered("payment_event", async {
            let mut tx = self.pool.begin().await.map_err(db_error)?;
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
            let mut tx = self.pool.begin().await.map_err(db_error)?;
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
        idempotency::load(&self.pool, user, key).await
    }

    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool> {
        idempotency::reserve(&self.pool, user, key, request_hash, stale_after_secs).await
    }

    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()> {
        idempotency::release(&self.pool, user, key).await
    }

    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()> {
        idempotency::save(&self.pool, user, key, saved).await
    }

    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64> {
        idempotency::purge(&self.pool, older_than_secs).await
    }

    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>> {
        outbox::pending(&self.pool, limit, after).await
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
        sales::store_followed(&self.pool, id, version).await
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
        queue_sync::mark(&self.pool, ids).await
    }

    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)> {
        queue_sync::backlog(&self.pool).await
    }

    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>> {
        queue_sync::recent(&self.pool, within_ms, limit).await
    }

    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64> {
        queue_sync::prune(&self.pool, older_than_ms).await
    }

    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()> {
        outbox::mark_published(&self.pool, ids).await
    }

    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)> {
        outbox::backlog(&self.pool).await
    }

    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
        outbox::record_refusal(&self.pool, id, max_tries).await
    }

    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>> {
        outbox::relay_lease(&self.pool).await
    }
}
