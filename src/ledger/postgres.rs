//! The PostgreSQL dialect of the SQL ledger (migrations in `migrations/postgres`): what really
//! differs from SQLite, and nothing else. The ledger itself is `ledger/sql`, compiled once for
//! each dialect; its statements take the fragments below (`now!()`, row locks, lists) where
//! the two databases spell a thing differently.
//!
//! Here: the pool, how a write transaction begins, how an error is classified, the relay's
//! lease (a session advisory lock), and the statements over arrays (`unnest`, `ANY`,
//! `generate_series`, the hold's claim by row address).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{AdmissionPlan, LedgerError, LedgerResult, RelayLease};
use crate::domain::{AttemptId, Decision, SaleId};
use crate::queue::Admitted;

/// The database's clock.
macro_rules! now {
    () => {
        "now()"
    };
}

/// The database's clock as it reads at the statement, not at the transaction's start: rows
/// stamped with it (the outbox, the queue-sync log) are ordered as they were written, also
/// across transactions that waited for each other's locks.
macro_rules! clock {
    () => {
        "clock_timestamp()"
    };
}

/// The database's clock plus a number of seconds (an expression of the statement).
macro_rules! secs_from_now {
    ($secs:literal) => {
        concat!("now() + make_interval(secs => ", $secs, ")")
    };
}

/// The database's clock less a number of milliseconds (a bigint parameter).
macro_rules! ms_before_now {
    ($ms:literal) => {
        concat!("now() - make_interval(secs => ", $ms, " / 1000.0::float8)")
    };
}

/// A row lock clause: PostgreSQL locks rows; SQLite's write transaction holds the database.
macro_rules! row_lock {
    ($clause:literal) => {
        $clause
    };
}

/// A [`TextList`](crate::ledger::sql_types::TextList) parameter as rows of one column, `value`.
macro_rules! each_text {
    ($list:literal) => {
        concat!("unnest(", $list, "::text[]) AS list(value)")
    };
}

// The one SQL ledger, compiled for this dialect (and again for the other: on purpose).
#[allow(clippy::duplicate_mod)]
#[path = "sql/mod.rs"]
mod sql;

pub use sql::attempts::CLAIM_SEAT;

pub use sql::SqlLedger as PgLedger;

/// Connections, rows and transactions of this dialect.
pub(crate) type Db = sqlx::Postgres;
/// What the breaker connects with to ask whether the database is there.
pub(crate) type Options = PgConnectOptions;
pub(crate) type Conn = PgConnection;

/// The migrations of this dialect.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl PgLedger {
    /// Builds the pool without connecting, so sluice starts (not ready) while PostgreSQL is
    /// down; the breaker fails fast while it stays down.
    pub fn new(url: &str, max_connections: u32, acquire_timeout: Duration) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options.clone());
        Ok(PgLedger::from_parts(pool, Some(options)))
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

/// A write transaction.
pub(crate) async fn begin_write(
    pool: &sqlx::Pool<Db>,
) -> Result<sqlx::Transaction<'static, Db>, sqlx::Error> {
    pool.begin().await
}

/// Whether the database answers a connection of its own, not the pool's: a pool that is only
/// busy does not read as a database that is down.
pub(crate) async fn reachable(options: &PgConnectOptions) -> bool {
    use sqlx::{ConnectOptions, Connection};
    let attempt = async {
        let mut conn = options.connect().await?;
        sqlx::query("SELECT 1").execute(&mut conn).await?;
        conn.close().await
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), attempt).await,
        Ok(Ok(()))
    )
}

/// Any constant shared by every sluice: the advisory lock of the relay.
const RELAY_LOCK: i64 = 0x51_01_CE_0E_7E_47;

/// A session advisory lock on a connection of its own: held while the connection lives, freed
/// by PostgreSQL if the relay's process dies.
struct PgRelayLease(PgConnection);

#[async_trait::async_trait]
impl RelayLease for PgRelayLease {
    async fn alive(&mut self) -> bool {
        sqlx::query("SELECT 1").execute(&mut self.0).await.is_ok()
    }
}

/// The right to relay: one relay at a time among every replica.
pub(crate) async fn relay_lease(
    conn: sqlx::pool::PoolConnection<Db>,
) -> LedgerResult<Option<Box<dyn RelayLease>>> {
    let mut conn = conn.detach();
    let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(RELAY_LOCK)
        .fetch_one(&mut conn)
        .await
        .map_err(db_error)?;
    Ok(held.then(|| Box::new(PgRelayLease(conn)) as Box<dyn RelayLease>))
}

/// Claims up to `$3` free units of sale `$1` for attempt `$2`, returning their ids. The free
/// units are picked and locked by an uncorrelated sub-select, which PostgreSQL runs once (an
/// InitPlan), then updated by row address. Written as `unit_id IN (SELECT … LIMIT $3 FOR UPDATE
/// SKIP LOCKED)`, the planner may run the locking sub-select again for every unit of the sale
/// (a nested-loop semi-join, its choice when the table's statistics predate the sale's units,
/// as right after a sale is created): in the benchmark, holds of a new sale stalled for
/// minutes that way. The rows are locked by this transaction, so their addresses hold still.
///
/// Run after [`FREE_UNITS_BY_INDEX`] in the same transaction.
pub const CLAIM_FREE_UNITS: &str = "UPDATE stock_units SET attempt_id = $2
     WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
         LIMIT $3 FOR UPDATE SKIP LOCKED))
     RETURNING unit_id";

/// Free units are found through the free-units index, never by a sequential scan. For a
/// `LIMIT`, the planner likes a sequential scan when its statistics say free rows are many,
/// reckoning it meets some early; but a new sale's units are stored behind every older sale's
/// rows, so each hold would read all of those first (`docs/benchmarks.md` has the figures).
/// For the rest of the hold transaction, whose statements go by key, the setting changes
/// nothing.
pub const FREE_UNITS_BY_INDEX: &str = "SET LOCAL enable_seqscan = off";

/// Claims up to `n` free units of a quantity sale for the attempt (skipping those another hold
/// is claiming right now, so holds never wait on each other); the ids claimed.
pub(crate) async fn claim_free_units(
    conn: &mut PgConnection,
    id: AttemptId,
    n: u32,
) -> LedgerResult<Vec<String>> {
    sqlx::query(FREE_UNITS_BY_INDEX)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    sqlx::query_scalar(CLAIM_FREE_UNITS)
        .bind(id.sale.0)
        .bind(id.local)
        .bind(i64::from(n))
        .fetch_all(conn)
        .await
        .map_err(db_error)
}

/// Inserts units "from + 1" to "from + n" of a quantity sale.
pub(crate) async fn insert_numbered_units(
    conn: &mut PgConnection,
    sale: SaleId,
    from: i64,
    n: u32,
) -> LedgerResult<()> {
    sqlx::query(
        "INSERT INTO stock_units (sale_id, unit_id)
         SELECT $1, CAST($2 + g AS TEXT) FROM generate_series(1, $3) g",
    )
    .bind(sale.0)
    .bind(from)
    .bind(i64::from(n))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// One statement for the batch: its ids as an array.
pub(crate) async fn audit_all(
    conn: &mut PgConnection,
    ids: &[AttemptId],
    decision: &Decision,
) -> LedgerResult<()> {
    let ids: Vec<Uuid> = ids.iter().map(|id| id.local).collect();
    sqlx::query(concat!(
        "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause, at)
         SELECT unnest($1::uuid[]), $2, $3, $4, $5, ",
        now!()
    ))
    .bind(&ids)
    .bind(decision.from.name())
    .bind(decision.to.name())
    .bind(decision.to.reason().map(|r| r.as_str()))
    .bind(decision.event.as_str())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// One statement for the batch: its columns as arrays. The ids that were new.
pub(crate) async fn insert_admitted(
    conn: &mut PgConnection,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> LedgerResult<Vec<Uuid>> {
    let ids: Vec<Uuid> = admitted.iter().map(|a| a.attempt.local).collect();
    let users: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    let seqs: Vec<i64> = admitted.iter().map(|a| a.seq as i64).collect();
    sqlx::query_scalar(
        "INSERT INTO attempts (id, sale_id, user_id, seq, state, admission_expires_at)
         SELECT id, $1, user_id, seq, 'ADMITTED', now() + make_interval(secs => $5)
         FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS t(id, user_id, seq)
         ON CONFLICT (id) DO NOTHING RETURNING id",
    )
    .bind(plan.sale.0)
    .bind(&ids)
    .bind(&users)
    .bind(&seqs)
    .bind(plan.admission_ttl_secs as f64)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// Marks outbox rows published, in one statement.
pub(crate) async fn mark_published(conn: &mut PgConnection, ids: &[Uuid]) -> LedgerResult<()> {
    sqlx::query("UPDATE outbox SET published_at = now(), tries = tries + 1 WHERE id = ANY($1)")
        .bind(ids)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Marks queue-sync rows applied, in one statement.
pub(crate) async fn mark_synced(conn: &mut PgConnection, ids: &[i64]) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE queue_sync SET applied_at = now() WHERE id = ANY($1) AND applied_at IS NULL",
    )
    .bind(ids)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}
