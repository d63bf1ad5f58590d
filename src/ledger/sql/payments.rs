//! The provider's side of payments ([`crate::ledger::PaymentLedger`]).

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::attempts::money_from_row;
use super::{db_error, Conn, SqlLedger};
use crate::domain::{AttemptId, SaleId};
use crate::ledger::{LedgerResult, OpenPayment, PaymentLedger};

/// A payment event in the attempt's file, once per `event_id`: whether this call wrote it.
pub(super) async fn note(
    conn: &mut Conn,
    event_id: &str,
    reference: Uuid,
    kind: &str,
) -> LedgerResult<bool> {
    let noted = sqlx::query(concat!(
        "INSERT INTO payment_events (provider_event_id, payment_reference, kind, received_at)
         VALUES ($1, $2, $3, ",
        now!(),
        ") ON CONFLICT (provider_event_id) DO NOTHING"
    ))
    .bind(event_id)
    .bind(reference)
    .bind(kind)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(noted.rows_affected() == 1)
}

/// The open payments' columns, and their attempts and holds.
macro_rules! open_payments {
    ($where:expr) => {
        concat!(
            "SELECT a.id, a.sale_id, p.reference, p.provider_payment_id, h.amount, h.currency
             FROM attempts a JOIN payments p ON p.attempt_id = a.id
             LEFT JOIN holds h ON h.attempt_id = a.id
             WHERE a.state = 'PAYMENT_PENDING' AND ",
            $where,
            " ORDER BY a.payment_expires_at LIMIT $2"
        )
    };
}

#[async_trait]
impl PaymentLedger for SqlLedger {
    async fn set_provider_payment(
        &self,
        attempt: AttemptId,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<String>> {
        let conn = &mut *self.conn().await?;
        sqlx::query(concat!(
            "UPDATE payments SET provider = $2, provider_payment_id = $3, updated_at = ",
            now!(),
            " WHERE attempt_id = $1 AND provider_payment_id IS NULL"
        ))
        .bind(attempt.local)
        .bind(provider)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
        sqlx::query_scalar("SELECT provider_payment_id FROM payments WHERE attempt_id = $1")
            .bind(attempt.local)
            .fetch_optional(conn)
            .await
            .map(Option::flatten)
            .map_err(db_error)
    }

    async fn payment_trace(&self, reference: Uuid) -> LedgerResult<Option<String>> {
        let conn = &mut *self.conn().await?;
        let trace: Option<Option<String>> =
            sqlx::query_scalar("SELECT traceparent FROM payments WHERE reference = $1")
                .bind(reference)
                .fetch_optional(conn)
                .await
                .map_err(db_error)?;
        Ok(trace.flatten())
    }

    async fn payment_by_provider_id(
        &self,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<(AttemptId, Uuid)>> {
        let conn = &mut *self.conn().await?;
        let row = sqlx::query(
            "SELECT a.id, a.sale_id, p.reference FROM payments p JOIN attempts a ON a.id = p.attempt_id
             WHERE p.provider = $1 AND p.provider_payment_id = $2",
        )
        .bind(provider)
        .bind(id)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
        Ok(row.map(|row| {
            let attempt = AttemptId {
                sale: SaleId(row.get("sale_id")),
                local: row.get("id"),
            };
            (attempt, row.get("reference"))
        }))
    }

    async fn set_payment_failure(&self, reference: Uuid, failure: &str) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        sqlx::query(concat!(
            "UPDATE payments SET last_failure = $2, updated_at = ",
            now!(),
            " WHERE reference = $1"
        ))
        .bind(reference)
        .bind(failure)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn note_payment(&self, event_id: &str, reference: Uuid, kind: &str) -> LedgerResult<()> {
        note(&mut *self.conn().await?, event_id, reference, kind).await?;
        Ok(())
    }

    async fn set_provider_refund(&self, attempt: AttemptId, refund_id: &str) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        let refund: &str = refund_id;
        sqlx::query(concat!(
            "UPDATE payments SET provider_refund_id = $2, updated_at = ",
            now!(),
            " WHERE attempt_id = $1"
        ))
        .bind(attempt.local)
        .bind(refund)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn open_payments(
        &self,
        due: bool,
        older_than_secs: u64,
        limit: u32,
    ) -> LedgerResult<Vec<OpenPayment>> {
        let conn = &mut *self.conn().await?;
        let statement = if due {
            open_payments!(concat!("a.payment_expires_at <= ", now!(), " AND $1 >= 0"))
        } else {
            open_payments!(concat!("p.created_at <= ", ms_before_now!("$1")))
        };
        let rows = sqlx::query(statement)
            .bind(older_than_secs.saturating_mul(1000) as i64)
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                Ok(OpenPayment {
                    attempt: AttemptId {
                        sale: SaleId(row.get("sale_id")),
                        local: row.get("id"),
                    },
                    reference: row.get("reference"),
                    provider_payment_id: row.get("provider_payment_id"),
                    amount: money_from_row(row, "amount", "currency")?,
                })
            })
            .collect()
    }
}
