//! The queue-sync log's statements (SQLite): what the queue store has not been seen to apply,
//! marking it applied, what was applied lately (for a replay), and pruning.

use sqlx::SqlitePool;
use uuid::Uuid;

use super::{backlog_of, db_error, SqliteLedger, NOW_MS};
use crate::ledger::{LedgerResult, PendingSync};

pub(super) async fn pending(
    pool: &SqlitePool,
    older_than_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(&format!(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync
         WHERE applied_at IS NULL AND created_at < {NOW_MS} - ?
         ORDER BY id LIMIT ?"
    ))
    .bind(older_than_ms as i64)
    .bind(limit as i64)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sync_rows_from(rows))
}

pub(super) async fn mark(ledger: &SqliteLedger, ids: &[i64]) -> LedgerResult<()> {
    // One statement per row: SQLite has no array parameter.
    let mut tx = ledger.write().await?;
    for id in ids {
        sqlx::query(&format!(
            "UPDATE queue_sync SET applied_at = {NOW_MS} WHERE id = ? AND applied_at IS NULL"
        ))
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}

pub(super) async fn backlog(pool: &SqlitePool) -> LedgerResult<(u64, f64)> {
    let row =
        sqlx::query_as("SELECT count(*), min(created_at) FROM queue_sync WHERE applied_at IS NULL")
            .fetch_one(pool)
            .await
            .map_err(db_error)?;
    Ok(backlog_of(row))
}

pub(super) async fn recent(
    pool: &SqlitePool,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(&format!(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync
         WHERE applied_at > {NOW_MS} - ? ORDER BY applied_at DESC LIMIT ?"
    ))
    .bind(within_ms as i64)
    .bind(limit as i64)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sync_rows_from(rows))
}

pub(super) async fn prune(ledger: &SqliteLedger, older_than_ms: u64) -> LedgerResult<u64> {
    let mut tx = ledger.write().await?;
    let done = sqlx::query(&format!(
        "DELETE FROM queue_sync WHERE applied_at < {NOW_MS} - ?"
    ))
    .bind(older_than_ms as i64)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(done.rows_affected())
}
