//! The outbox: the event row written in the transaction of every change it reports, the rows
//! waiting to be relayed, and what the relay did with them.

use async_trait::async_trait;
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use super::{backlog_of, db_error, mark_published, relay_lease, Conn, SqlLedger};
use crate::domain::{DomainEvent, SaleId};
use crate::ledger::{LedgerError, LedgerResult, OutboxEvent, OutboxLedger, RelayLease};

pub(crate) async fn insert(conn: &mut Conn, event: &DomainEvent) -> LedgerResult<()> {
    sqlx::query(concat!(
        "INSERT INTO outbox (id, sale_id, event_type, payload, traceparent, created_at)
         VALUES ($1, $2, $3, $4, $5, ",
        clock!(),
        ")"
    ))
    .bind(event.id)
    .bind(event.sale_id.0)
    .bind(&event.kind)
    .bind(Json(event))
    .bind(crate::telemetry::traces::traceparent())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl OutboxLedger for SqlLedger {
    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT id, sale_id, event_type, CAST(payload AS TEXT) AS payload, traceparent
             FROM outbox
             WHERE published_at IS NULL AND dead_at IS NULL
               AND ($2 IS NULL OR (created_at, id) > (SELECT created_at, id FROM outbox WHERE id = $2))
             ORDER BY created_at, id LIMIT $1",
        )
        .bind(i64::from(limit))
        .bind(after)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| OutboxEvent {
                id: r.get("id"),
                sale_id: SaleId(r.get("sale_id")),
                event_type: r.get("event_type"),
                payload: r.get("payload"),
                traceparent: r.get("traceparent"),
            })
            .collect())
    }

    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()> {
        in_write!(self, |tx| mark_published(tx, ids)).await
    }

    /// Unpublished rows (dead-lettered ones aside) and the age of the oldest.
    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)> {
        let conn = &mut *self.conn().await?;
        let row = sqlx::query_as(
            "SELECT count(*), min(created_at) FROM outbox
             WHERE published_at IS NULL AND dead_at IS NULL",
        )
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
        Ok(backlog_of(row))
    }

    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
        let conn = &mut *self.conn().await?;
        let dead: Option<bool> = sqlx::query_scalar(concat!(
            "UPDATE outbox SET tries = tries + 1, dead_at = CASE WHEN tries + 1 >= $2 THEN ",
            now!(),
            " END WHERE id = $1 RETURNING dead_at IS NOT NULL"
        ))
        .bind(id)
        .bind(max_tries as i32)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
        Ok(dead.unwrap_or(false))
    }

    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>> {
        relay_lease(self.conn().await?).await
    }
}
