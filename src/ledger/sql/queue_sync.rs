//! The queue-sync log: a transition's row, and its reads: what the queue store has not been seen to apply, what was
//! applied lately (for a replay), and pruning. Marking rows applied is the dialect's (a list).

use async_trait::async_trait;
use uuid::Uuid;

use super::{backlog_of, db_error, mark_synced, sales, Conn, SqlLedger};
use crate::domain::{AttemptId, SaleId};
use crate::ledger::{
    sync_rows_from, LedgerError, LedgerResult, PendingSync, QueueSyncLedger, SyncChange,
};

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
        let conn = &mut *self.conn().await?;
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

    async fn mark_synced(&self, ids: &[i64]) -> LedgerResult<()> {
        in_write!(self, |tx| mark_synced(tx, ids)).await
    }

    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)> {
        let conn = &mut *self.conn().await?;
        let row = sqlx::query_as(
            "SELECT count(*), min(created_at) FROM queue_sync WHERE applied_at IS NULL",
        )
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
        Ok(backlog_of(row))
    }

    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>> {
        let conn = &mut *self.conn().await?;
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

    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64> {
        let conn = &mut *self.conn().await?;
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
}
