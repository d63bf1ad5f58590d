//! The outbox row written in the transaction of every change it reports.

use sqlx::PgConnection;

use super::db_error;
use crate::domain::DomainEvent;
use crate::ledger::LedgerResult;

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
