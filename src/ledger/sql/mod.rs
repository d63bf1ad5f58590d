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
//! `push.rs` (Web Push subscriptions), `layouts.rs` (venue layouts), `gates.rs` (gates and their sessions ended early), `phases.rs` (a sale's phases, lists and codes),
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
mod gates;
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
use chrono::Utc;
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
    AdminAction, AttemptEvent, AttemptId, Refunding, Sale, SaleId, SaleSnapshot, Take, UserId,
};
use crate::ledger::breaker::{Breaker, PROBE_EVERY, PROBE_TIMEOUT};
use crate::ledger::{
    batch, flows, metered, transition, AdmissionPlan, Applied, AttemptRecord, Audit, ClaimAsk,
    Claimed, EventAsk, Ledger, LedgerError, LedgerResult, LedgerStats, PaymentApplied, SaleChange,
    SaleRecord,
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
        crate::telemetry::caller::count_ledger_call();
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
