//! The ledger fails fast while the database is down: a call that finds it unreachable (its
//! error says so, and a connection of its own to the database fails too: a busy pool is no
//! outage) opens the breaker, and every call after it answers `Unavailable` (503 + Retry-After) at once,
//! rather than each waiting out the pool's acquire timeout. A probe pings the database every
//! [`PROBE_EVERY`] while the breaker is open and closes it on the first answer, so service
//! resumes within that of the database's return. Paths that need only the queue store (join,
//! a waiting user's status) never wait on it either way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::*;

/// How often the probe asks a down database whether it is back.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long one probe waits for the database.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A ledger behind a breaker.
pub struct Guarded {
    inner: Arc<dyn Ledger>,
    /// Open: the database was found unreachable and has not answered a probe since.
    open: Arc<AtomicBool>,
    /// A caller is asking the database whether it is there.
    checking: AtomicBool,
}

impl Guarded {
    pub fn new(inner: Arc<dyn Ledger>) -> Self {
        Guarded {
            inner,
            open: Arc::new(AtomicBool::new(false)),
            checking: AtomicBool::new(false),
        }
    }

    /// Whether calls are being refused now.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn check(&self) -> LedgerResult<()> {
        if self.is_open() {
            return Err(LedgerError::Unavailable(
                "the ledger's database is unreachable (failing fast until it answers)".into(),
            ));
        }
        Ok(())
    }

    /// Opens the breaker on an unreachable database, and starts the probe that closes it. An
    /// `Unavailable` is not enough: a pool that is only busy (a burst of holds) times out as a
    /// database that is down does, so one caller at a time asks the database directly first.
    async fn observe(&self, unavailable: bool) {
        if !unavailable || self.is_open() {
            return;
        }
        if self.checking.swap(true, Ordering::AcqRel) {
            return; // another caller is asking
        }
        let reachable = self.inner.reachable().await;
        self.checking.store(false, Ordering::Release);
        if reachable || self.open.swap(true, Ordering::AcqRel) {
            return;
        }
        metrics::counter!("sluice_ledger_breaker_opened_total").increment(1);
        metrics::gauge!("sluice_ledger_breaker_open").set(1.0);
        tracing::warn!("ledger unreachable: failing fast until it answers a probe");
        let (inner, open) = (self.inner.clone(), self.open.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                if let Ok(Ok(())) = tokio::time::timeout(PROBE_TIMEOUT, inner.ping()).await {
                    open.store(false, Ordering::Release);
                    metrics::gauge!("sluice_ledger_breaker_open").set(0.0);
                    tracing::info!("ledger answers again");
                    return;
                }
            }
        });
    }
}

/// A call through the breaker: refused at once while it is open; an unreachable database
/// opens it.
macro_rules! guarded {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {{
        $self.check()?;
        let result = $self.inner.$method($($arg),*).await;
        $self
            .observe(matches!(result, Err(LedgerError::Unavailable(_))))
            .await;
        result
    }};
}

#[async_trait]
impl Ledger for Guarded {
    /// Start-up's own business: never refused.
    async fn migrate(&self) -> LedgerResult<()> {
        self.inner.migrate().await
    }
    async fn ping(&self) -> LedgerResult<()> {
        guarded!(self.ping())
    }
    async fn reachable(&self) -> bool {
        self.inner.reachable().await
    }
    async fn create_sale(&self, sale: &Sale, entry: Option<&AdminAction>) -> LedgerResult<()> {
        guarded!(self.create_sale(sale, entry))
    }
    async fn sale(&self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        guarded!(self.sale(id))
    }
    async fn sale_settings(&self, id: SaleId) -> LedgerResult<Option<Sale>> {
        guarded!(self.sale_settings(id))
    }
    async fn change_sale(
        &self,
        id: SaleId,
        change: SaleChange<'_>,
        audit: Option<&Audit<'_, SaleRecord>>,
    ) -> LedgerResult<SaleRecord> {
        guarded!(self.change_sale(id, change, audit))
    }
    async fn admitting_sales(&self) -> LedgerResult<Vec<AdmissionPlan>> {
        guarded!(self.admitting_sales())
    }
    async fn stats(&self, id: SaleId) -> LedgerResult<LedgerStats> {
        guarded!(self.stats(id))
    }
    async fn snapshot(&self, id: SaleId) -> LedgerResult<SaleSnapshot> {
        guarded!(self.snapshot(id))
    }
    async fn free_stock(&self, id: SaleId) -> LedgerResult<crate::domain::Stock> {
        guarded!(self.free_stock(id))
    }
    async fn record_admissions(
        &self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<()> {
        guarded!(self.record_admissions(plan, admitted))
    }
    async fn attempt(&self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        guarded!(self.attempt(id))
    }
    async fn list_sales(
        &self,
        status: Option<SaleStatus>,
        before: Option<SaleId>,
        limit: u32,
    ) -> LedgerResult<Vec<SaleSummary>> {
        guarded!(self.list_sales(status, before, limit))
    }
    async fn list_attempts(
        &self,
        sale: SaleId,
        query: &AttemptQuery,
    ) -> LedgerResult<Vec<AttemptRecord>> {
        guarded!(self.list_attempts(sale, query))
    }
    async fn trail(&self, id: AttemptId) -> LedgerResult<Vec<TransitionRow>> {
        guarded!(self.trail(id))
    }
    async fn payment_events(&self, id: AttemptId) -> LedgerResult<Vec<PaymentEventRow>> {
        guarded!(self.payment_events(id))
    }
    async fn record_figures(&self, figures: &SaleFigures) -> LedgerResult<()> {
        guarded!(self.record_figures(figures))
    }
    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>> {
        guarded!(self.figures(sale, since))
    }
    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64> {
        guarded!(self.prune_figures(before))
    }
    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        guarded!(self.create_admin_key(key, key_hash, entry))
    }
    async fn admin_key(&self, key_hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
        guarded!(self.admin_key(key_hash))
    }
    async fn admin_keys(&self) -> LedgerResult<Vec<AdminKeyRow>> {
        guarded!(self.admin_keys())
    }
    async fn revoke_admin_key(
        &self,
        name: &str,
        audit: &Audit<'_, AdminKeyRow>,
    ) -> LedgerResult<Option<AdminKeyRow>> {
        guarded!(self.revoke_admin_key(name, audit))
    }
    async fn admin_audit(&self, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
        guarded!(self.admin_audit(query))
    }
    async fn apply(
        &self,
        id: AttemptId,
        user: Option<&UserId>,
        event: AttemptEvent,
        take: Option<&Take>,
    ) -> LedgerResult<Applied> {
        guarded!(self.apply(id, user, event, take))
    }
    async fn refund(
        &self,
        id: AttemptId,
        audit: &Audit<'_, AttemptRecord>,
    ) -> LedgerResult<Applied> {
        guarded!(self.refund(id, audit))
    }
    async fn payment_event(
        &self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<PaymentApplied> {
        guarded!(self.payment_event(provider_event_id, reference, succeeded))
    }
    async fn expire_due(&self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<Applied>> {
        guarded!(self.expire_due(event, limit))
    }
    async fn saved_response(
        &self,
        user: &UserId,
        key: &str,
    ) -> LedgerResult<Option<SavedResponse>> {
        guarded!(self.saved_response(user, key))
    }
    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool> {
        guarded!(self.reserve_key(user, key, request_hash, stale_after_secs))
    }
    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()> {
        guarded!(self.release_key(user, key))
    }
    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()> {
        guarded!(self.save_response(user, key, saved))
    }
    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64> {
        guarded!(self.purge_saved_responses(older_than_secs))
    }
    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>> {
        guarded!(self.pending_events(limit, after))
    }
    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()> {
        guarded!(self.mark_published(ids))
    }
    async fn pending_syncs(
        &self,
        older_than_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<PendingSync>> {
        guarded!(self.pending_syncs(older_than_ms, limit))
    }
    async fn mark_synced(&self, ids: &[i64]) -> LedgerResult<()> {
        guarded!(self.mark_synced(ids))
    }
    async fn sales_behind_store(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        guarded!(self.sales_behind_store(limit))
    }
    async fn store_followed(&self, id: SaleId, version: u64) -> LedgerResult<()> {
        guarded!(self.store_followed(id, version))
    }

    async fn sales_settings_to_check(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        guarded!(self.sales_settings_to_check(limit))
    }

    async fn sales_followed_within(
        &self,
        within_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<(SaleId, u64)>> {
        guarded!(self.sales_followed_within(within_ms, limit))
    }
    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)> {
        guarded!(self.sync_backlog())
    }
    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>> {
        guarded!(self.recently_synced(within_ms, limit))
    }
    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64> {
        guarded!(self.prune_synced(older_than_ms))
    }
    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)> {
        guarded!(self.outbox_backlog())
    }
    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
        guarded!(self.record_refusal(id, max_tries))
    }
    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>> {
        guarded!(self.relay_lease())
    }
}
