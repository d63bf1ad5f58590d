//! The SQLite dialect of the SQL ledger, the embedded default (migrations in
//! `migrations/sqlite`): the same guarantees as PostgreSQL — conditional stock (a unit has one
//! holder), unique payment event ids, a transition and its outbox row in one transaction — with
//! writers serialised by `BEGIN IMMEDIATE`, so row locks are not needed. Times are stored as
//! Unix milliseconds and lists of seats as JSON arrays (`ledger/sql_types.rs`).
//!
//! Here: the file and its pool, how a write transaction begins, how an error is classified,
//! and the statements over lists (`json_each`, a recursive series, one row at a time).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqliteConnection;
use uuid::Uuid;

use super::{AdmissionPlan, LedgerError, LedgerResult, RelayLease};
use crate::domain::{AttemptId, Decision, DomainEvent, SaleId};
use crate::queue::Admitted;
use crate::queue::SyncChange;

/// The database's clock, in Unix milliseconds.
macro_rules! now {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The database's clock as it reads at the statement (writers are serial: rows stamped with it
/// are ordered as they were written).
macro_rules! clock {
    () => {
        now!()
    };
}

/// The database's clock plus a number of seconds (an expression of the statement).
macro_rules! secs_from_now {
    ($secs:literal) => {
        concat!("(", now!(), " + 1000 * (", $secs, "))")
    };
}

/// The database's clock less a number of milliseconds (a bigint parameter).
macro_rules! ms_before_now {
    ($ms:literal) => {
        concat!("(", now!(), " - ", $ms, ")")
    };
}

/// A row lock clause: the write transaction holds the whole database, so none is needed.
macro_rules! row_lock {
    ($clause:literal) => {
        ""
    };
}

/// A [`TextList`](crate::ledger::sql_types::TextList) parameter as rows of one column, `value`.
macro_rules! each_text {
    ($list:literal) => {
        concat!("json_each(", $list, ")")
    };
}

/// A column matched against an [`Ids`](crate::ledger::sql_types::Ids) parameter (a JSON
/// array of hex ids; ids are 16-byte blobs here).
macro_rules! in_ids {
    ($list:literal) => {
        concat!("IN (SELECT unhex(value) FROM json_each(", $list, "))")
    };
}

// The one SQL ledger, compiled for this dialect (and again for the other: on purpose).
#[allow(clippy::duplicate_mod)]
#[path = "sql/mod.rs"]
mod sql;

pub use sql::SqlLedger as SqliteLedger;

/// Connections, rows and transactions of this dialect.
pub(crate) type Db = sqlx::Sqlite;
/// What the breaker connects with to ask whether the database is there.
pub(crate) type Options = ();
pub(crate) type Conn = SqliteConnection;

/// The migrations of this dialect.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

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
        // The file cannot go away, and its busy moments are no outage: no breaker.
        Ok(SqliteLedger::from_parts(pool, None))
    }
}

/// Maps a database error: connection trouble is `Unavailable` (503), the rest `Other`.
pub(crate) fn db_error(e: sqlx::Error) -> LedgerError {
    match &e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::WorkerCrashed => LedgerError::Unavailable(e.to_string()),
        _ => LedgerError::Other(e.to_string()),
    }
}

/// A write transaction: takes the database's write lock at once, so two writers never
/// deadlock upgrading a read lock.
pub(crate) async fn begin_write(
    pool: &sqlx::Pool<Db>,
) -> Result<sqlx::Transaction<'static, Db>, sqlx::Error> {
    pool.begin_with("BEGIN IMMEDIATE").await
}

/// The file is always there (no breaker asks).
pub(crate) async fn reachable(_: &()) -> bool {
    true
}

/// One process owns the SQLite file: its relay always holds the lease.
pub(crate) async fn relay_lease(
    _: sqlx::pool::PoolConnection<Db>,
) -> LedgerResult<Option<Box<dyn RelayLease>>> {
    struct Always;
    #[async_trait::async_trait]
    impl RelayLease for Always {
        async fn alive(&mut self) -> bool {
            true
        }
    }
    Ok(Some(Box::new(Always)))
}

/// The attempts of `users` in the sale, `(user, attempt, state)`, by the sale-and-user index.
pub(crate) async fn attempts_of_users(
    conn: &mut SqliteConnection,
    sale: SaleId,
    users: &[String],
) -> LedgerResult<Vec<(String, Uuid, String)>> {
    sqlx::query_as(
        "SELECT user_id, id, state FROM attempts
         WHERE sale_id = $1 AND user_id IN (SELECT value FROM json_each($2))",
    )
    .bind(sale.0)
    .bind(crate::ledger::sql_types::TextList(users))
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// Nothing to do: SQLite plans by its indexes' shapes, not by statistics it has not gathered.
pub(crate) async fn by_index(_: &mut SqliteConnection) -> LedgerResult<()> {
    Ok(())
}

/// One row per attempt: SQLite has no array parameter.
pub(crate) async fn audit_all(
    conn: &mut SqliteConnection,
    ids: &[AttemptId],
    decision: &Decision,
) -> LedgerResult<()> {
    for id in ids {
        sql::attempts::audit(&mut *conn, *id, decision).await?;
    }
    Ok(())
}

/// One row per attempt; a retried batch inserts nothing twice. The ids that were new.
pub(crate) async fn insert_admitted(
    conn: &mut SqliteConnection,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> LedgerResult<Vec<Uuid>> {
    let mut inserted = Vec::with_capacity(admitted.len());
    for a in admitted {
        let done = sqlx::query(concat!(
            "INSERT INTO attempts (id, sale_id, user_id, seq, state, admitted_at, admission_expires_at, updated_at)
             VALUES ($1, $2, $3, $4, 'ADMITTED', ", now!(), ", ", secs_from_now!("$5"), ", ", now!(), ")
             ON CONFLICT (id) DO NOTHING"
        ))
        .bind(a.attempt.local)
        .bind(plan.sale.0)
        .bind(a.user.as_str())
        .bind(a.seq as i64)
        .bind(i64::from(plan.admission_ttl_secs))
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
        if done.rows_affected() == 1 {
            inserted.push(a.attempt.local);
        }
    }
    Ok(inserted)
}

/// New payment rows, `(reference, attempt)`, pending, one statement each; an attempt that
/// has one keeps it.
pub(crate) async fn insert_payments(
    conn: &mut SqliteConnection,
    payments: &[(Uuid, Uuid)],
) -> LedgerResult<()> {
    for (reference, attempt) in payments {
        sqlx::query(concat!(
            "INSERT INTO payments (reference, attempt_id, status, traceparent, created_at, updated_at)
             VALUES ($1, $2, 'pending', $3, ",
            now!(),
            ", ",
            now!(),
            ") ON CONFLICT (attempt_id) DO NOTHING"
        ))
        .bind(reference)
        .bind(attempt)
        .bind(crate::telemetry::traces::traceparent())
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// Outbox rows for `events`, one statement each.
pub(crate) async fn insert_events(
    conn: &mut SqliteConnection,
    events: &[DomainEvent],
) -> LedgerResult<()> {
    for event in events {
        sql::outbox::insert(&mut *conn, event).await?;
    }
    Ok(())
}

/// Queue-sync rows for `changes`, one statement each; their ids, in order.
pub(crate) async fn record_syncs(
    conn: &mut SqliteConnection,
    changes: &[(AttemptId, SyncChange)],
) -> LedgerResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(changes.len());
    for (id, change) in changes {
        ids.push(sql::queue_sync::record(&mut *conn, *id, *change).await?);
    }
    Ok(ids)
}

/// The hold rows of attempts of a quantity sale that took their units, one statement each.
pub(crate) async fn insert_quantity_holds(
    conn: &mut SqliteConnection,
    sale: SaleId,
    holds: &[(Uuid, u32)],
) -> LedgerResult<()> {
    for (attempt, n) in holds {
        let id = AttemptId {
            sale,
            local: *attempt,
        };
        let take = crate::domain::Take::Quantity(*n);
        sql::attempts::insert_holds(&mut *conn, sale, &[(id, &take)]).await?;
    }
    Ok(())
}

/// The attempts an instant sale's claims confirmed, `(attempt, user, join serial)`, and their
/// holds of one unit each (at the sale's unit price), two statements a claim.
pub(crate) async fn insert_claims(
    conn: &mut SqliteConnection,
    sale: SaleId,
    claims: &[(Uuid, &str, i64)],
) -> LedgerResult<()> {
    for (id, user, seq) in claims {
        sqlx::query(concat!(
            "INSERT INTO attempts (id, sale_id, user_id, seq, state, admitted_at,
                                   admission_expires_at, updated_at)
             VALUES ($1, $2, $3, $4, 'CONFIRMED', ",
            now!(),
            ", ",
            now!(),
            ", ",
            now!(),
            ")"
        ))
        .bind(id)
        .bind(sale.0)
        .bind(*user)
        .bind(seq)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
        sqlx::query(concat!(
            "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status, created_at,
                               ended_at, amount, currency)
             SELECT $1, $2, 1, '[]', 'confirmed', ",
            now!(),
            ", ",
            now!(),
            ", s.unit_price, s.currency FROM sales s WHERE s.id = $2"
        ))
        .bind(id)
        .bind(sale.0)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// Marks outbox rows published, one statement each.
pub(crate) async fn mark_published(conn: &mut SqliteConnection, ids: &[Uuid]) -> LedgerResult<()> {
    for id in ids {
        sqlx::query(concat!(
            "UPDATE outbox SET published_at = ",
            now!(),
            ", tries = tries + 1 WHERE id = $1"
        ))
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// Marks queue-sync rows applied, one statement each.
pub(crate) async fn mark_synced(conn: &mut SqliteConnection, ids: &[i64]) -> LedgerResult<()> {
    for id in ids {
        sqlx::query(concat!(
            "UPDATE queue_sync SET applied_at = ",
            now!(),
            " WHERE id = $1 AND applied_at IS NULL"
        ))
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}
