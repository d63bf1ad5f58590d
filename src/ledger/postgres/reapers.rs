//! Expiry by the database's clock. Rows are claimed with `FOR UPDATE SKIP LOCKED`, so reapers on
//! several replicas (and user requests) never expire one attempt twice.

use sqlx::{PgPool, Row};

use super::{attempts, db_error};
use crate::domain::{AttemptEvent, AttemptId, SaleId};
use crate::ledger::transition::{timeout_state, transition};
use crate::ledger::{Applied, LedgerError, LedgerResult};

pub(super) async fn expire_due(
    pool: &PgPool,
    event: AttemptEvent,
    limit: u32,
) -> LedgerResult<Vec<Applied>> {
    let (state, deadline) = timeout_state(event)?;
    let mut tx = pool.begin().await.map_err(db_error)?;
    let rows = sqlx::query(&format!(
        "SELECT id, sale_id FROM attempts WHERE state = $1 AND {deadline} <= now()
         ORDER BY {deadline} LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .bind(state)
    .bind(limit as i64)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    let mut expired = Vec::with_capacity(rows.len());
    for row in rows {
        let id = AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        };
        let record = attempts::lock(&mut tx, id)
            .await?
            .ok_or(LedgerError::NotFound)?;
        expired.push(transition(&mut *tx, record, event, None).await?);
    }
    tx.commit().await.map_err(db_error)?;
    Ok(expired)
}
