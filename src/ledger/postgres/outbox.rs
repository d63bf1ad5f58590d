//! The outbox row written in the transaction of every change it reports.

use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::db_error;
use crate::domain::{DomainEvent, SaleId};
use crate::ledger::{LedgerResult, OutboxEvent, RelayLease};

pub(super) async fn insert(conn: &mut PgConnection, event: &DomainEvent) -> LedgerResult<()> {
    let payload = serde_json::to_value(event)
        .map_err(|e| crate::ledger::LedgerError::Other(e.to_string()))?;
    sqlx::query("INSERT INTO outbox (id, sale_id, event_type, payload) VALUES ($1, $2, $3, $4)")
        .bind(event.id)
        .bind(event.sale_id.0)
        .bind(&event.kind)
        .bind(payload)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

pub(super) async fn pending(
    pool: &PgPool,
    limit: u32,
    after: Option<Uuid>,
) -> LedgerResult<Vec<OutboxEvent>> {
    let rows = sqlx::query(
        "SELECT id, sale_id, event_type, payload::text AS payload FROM outbox
         WHERE published_at IS NULL AND dead_at IS NULL
           AND ($2::uuid IS NULL OR (created_at, id) > (SELECT created_at, id FROM outbox WHERE id = $2))
         ORDER BY created_at, id LIMIT $1",
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

pub(super) async fn mark_published(pool: &PgPool, ids: &[Uuid]) -> LedgerResult<()> {
    sqlx::query("UPDATE outbox SET published_at = now(), tries = tries + 1 WHERE id = ANY($1)")
        .bind(ids)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}

pub(super) async fn backlog(pool: &PgPool) -> LedgerResult<(u64, f64)> {
    let (count, age): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM outbox
         WHERE published_at IS NULL AND dead_at IS NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    Ok((count as u64, age.unwrap_or(0.0)))
}

pub(super) async fn record_refusal(pool: &PgPool, id: Uuid, max_tries: u32) -> LedgerResult<bool> {
    let dead: Option<bool> = sqlx::query_scalar(
        "UPDATE outbox SET tries = tries + 1, dead_at = CASE WHEN tries + 1 >= $2 THEN now() END
         WHERE id = $1 RETURNING dead_at IS NOT NULL",
    )
    .bind(id)
    .bind(max_tries as i32)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?;
    Ok(dead.unwrap_or(false))
}

/// Any constant shared by every sluice: the advisory lock of the relay.
const RELAY_LOCK: i64 = 0x51_01_CE_0E_7E_47;

/// A session advisory lock on a connection of its own: held while the connection lives, freed
/// by PostgreSQL if the relay's process dies.
struct PgRelayLease(sqlx::PgConnection);

#[async_trait::async_trait]
impl RelayLease for PgRelayLease {
    async fn alive(&mut self) -> bool {
        sqlx::query("SELECT 1").execute(&mut self.0).await.is_ok()
    }
}

pub(super) async fn relay_lease(pool: &PgPool) -> LedgerResult<Option<Box<dyn RelayLease>>> {
    let mut conn = pool.acquire().await.map_err(db_error)?.detach();
    let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(RELAY_LOCK)
        .fetch_one(&mut conn)
        .await
        .map_err(db_error)?;
    Ok(held.then(|| Box::new(PgRelayLease(conn)) as Box<dyn RelayLease>))
}
