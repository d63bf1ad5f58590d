//! The SQL ledger, written once and compiled for each dialect (`ledger/postgres.rs`,
//! `ledger/sqlite.rs`, which include this folder as their module `sql`). A statement here is the
//! same text on both databases: `$n` parameters, times and seat lists bound as
//! [`At`](crate::ledger::sql_types::At) and [`TextList`](crate::ledger::sql_types::TextList),
//! and the dialect's fragments where the two spell a thing differently (`now!()`,
//! `row_lock!()`, `each_text!()`, …). What really differs is the dialect's own code.
//!
//! Layout: this file (the pool, connections behind the breaker, the [`Ledger`] impl);
//! `tx.rs` (the statements of `LedgerTx` that the shared transitions and flows run);
//! `attempts.rs`, `sales.rs`, `stock.rs` (a quantity sale's counter), `figures.rs` (a sale's figures over time), `idempotency.rs`,
//! `push.rs` (Web Push subscriptions), `layouts.rs` (venue layouts), `phases.rs` (a sale's phases, lists and codes),
//! `operators.rs` (admin keys and the admin audit log), `outbox.rs`, `queue_sync.rs`,
//! `support.rs` (support's reads).

/// Runs `$flow` (an expression over `$tx`, the open transaction) in a write transaction and
/// commits what it returns `Ok`, from inside an async block or fn of the ledger.
macro_rules! in_write {
    ($ledger:expr, |$tx:ident| $flow:expr) => {
        async {
            let mut tx = $ledger.write().await?;
            let $tx = &mut *tx;
            let value = $flow.await?;
            tx.commit().await.map_err(db_error)?;
            Ok::<_, LedgerError>(value)
        }
    };
}

pub(super) mod attempts;
mod figures;
mod idempotency;
mod layouts;
mod operators;
pub(super) mod outbox;
mod payments;
mod phases;
mod push;
pub(super) mod queue_sync;
mod sales;
mod stock;
mod support;
mod tx;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Pool, Transaction};
use uuid::Uuid;

use super::{
    attempts_of_users, audit_all, begin_write, by_index, db_error, insert_admitted, insert_claims,
    insert_events, insert_payments, insert_quantity_holds, mark_published, mark_synced, reachable,
    record_syncs, relay_lease, Conn, Db, Options, MIGRATOR,
};

/// A row of this dialect.
type DbRow = <Db as sqlx::Database>::Row;
use crate::domain::{
    AdminAction, AttemptEvent, AttemptId, Refunding, Sale, SaleId, SaleSnapshot, SaleStatus, Take,
    UserId,
};
use crate::ledger::breaker::{Breaker, PROBE_EVERY, PROBE_TIMEOUT};
use crate::ledger::{
    batch, flows, metered, transition, AdminKeyRow, AdmissionPlan, Applied, AttemptQuery,
    AttemptRecord, Audit, AuditQuery, ClaimAsk, Claimed, EventAsk, IdempotencyLedger, LayoutLedger,
    LayoutSummary, Ledger, LedgerError, LedgerResult, LedgerStats, OpenPayment, OutboxEvent,
    OutboxLedger, PaymentApplied, PaymentEventRow, PaymentLedger, PendingSync, PhaseLedger,
    PushLedger, QueueSyncLedger, RelayLease, SaleChange, SaleFigures, SaleRecord, SaleSummary,
    SavedResponse, SupportLedger, TransitionRow,
};
use crate::queue::Admitted;

/// The ledger over one database of this dialect.
#[derive(Clone)]
pub struct SqlLedger {
    pool: Pool<Db>,
    /// How to reach the database without the pool, where it can go away (a server): the
    /// breaker asks with it whether the database is there.
    options: Option<Arc<Options>>,
    /// Fails fast while the database is down; none for a file that cannot go away.
    breaker: Option<Arc<Breaker>>,
}

impl SqlLedger {
    /// The ledger over `pool`; with `options`, behind a breaker that connects with them.
    pub(crate) fn from_parts(pool: Pool<Db>, options: Option<Options>) -> Self {
        SqlLedger {
            pool,
            breaker: options.as_ref().map(|_| Arc::default()),
            options: options.map(Arc::new),
        }
    }

    pub fn pool(&self) -> &Pool<Db> {
        &self.pool
    }

    /// A connection of the pool, taken through the breaker.
    async fn conn(&self) -> LedgerResult<PoolConnection<Db>> {
        self.through_breaker(async { self.pool.acquire().await.map_err(db_error) })
            .await
    }

    /// A write transaction, begun through the breaker.
    async fn write(&self) -> LedgerResult<Transaction<'static, Db>> {
        self.through_breaker(async { begin_write(&self.pool).await.map_err(db_error) })
            .await
    }

    async fn through_breaker<T>(
        &self,
        acquire: impl std::future::Future<Output = LedgerResult<T>>,
    ) -> LedgerResult<T> {
        let Some(breaker) = &self.breaker else {
            return acquire.await;
        };
        let result = breaker.take(acquire, || self.observe(breaker)).await;
        if let Err(LedgerError::Unavailable(_)) = &result {
            self.observe(breaker).await;
        }
        result
    }

    /// Asks whether the database is there, and opens the breaker if not, with a probe that
    /// pings the database until it answers.
    async fn observe(&self, breaker: &Arc<Breaker>) {
        let Some(options) = self.options.clone() else {
            return;
        };
        let pool = self.pool.clone();
        let probe = async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let ping = sqlx::query("SELECT 1").execute(&pool);
                if let Ok(Ok(_)) = tokio::time::timeout(PROBE_TIMEOUT, ping).await {
                    return;
                }
            }
        };
        breaker.observe(reachable(&options), probe).await;
    }
}

#[async_trait]
impl Ledger for SqlLedger {
    /// Start-up's own business: never refused by the breaker.
    async fn migrate(&self) -> LedgerResult<()> {
        MIGRATOR.run(&self.pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e) => db_error(e),
            other => LedgerError::Other(other.to_string()),
        })
    }

    async fn ping(&self) -> LedgerResult<()> {
        let mut conn = self.conn().await?;
        sqlx::query("SELECT 1")
            .execute(&mut *conn)
            .await
            .map(|_| ())
            .map_err(db_error)
    }

    async fn reachable(&self) -> bool {
        match &self.options {
            Some(options) => reachable(options).await,
            None => self.ping().await.is_ok(),
        }
    }

    async fn create_sale(&self, sale: &Sale, entry: Option<&AdminAction>) -> LedgerResult<()> {
        in_write!(self, |tx| flows::create_sale(tx, sale, entry)).await
    }

    async fn sale(&self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        sales::load(&mut *self.conn().await?, id).await
    }

    async fn sale_settings(&self, id: SaleId) -> LedgerResult<Option<Sale>> {
        sales::settings(&mut *self.conn().await?, id).await
    }

    async fn change_sale(
        &self,
        id: SaleId,
        change: SaleChange<'_>,
        audit: Option<&Audit<'_, SaleRecord>>,
    ) -> LedgerResult<SaleRecord> {
        in_write!(self, |tx| flows::change_sale(tx, id, change, audit)).await
    }

    async fn admitting_sales(&self) -> LedgerResult<Vec<AdmissionPlan>> {
        sales::admitting(&mut *self.conn().await?).await
    }

    async fn stats(&self, id: SaleId) -> LedgerResult<LedgerStats> {
        sales::stats(&mut *self.conn().await?, id).await
    }

    async fn snapshot(&self, id: SaleId) -> LedgerResult<SaleSnapshot> {
        let mut conn = self.conn().await?;
        let free = sales::free_stock(&mut conn, id).await?;
        let (live, bought) = attempts::live(&mut conn, id).await?;
        let buyers = attempts::buyers(&mut conn, id).await?;
        Ok(SaleSnapshot {
            free,
            live,
            bought,
            buyers,
            reset: true,
        })
    }

    async fn free_stock(&self, id: SaleId) -> LedgerResult<crate::domain::Stock> {
        sales::free_stock(&mut *self.conn().await?, id).await
    }

    async fn free_units(&self, id: SaleId) -> LedgerResult<Option<u32>> {
        stock::free(&mut *self.conn().await?, id).await
    }

    async fn record_admissions(
        &self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<AttemptId>> {
        let record = in_write!(self, |tx| flows::record_admissions(tx, plan, admitted));
        metered("record_admissions", record).await
    }

    async fn attempt(&self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        attempts::load(&mut *self.conn().await?, id).await
    }

    /// The write is committed even when the event is refused after an expiry: the expiry
    /// stands (`ledger/transition.rs`, `apply_in`).
    async fn apply(
        &self,
        id: AttemptId,
        user: Option<&UserId>,
        event: AttemptEvent,
        take: Option<&Take>,
    ) -> LedgerResult<Applied> {
        // (an event applied here asks no refund that sluice moves: Refund and payments come
        // through `refund` and `payment_event`)
        let apply = in_write!(self, |tx| transition::apply_in(
            tx,
            id,
            user,
            event,
            take,
            Refunding::Owed
        ));
        metered("apply", async { apply.await? }).await
    }

    async fn apply_all(
        &self,
        sale: SaleId,
        asks: &[EventAsk],
    ) -> LedgerResult<Vec<LedgerResult<Applied>>> {
        let apply = in_write!(self, |tx| batch::apply_all_in(tx, sale, asks));
        metered("apply", apply).await
    }

    async fn record_claims(
        &self,
        sale: SaleId,
        claims: &[ClaimAsk],
    ) -> LedgerResult<Vec<LedgerResult<Claimed>>> {
        let record = in_write!(self, |tx| batch::record_claims_in(tx, sale, claims));
        metered("record_claims", record).await
    }

    async fn refund(
        &self,
        id: AttemptId,
        audit: &Audit<'_, AttemptRecord>,
        refunding: Refunding,
    ) -> LedgerResult<Applied> {
        let refund = in_write!(self, |tx| flows::refund(tx, id, audit, refunding));
        metered("apply", async { refund.await? }).await
    }

    async fn payment_event(
        &self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
        late: Refunding,
    ) -> LedgerResult<PaymentApplied> {
        let event = in_write!(self, |tx| flows::payment_event(
            tx,
            provider_event_id,
            reference,
            succeeded,
            late
        ));
        metered("payment_event", event).await
    }

    async fn expire_due(&self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<Applied>> {
        let expire = in_write!(self, |tx| flows::expire_due(tx, event, limit));
        metered("expire_due", expire).await
    }
}

#[async_trait]
impl SupportLedger for SqlLedger {
    async fn list_sales(
        &self,
        status: Option<SaleStatus>,
        before: Option<SaleId>,
        limit: u32,
    ) -> LedgerResult<Vec<SaleSummary>> {
        support::sales(&mut *self.conn().await?, status, before, limit).await
    }

    async fn list_attempts(
        &self,
        sale: SaleId,
        query: &AttemptQuery,
    ) -> LedgerResult<Vec<AttemptRecord>> {
        support::attempts(&mut *self.conn().await?, sale, query).await
    }

    async fn trail(&self, id: AttemptId) -> LedgerResult<Vec<TransitionRow>> {
        support::trail(&mut *self.conn().await?, id).await
    }

    async fn payment_events(&self, id: AttemptId) -> LedgerResult<Vec<PaymentEventRow>> {
        support::payment_events(&mut *self.conn().await?, id).await
    }

    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| flows::create_admin_key(tx, key, key_hash, entry)).await
    }

    async fn admin_key(&self, key_hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
        operators::key(&mut *self.conn().await?, key_hash).await
    }

    async fn admin_keys(&self) -> LedgerResult<Vec<AdminKeyRow>> {
        operators::keys(&mut *self.conn().await?).await
    }

    async fn revoke_admin_key(
        &self,
        name: &str,
        audit: &Audit<'_, AdminKeyRow>,
    ) -> LedgerResult<Option<AdminKeyRow>> {
        in_write!(self, |tx| flows::revoke_admin_key(tx, name, audit)).await
    }

    async fn record_figures(&self, figures: &SaleFigures) -> LedgerResult<()> {
        figures::record(&mut *self.conn().await?, figures).await
    }

    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>> {
        figures::since(&mut *self.conn().await?, sale, since).await
    }

    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64> {
        figures::prune(&mut *self.conn().await?, before).await
    }

    async fn admin_audit(&self, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
        operators::audit(&mut *self.conn().await?, query).await
    }
}

#[async_trait]
impl IdempotencyLedger for SqlLedger {
    async fn saved_response(
        &self,
        user: &UserId,
        key: &str,
    ) -> LedgerResult<Option<SavedResponse>> {
        idempotency::load(&mut *self.conn().await?, user, key).await
    }

    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool> {
        let mut conn = self.conn().await?;
        idempotency::reserve(&mut conn, user, key, request_hash, stale_after_secs).await
    }

    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()> {
        idempotency::release(&mut *self.conn().await?, user, key).await
    }

    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()> {
        idempotency::save(&mut *self.conn().await?, user, key, saved).await
    }

    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64> {
        idempotency::purge(&mut *self.conn().await?, older_than_secs).await
    }
}

#[async_trait]
impl LayoutLedger for SqlLedger {
    async fn create_layout(
        &self,
        id: Uuid,
        layout: &crate::domain::venue::Layout,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            layouts::insert(&mut *tx, id, layout).await?;
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn layout(&self, id: Uuid) -> LedgerResult<Option<crate::domain::venue::Layout>> {
        layouts::load(&mut *self.conn().await?, id).await
    }

    async fn layouts(&self) -> LedgerResult<Vec<LayoutSummary>> {
        layouts::list(&mut *self.conn().await?).await
    }
}

#[async_trait]
impl PhaseLedger for SqlLedger {
    async fn phases(&self, sale: SaleId) -> LedgerResult<Vec<crate::domain::phase::Phase>> {
        phases::load(&mut *self.conn().await?, sale).await
    }

    async fn set_phases(
        &self,
        sale: SaleId,
        list: &[crate::domain::phase::Phase],
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            phases::replace(&mut *tx, sale, list).await?;
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn begin_phase(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
        admission: &crate::domain::Admission,
        per_user_limit: u32,
    ) -> LedgerResult<bool> {
        in_write!(self, |tx| async {
            if !phases::mark_begun(&mut *tx, sale, position, first_serial).await? {
                return Ok::<_, LedgerError>(false);
            }
            sales::write_admission(&mut *tx, sale, *admission).await?;
            phases::write_per_user_limit(&mut *tx, sale, per_user_limit).await?;
            Ok(true)
        })
        .await
    }

    async fn open_prequeue(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
    ) -> LedgerResult<bool> {
        in_write!(self, |tx| phases::open_prequeue(
            tx,
            sale,
            position,
            first_serial
        ))
        .await
    }

    async fn renumber_phases(&self, sale: SaleId) -> LedgerResult<u64> {
        in_write!(self, |tx| phases::renumber(tx, sale)).await
    }

    async fn add_members(
        &self,
        sale: SaleId,
        position: u32,
        users: &[String],
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<(u64, u64)> {
        in_write!(self, |tx| async {
            let mut added = 0;
            // In chunks: one statement binds a chunk as one list.
            for chunk in users.chunks(50_000) {
                added += phases::add_members(&mut *tx, sale, position, chunk).await?;
            }
            let total = phases::count_members(&mut *tx, sale, position).await?;
            if total > max {
                return Err(LedgerError::TooMany {
                    field: "user_ids",
                    what: "user ids on a list",
                    max,
                    would: total,
                });
            }
            flows::record_admin_action(&mut *tx, entry).await?;
            Ok::<_, LedgerError>((added, total))
        })
        .await
    }

    async fn members(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<String>> {
        phases::members(&mut *self.conn().await?, sale, position, after, limit).await
    }

    async fn is_member(&self, sale: SaleId, position: u32, user: &UserId) -> LedgerResult<bool> {
        phases::is_member(&mut *self.conn().await?, sale, position, user).await
    }

    async fn add_codes(
        &self,
        sale: SaleId,
        position: u32,
        codes: &[String],
        max_uses: u32,
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            phases::add_codes(&mut *tx, sale, position, codes, max_uses).await?;
            let total = phases::count_codes(&mut *tx, sale, position).await?;
            if total > max {
                return Err(LedgerError::TooMany {
                    field: "count",
                    what: "access codes",
                    max,
                    would: total,
                });
            }
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn codes(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<crate::ledger::AccessCode>> {
        phases::codes(&mut *self.conn().await?, sale, position, after, limit).await
    }

    async fn redeem(
        &self,
        sale: SaleId,
        position: u32,
        user: &UserId,
        code: Option<&str>,
    ) -> LedgerResult<crate::ledger::Redeemed> {
        use crate::ledger::Redeemed;
        // A user who redeemed before joins again without a write.
        if phases::redeemed_before(&mut *self.conn().await?, sale, position, user).await? {
            return Ok(Redeemed::Yes);
        }
        let Some(code) = code else {
            return Ok(Redeemed::No);
        };
        in_write!(self, |tx| async {
            if phases::redeemed_before(&mut *tx, sale, position, user).await? {
                return Ok::<_, LedgerError>(Redeemed::Yes);
            }
            phases::take_use(&mut *tx, sale, position, user, code).await
        })
        .await
    }

    async fn phase_counts(
        &self,
        sale: SaleId,
        ranges: &[Option<(u64, u64)>],
    ) -> LedgerResult<Vec<crate::ledger::PhaseCounts>> {
        phases::counts(&mut *self.conn().await?, sale, ranges).await
    }
}

#[async_trait]
impl PushLedger for SqlLedger {
    async fn save_push_subscription(
        &self,
        attempt: AttemptId,
        subscription: &crate::notify::web_push::Subscription,
    ) -> LedgerResult<()> {
        push::save(&mut *self.conn().await?, attempt, subscription).await
    }

    async fn take_push_subscriptions(
        &self,
        attempts: &[AttemptId],
    ) -> LedgerResult<Vec<(AttemptId, crate::notify::web_push::Subscription)>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        push::take(&mut *self.conn().await?, attempts).await
    }

    async fn purge_push_subscriptions(&self, older_than_secs: u64) -> LedgerResult<u64> {
        push::purge(&mut *self.conn().await?, older_than_secs).await
    }
}

#[async_trait]
impl OutboxLedger for SqlLedger {
    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>> {
        outbox::pending(&mut *self.conn().await?, limit, after).await
    }

    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()> {
        in_write!(self, |tx| mark_published(tx, ids)).await
    }

    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)> {
        outbox::backlog(&mut *self.conn().await?).await
    }

    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
        outbox::record_refusal(&mut *self.conn().await?, id, max_tries).await
    }

    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>> {
        relay_lease(self.conn().await?).await
    }
}

#[async_trait]
impl PaymentLedger for SqlLedger {
    async fn set_provider_payment(
        &self,
        attempt: AttemptId,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<String>> {
        payments::set_provider_payment(&mut *self.conn().await?, attempt, provider, id).await
    }

    async fn payment_by_provider_id(
        &self,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<(AttemptId, Uuid)>> {
        payments::by_provider_id(&mut *self.conn().await?, provider, id).await
    }

    async fn set_payment_failure(&self, reference: Uuid, failure: &str) -> LedgerResult<()> {
        payments::set_failure(&mut *self.conn().await?, reference, failure).await
    }

    async fn note_payment(&self, event_id: &str, reference: Uuid, kind: &str) -> LedgerResult<()> {
        payments::note(&mut *self.conn().await?, event_id, reference, kind).await?;
        Ok(())
    }

    async fn set_provider_refund(&self, attempt: AttemptId, refund_id: &str) -> LedgerResult<()> {
        payments::set_refund(&mut *self.conn().await?, attempt, refund_id).await
    }

    async fn open_payments(
        &self,
        due: bool,
        older_than_secs: u64,
        limit: u32,
    ) -> LedgerResult<Vec<OpenPayment>> {
        payments::open(&mut *self.conn().await?, due, older_than_secs, limit).await
    }
}

#[async_trait]
impl QueueSyncLedger for SqlLedger {
    async fn sales_behind_store(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::behind_store(&mut *self.conn().await?, limit).await
    }

    async fn store_followed(&self, id: SaleId, version: u64) -> LedgerResult<()> {
        sales::store_followed(&mut *self.conn().await?, id, version).await
    }

    async fn sales_settings_to_check(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::settings_to_check(&mut *self.conn().await?, limit).await
    }

    async fn sales_followed_within(
        &self,
        within_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<(SaleId, u64)>> {
        sales::followed_within(&mut *self.conn().await?, within_ms, limit).await
    }

    async fn pending_syncs(
        &self,
        older_than_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<PendingSync>> {
        queue_sync::pending(&mut *self.conn().await?, older_than_ms, limit).await
    }

    async fn mark_synced(&self, ids: &[i64]) -> LedgerResult<()> {
        in_write!(self, |tx| mark_synced(tx, ids)).await
    }

    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)> {
        queue_sync::backlog(&mut *self.conn().await?).await
    }

    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>> {
        queue_sync::recent(&mut *self.conn().await?, within_ms, limit).await
    }

    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64> {
        queue_sync::prune(&mut *self.conn().await?, older_than_ms).await
    }
}

/// A backlog from a `(count, oldest)` row: the count and the oldest's age in seconds, by this
/// process's clock.
/// Deletes the rows of `table` (one of this ledger's own, never a caller's word) created more
/// than `older_than_secs` ago.
async fn purge_older(
    conn: &mut Conn,
    table: &'static str,
    older_than_secs: u64,
) -> LedgerResult<u64> {
    let statement = format!(
        "DELETE FROM {table} WHERE created_at < {}",
        ms_before_now!("$1")
    );
    let done = sqlx::query(&statement)
        .bind(older_than_secs as i64 * 1000)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected())
}

fn backlog_of((count, oldest): (i64, Option<crate::ledger::sql_types::At>)) -> (u64, f64) {
    let age = oldest.map(|t| (Utc::now() - t.0).num_milliseconds().max(0) as f64 / 1000.0);
    (count as u64, age.unwrap_or(0.0))
}
