//! Saved responses on SQLite: the idempotency keys of holds, checkouts and admin writes.

use sqlx::sqlite::SqlitePool;
use sqlx::Row;

use super::{db_error, NOW_MS};
use crate::domain::UserId;
use crate::ledger::{LedgerError, LedgerResult, SavedResponse};

pub(super) async fn saved_response(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
) -> LedgerResult<Option<SavedResponse>> {
    let row = sqlx::query(
        "SELECT request_hash, status, body FROM idempotency_keys WHERE user_id = ? AND key = ?",
    )
    .bind(user.as_str())
    .bind(key)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(SavedResponse {
            request_hash: r.get("request_hash"),
            status: r.get::<i64, _>("status") as u16,
            body: serde_json::from_str(r.get("body"))
                .map_err(|e| LedgerError::Other(e.to_string()))?,
        })),
    }
}

/// Inserts an in-progress claim (status 0), or takes over one that went stale.
pub(super) async fn reserve_key(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
    request_hash: &str,
    stale_after_secs: u64,
) -> LedgerResult<bool> {
    let inserted = sqlx::query(&format!(
        "INSERT OR IGNORE INTO idempotency_keys (user_id, key, request_hash, status, body, created_at)
         VALUES (?, ?, ?, 0, 'null', {NOW_MS})"
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(request_hash)
    .execute(pool)
    .await
    .map_err(db_error)?;
    if inserted.rows_affected() == 1 {
        return Ok(true);
    }
    let taken_over = sqlx::query(&format!(
        "UPDATE idempotency_keys SET request_hash = ?, created_at = {NOW_MS}
         WHERE user_id = ? AND key = ? AND status = 0 AND created_at < {NOW_MS} - ?"
    ))
    .bind(request_hash)
    .bind(user.as_str())
    .bind(key)
    .bind(stale_after_secs as i64 * 1000)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(taken_over.rows_affected() == 1)
}

pub(super) async fn release_key(pool: &SqlitePool, user: &UserId, key: &str) -> LedgerResult<()> {
    sqlx::query("DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND status = 0")
        .bind(user.as_str())
        .bind(key)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Completes a claim with the answer; a finished answer is never overwritten.
pub(super) async fn save_response(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
    saved: &SavedResponse,
) -> LedgerResult<()> {
    sqlx::query(&format!(
        "INSERT INTO idempotency_keys (user_id, key, request_hash, status, body, created_at)
         VALUES (?, ?, ?, ?, ?, {NOW_MS})
         ON CONFLICT (user_id, key) DO UPDATE SET status = excluded.status, body = excluded.body
         WHERE idempotency_keys.status = 0"
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(&saved.request_hash)
    .bind(saved.status as i64)
    .bind(saved.body.to_string())
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn purge_saved_responses(
    pool: &SqlitePool,
    older_than_secs: u64,
) -> LedgerResult<u64> {
    let done = sqlx::query(&format!(
        "DELETE FROM idempotency_keys WHERE created_at < {NOW_MS} - 1000 * ?"
    ))
    .bind(older_than_secs as i64)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}
