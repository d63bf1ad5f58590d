//! The outbox on SQLite: events waiting to be relayed, and what the relay did with them.

use sqlx::sqlite::SqlitePool;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, SqliteLedger, NOW_MS};
use crate::domain::SaleId;
use crate::ledger::{LedgerResult, OutboxEvent};

pub(super) async fn pending_events(
    pool: &SqlitePool,
    limit: u32,
    after: Option<Uuid>,
) -> LedgerResult<Vec<OutboxEvent>> {
    let rows = sqlx::query(
        "SELECT id, sale_id, event_type, payload FROM outbox
         WHERE published_at IS NULL AND dead_at IS NULL
           AND (?2 IS NULL OR (created_at, id) > (SELECT created_at, id FROM outbox WHERE id = ?2))
         ORDER BY created_at, id LIMIT ?1",
    )
    .bind(limit as i64)
    .bind(after)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| OutboxEvent {
            id: r.get("id"),
            sale_id: SaleId(r.get("sale_id")),
            event_type: r.get("event_type"),
            payload: r.get("payload"),
        })
        .collect())
}

pub(super) async fn mark_published(ledger: &SqliteLedger, ids: &[Uuid]) -> LedgerResult<()> {
    let mut tx = ledger.write().await?;
    for id in ids {
        sqlx::query(&format!(
            "UPDATE outbox SET published_at = {NOW_MS}, tries = tries + 1 WHERE id = ?"
        ))
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}

pub(super) async fn outbox_backlog(pool: &SqlitePool) -> LedgerResult<(u64, f64)> {
    let rows =
        sqlx::query_as("SELECT count(*), min(created_at) FROM outbox WHERE published_at IS NULL")
            .fetch_one(pool)
            .await
            .map_err(db_error)?;
    Ok(super::backlog_of(rows))
}

pub(super) async fn record_refusal(
    ledger: &SqliteLedger,
    id: Uuid,
    max_tries: u32,
) -> LedgerResult<bool> {
    let mut tx = ledger.write().await?;
    let dead: Option<bool> = sqlx::query_scalar(&format!(
        "UPDATE outbox SET tries = tries + 1, dead_at = CASE WHEN tries + 1 >= ? THEN {NOW_MS} END
         WHERE id = ? RETURNING dead_at IS NOT NULL"
    ))
    .bind(max_tries as i64)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(dead.unwrap_or(false))
}
