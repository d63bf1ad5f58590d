//! Saved responses of requests sent with an `Idempotency-Key`, per user.

use async_trait::async_trait;
use sqlx::types::Json;
use sqlx::Row;

use super::{db_error, Conn, SqlLedger};
use crate::domain::UserId;
use crate::ledger::{IdempotencyLedger, LedgerResult, SavedResponse};

/// Inserts an in-progress claim (status 0), or takes over one that went stale.
async fn reserve(
    conn: &mut Conn,
    user: &UserId,
    key: &str,
    request_hash: &str,
    stale_after_secs: u64,
) -> LedgerResult<bool> {
    let inserted = sqlx::query(concat!(
        "INSERT INTO idempotency_keys (user_id, key, request_hash, status, body, created_at)
         VALUES ($1, $2, $3, 0, 'null', ",
        now!(),
        ") ON CONFLICT (user_id, key) DO NOTHING"
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(request_hash)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    if inserted.rows_affected() == 1 {
        return Ok(true);
    }
    let taken_over = sqlx::query(concat!(
        "UPDATE idempotency_keys SET request_hash = $3, created_at = ",
        now!(),
        " WHERE user_id = $1 AND key = $2 AND status = 0 AND created_at < ",
        ms_before_now!("$4")
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(request_hash)
    .bind(stale_after_secs as i64 * 1000)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(taken_over.rows_affected() == 1)
}

#[async_trait]
impl IdempotencyLedger for SqlLedger {
    async fn saved_response(
        &self,
        user: &UserId,
        key: &str,
    ) -> LedgerResult<Option<SavedResponse>> {
        let conn = &mut *self.conn().await?;
        let row = sqlx::query(
            "SELECT request_hash, status, body FROM idempotency_keys WHERE user_id = $1 AND key = $2",
        )
        .bind(user.as_str())
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
        Ok(row.map(|r| SavedResponse {
            request_hash: r.get("request_hash"),
            status: r.get::<i16, _>("status") as u16,
            body: r.get::<Json<serde_json::Value>, _>("body").0,
        }))
    }

    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool> {
        let mut conn = self.conn().await?;
        reserve(&mut conn, user, key, request_hash, stale_after_secs).await
    }

    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        sqlx::query("DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND status = 0")
            .bind(user.as_str())
            .bind(key)
            .execute(conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Completes a claim with the answer; a finished answer is never overwritten.
    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        sqlx::query(concat!(
            "INSERT INTO idempotency_keys (user_id, key, request_hash, status, body, created_at)
             VALUES ($1, $2, $3, $4, $5, ",
            now!(),
            ") ON CONFLICT (user_id, key) DO UPDATE SET status = excluded.status, body = excluded.body
             WHERE idempotency_keys.status = 0"
        ))
        .bind(user.as_str())
        .bind(key)
        .bind(&saved.request_hash)
        .bind(saved.status as i16)
        .bind(Json(&saved.body))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64> {
        let conn = &mut *self.conn().await?;
        super::purge_older(conn, "idempotency_keys", older_than_secs).await
    }
}
