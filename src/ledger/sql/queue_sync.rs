//! The queue-sync log: a transition's row, and its reads: what the queue store has not been seen to apply, what was
//! applied lately (for a replay), and pruning. Marking rows applied is the dialect's (a list).

use uuid::Uuid;

use super::{backlog_of, db_error, Conn};
use crate::domain::AttemptId;
use crate::ledger::{sync_rows_from, LedgerResult, PendingSync, SyncChange};

/// Writes the queue store's side of a transition (a queue-sync row); its id.
pub(crate) async fn record(
    conn: &mut Conn,
    id: AttemptId,
    change: SyncChange,
) -> LedgerResult<i64> {
    sqlx::query_scalar(concat!(
        "INSERT INTO queue_sync (sale_id, attempt_id, change, created_at)
         VALUES ($1, $2, $3, ",
        clock!(),
        ") RETURNING id"
    ))
    .bind(id.sale.0)
    .bind(id.local)
    .bind(change.as_str())
    .fetch_one(conn)
    .await
    .map_err(db_error)
}

pub(super) async fn pending(
    conn: &mut Conn,
    older_than_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(concat!(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync
         WHERE applied_at IS NULL AND created_at < ",
        ms_before_now!("$1"),
        " ORDER BY id LIMIT $2"
    ))
    .bind(older_than_ms as i64)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(sync_rows_from(rows))
}

pub(super) async fn backlog(conn: &mut Conn) -> LedgerResult<(u64, f64)> {
    let row =
        sqlx::query_as("SELECT count(*), min(created_at) FROM queue_sync WHERE applied_at IS NULL")
            .fetch_one(conn)
            .await
            .map_err(db_error)?;
    Ok(backlog_of(row))
}

pub(super) async fn recent(
    conn: &mut Conn,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(concat!(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync WHERE applied_at > ",
        ms_before_now!("$1"),
        " ORDER BY applied_at DESC LIMIT $2"
    ))
    .bind(within_ms as i64)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(sync_rows_from(rows))
}

pub(super) async fn prune(conn: &mut Conn, older_than_ms: u64) -> LedgerResult<u64> {
    let done = sqlx::query(concat!(
        "DELETE FROM queue_sync WHERE applied_at < ",
        ms_before_now!("$1")
    ))
    .bind(older_than_ms as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}
