//! The PostgreSQL dialect of the SQL ledger (migrations in `migrations/postgres`): what really
//! differs from SQLite, and nothing else. The ledger itself is `ledger/sql`, compiled once for
//! each dialect; its statements take the fragments below (`now!()`, row locks, lists) where
//! the two databases spell a thing differently.
//!
//! Here: the pool, how a write transaction begins, how an error is classified, the relay's
//! lease (a session advisory lock), and the statements over arrays (`unnest`, `ANY`).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{AdmissionPlan, LedgerError, LedgerResult, RelayLease};
use crate::domain::{AttemptId, Decision, DomainEvent, SaleId};
use crate::queue::Admitted;
use crate::queue::SyncChange;

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

/// A column matched against an [`Ids`](crate::ledger::sql_types::Ids) parameter.
macro_rules! in_ids {
    ($list:literal) => {
        concat!("= ANY(", $list, ")")
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

/// The attempts of `users` in the sale, `(user, attempt, state)`: one index probe a user, by
/// the sale and the user. The probe is a lateral subquery behind `OFFSET 0`, which the planner
/// cannot pull up into a join: as a join, or with the list a condition (`= ANY`, `IN`), a
/// planner whose statistics predate the sale's rows took the sale alone to the index and
/// hashed every attempt of the sale, so each batch read more than the last.
pub(crate) async fn attempts_of_users(
    conn: &mut PgConnection,
    sale: SaleId,
    users: &[String],
) -> LedgerResult<Vec<(String, Uuid, String)>> {
    sqlx::query_as(
        "SELECT u.user_id, a.id, a.state FROM unnest($2::text[]) AS u(user_id)
         CROSS JOIN LATERAL (SELECT id, state FROM attempts
                             WHERE sale_id = $1 AND user_id = u.user_id OFFSET 0) a",
    )
    .bind(sale.0)
    .bind(users)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// Rows found by index for the rest of the transaction (`LedgerTx::by_index`).
pub(crate) async fn by_index(conn: &mut PgConnection) -> LedgerResult<()> {
    sqlx::query("SET LOCAL enable_seqscan = off")
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
        "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause, trace_id, at)
         SELECT unnest($1::uuid[]), $2, $3, $4, $5, CAST($6 AS TEXT), ",
        now!()
    ))
    .bind(&ids)
    .bind(decision.from.name())
    .bind(decision.to.name())
    .bind(decision.to.reason().map(|r| r.as_str()))
    .bind(decision.event.as_str())
    .bind(crate::telemetry::traces::current_trace_id())
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

/// New payment rows, `(reference, attempt)`, pending, in one statement; an attempt that has
/// one keeps it.
pub(crate) async fn insert_payments(
    conn: &mut PgConnection,
    payments: &[(Uuid, Uuid)],
) -> LedgerResult<()> {
    let (references, attempts): (Vec<Uuid>, Vec<Uuid>) = payments.iter().copied().unzip();
    sqlx::query(
        "INSERT INTO payments (reference, attempt_id, status, traceparent, created_at, updated_at)
         SELECT reference, attempt_id, 'pending', CAST($3 AS TEXT), now(), now()
         FROM unnest($1::uuid[], $2::uuid[]) AS t(reference, attempt_id)
         ON CONFLICT (attempt_id) DO NOTHING",
    )
    .bind(&references)
    .bind(&attempts)
    .bind(crate::telemetry::traces::traceparent())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Outbox rows for `events`, in one statement, stamped in their order.
pub(crate) async fn insert_events(
    conn: &mut PgConnection,
    events: &[DomainEvent],
) -> LedgerResult<()> {
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let sales: Vec<Uuid> = events.iter().map(|e| e.sale_id.0).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let payloads = events
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LedgerError::Other(e.to_string()))?;
    sqlx::query(
        "INSERT INTO outbox (id, sale_id, event_type, payload, traceparent, created_at)
         SELECT id, sale_id, event_type, CAST(payload AS JSONB), CAST($5 AS TEXT), clock_timestamp()
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[])
              AS t(id, sale_id, event_type, payload)",
    )
    .bind(&ids)
    .bind(&sales)
    .bind(&kinds)
    .bind(&payloads)
    .bind(crate::telemetry::traces::traceparent())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Queue-sync rows for `changes`, in one statement; their ids, in order.
pub(crate) async fn record_syncs(
    conn: &mut PgConnection,
    changes: &[(AttemptId, SyncChange)],
) -> LedgerResult<Vec<i64>> {
    let sales: Vec<Uuid> = changes.iter().map(|(id, _)| id.sale.0).collect();
    let attempts: Vec<Uuid> = changes.iter().map(|(id, _)| id.local).collect();
    let kinds: Vec<&str> = changes.iter().map(|(_, c)| c.as_str()).collect();
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "WITH new AS (
           INSERT INTO queue_sync (sale_id, attempt_id, change, created_at)
           SELECT sale_id, attempt_id, change, clock_timestamp()
           FROM unnest($1::uuid[], $2::uuid[], $3::text[]) WITH ORDINALITY AS t(sale_id, attempt_id, change, n)
           ORDER BY n
           RETURNING id, attempt_id)
         SELECT new.id, t.n FROM new
         JOIN unnest($2::uuid[]) WITH ORDINALITY AS t(attempt_id, n) USING (attempt_id)",
    )
    .bind(&sales)
    .bind(&attempts)
    .bind(&kinds)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    let mut ids = vec![0; changes.len()];
    for (id, n) in rows {
        if let Some(slot) = ids.get_mut(n as usize - 1) {
            *slot = id;
        }
    }
    Ok(ids)
}

/// The hold rows of attempts of a quantity sale that took their units (`held`, at the sale's
/// unit price), in one statement.
pub(crate) async fn insert_quantity_holds(
    conn: &mut PgConnection,
    sale: SaleId,
    holds: &[(Uuid, u32)],
) -> LedgerResult<()> {
    let attempts: Vec<Uuid> = holds.iter().map(|(id, _)| *id).collect();
    let quantities: Vec<i32> = holds.iter().map(|(_, n)| *n as i32).collect();
    sqlx::query(
        "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status, created_at, amount,
                           currency)
         SELECT t.attempt_id, $1, t.quantity, '{}', 'held', now(),
                CAST(t.quantity * s.unit_price AS BIGINT), s.currency
         FROM unnest($2::uuid[], $3::int[]) AS t(attempt_id, quantity), sales s
         WHERE s.id = $1",
    )
    .bind(sale.0)
    .bind(&attempts)
    .bind(&quantities)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The attempts an instant sale's claims confirmed, `(attempt, user, join serial)`, and their
/// holds of one unit each (at the sale's unit price), in two statements.
pub(crate) async fn insert_claims(
    conn: &mut PgConnection,
    sale: SaleId,
    claims: &[(Uuid, &str, i64)],
) -> LedgerResult<()> {
    let ids: Vec<Uuid> = claims.iter().map(|c| c.0).collect();
    let users: Vec<&str> = claims.iter().map(|c| c.1).collect();
    let seqs: Vec<i64> = claims.iter().map(|c| c.2).collect();
    sqlx::query(
        "INSERT INTO attempts (id, sale_id, user_id, seq, state, admitted_at,
                               admission_expires_at, updated_at)
         SELECT id, $1, user_id, seq, 'CONFIRMED', now(), now(), now()
         FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS t(id, user_id, seq)",
    )
    .bind(sale.0)
    .bind(&ids)
    .bind(&users)
    .bind(&seqs)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    sqlx::query(
        "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status, created_at, ended_at,
                           amount, currency)
         SELECT t.id, $1, 1, '{}', 'confirmed', now(), now(), s.unit_price, s.currency
         FROM unnest($2::uuid[]) AS t(id), sales s WHERE s.id = $1",
    )
    .bind(sale.0)
    .bind(&ids)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
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
