//! Expiry by the database's clock. Rows are claimed with `FOR UPDATE SKIP LOCKED`, so reapers on
//! several replicas (and user requests) never expire one attempt twice.

use sqlx::{PgPool, Row};

use super::{attempts, db_error};
use crate::domain::{AttemptEvent, AttemptId, SaleId};
use crate::ledger::{Applied, LedgerError, LedgerResult};

pub(super) async fn expire_due(
    pool: &PgPool,
    event: AttemptEvent,
    limit: u32,
) -> LedgerResult<Vec<Applied>> {
    let sql = match event {
        AttemptEvent::AdmissionTimeout => {
            "SELECT id, sale_id FROM attempts WHERE state = 'ADMITTED' AND admission_expires_at <= now()
             ORDER BY admission_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        }
        AttemptEvent::HoldTimeout => {
            "SELECT id, sale_id FROM attempts WHERE state = 'HOLD' AND hold_expires_at <= now()
             ORDER BY hold_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        }
        AttemptEvent::PaymentTimeout => {
            "SELECT id, sale_id FROM attempts WHERE state = 'PAYMENT_PENDING' AND payment_expires_at <= now()
             ORDER BY payment_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        }
        AttemptEvent::Admit
        | AttemptEvent::Leave
        | AttemptEvent::Abandon
        | AttemptEvent::Hold
        | AttemptEvent::Release
        | AttemptEvent::Checkout
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed => {
            return Err(LedgerError::Other(format!("{event:?} is not a timeout")))
        }
    };
    let mut tx = pool.begin().await.map_err(db_error)?;
    let rows = sqlx::query(sql)
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
        expired.push(attempts::transition(&mut tx, record, event, None).await?);
    }
    tx.commit().await.map_err(db_error)?;
    Ok(expired)
}
