//! Payment webhooks: each provider event is applied once, in the transaction that records it.

use sqlx::PgPool;
use uuid::Uuid;

use super::{attempts, db_error};
use crate::domain::{AttemptEvent, AttemptId, SaleId};
use crate::ledger::transition::transition;
use crate::ledger::{LedgerError, LedgerResult, PaymentApplied};

pub(super) async fn apply(
    pool: &PgPool,
    provider_event_id: &str,
    reference: Uuid,
    succeeded: bool,
) -> LedgerResult<PaymentApplied> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let attempt: Option<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT a.id, a.sale_id FROM payments p JOIN attempts a ON a.id = p.attempt_id WHERE p.reference = $1",
    )
    .bind(reference)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    let Some((local, sale)) = attempt else {
        return Ok(PaymentApplied::UnknownReference);
    };
    let id = AttemptId {
        sale: SaleId(sale),
        local,
    };
    // Lock the attempt first, then claim the event id: concurrent deliveries of one event
    // queue on the row lock, and all but the first find the id taken.
    let record = attempts::lock(&mut tx, id)
        .await?
        .ok_or(LedgerError::NotFound)?;
    let kind = if succeeded { "succeeded" } else { "failed" };
    let claimed = sqlx::query(
        "INSERT INTO payment_events (provider_event_id, payment_reference, kind) VALUES ($1, $2, $3)
         ON CONFLICT (provider_event_id) DO NOTHING",
    )
    .bind(provider_event_id)
    .bind(reference)
    .bind(kind)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    if claimed.rows_affected() == 0 {
        return Ok(PaymentApplied::Duplicate { record });
    }
    let event = if succeeded {
        AttemptEvent::PaymentSucceeded
    } else {
        AttemptEvent::PaymentFailed
    };
    let applied = transition(&mut *tx, record, event, None).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(PaymentApplied::Applied(applied))
}
