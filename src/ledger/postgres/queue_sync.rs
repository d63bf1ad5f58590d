//! The queue-sync log's statements (PostgreSQL): what the queue store has not been seen to
//! apply, marking it applied, what was applied lately (for a replay), and pruning.

use sqlx::PgPool;
use uuid::Uuid;

use super::db_error;
use crate::ledger::{LedgerResult, PendingSync};

pub(super) async fn pending(
    pool: &PgPool,
    older_than_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync
         WHERE applied_at IS NULL AND created_at < now() - make_interval(secs => $1 / 1000.0)
         ORDER BY id LIMIT $2",
    )
    .bind(older_than_ms as f64)
    .bind(limit as i64)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sync_rows_from(rows))
}

pub(super) async fn mark(pool: &PgPool, ids: &[i64]) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE queue_sync SET applied_at = now() WHERE id = ANY($1) AND applied_at IS NULL",
    )
    .bind(ids)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn backlog(pool: &PgPool) -> LedgerResult<(u64, f64)> {
    let (count, age): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM queue_sync
         WHERE applied_at IS NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    Ok((count as u64, age.unwrap_or(0.0).max(0.0)))
}

pub(super) async fn recent(
    pool: &PgPool,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<PendingSync>> {
    let rows: Vec<(i64, Uuid, Uuid, String)> = sqlx::query_as(
        "SELECT id, sale_id, attempt_id, change FROM queue_sync
         WHERE applied_at > now() - make_interval(secs => $1 / 1000.0)
         ORDER BY applied_at DESC LIMIT $2",
    )
    .bind(within_ms as f64)
    .bind(limit as i64)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sync_rows_from(rows))
}

pub(super) async fn prune(pool: &PgPool, older_than_ms: u64) -> LedgerResult<u64> {
    let done = sqlx::query(
        "DELETE FROM queue_sync WHERE applied_at < now() - make_interval(secs => $1 / 1000.0)",
    )
    .bind(older_than_ms as f64)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}
