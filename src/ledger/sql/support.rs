//! The reads of support and operations: sales and attempts by page, an attempt's audit trail
//! and its payment's provider events.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::attempts::{record_from_row, select_attempts};
use super::{db_error, figures, operators, SqlLedger};
use crate::domain::{AdminAction, AttemptId, SaleId, SaleStatus, StockKind};
use crate::ledger::sql_types::At;
use crate::ledger::{
    flows, AdminKeyRow, AttemptQuery, AttemptRecord, Audit, AuditQuery, LedgerError, LedgerResult,
    PaymentEventRow, SaleFigures, SaleSummary, SupportLedger, TransitionRow,
};

#[async_trait]
impl SupportLedger for SqlLedger {
    async fn list_sales(
        &self,
        status: Option<SaleStatus>,
        before: Option<SaleId>,
        limit: u32,
    ) -> LedgerResult<Vec<SaleSummary>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT id, name, status, stock_kind, total, opens_at, closes_at, created_at FROM sales
             WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR id < $2)
             ORDER BY id DESC LIMIT $3",
        )
        .bind(status.map(SaleStatus::as_str))
        .bind(before.map(|s| s.0))
        .bind(i64::from(limit))
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                let bad = |what: &str| LedgerError::Other(format!("bad {what} in sales row"));
                Ok(SaleSummary {
                    id: SaleId(r.get("id")),
                    name: r.get("name"),
                    status: SaleStatus::parse(r.get("status")).ok_or_else(|| bad("status"))?,
                    stock_kind: StockKind::parse(r.get("stock_kind"))
                        .ok_or_else(|| bad("stock_kind"))?,
                    total: r.get::<i32, _>("total") as u32,
                    opens_at: r.get::<At, _>("opens_at").0,
                    closes_at: r.get::<Option<At>, _>("closes_at").map(|t| t.0),
                    created_at: r.get::<At, _>("created_at").0,
                })
            })
            .collect()
    }

    async fn list_attempts(
        &self,
        sale: SaleId,
        query: &AttemptQuery,
    ) -> LedgerResult<Vec<AttemptRecord>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(select_attempts!(
            "WHERE a.sale_id = $1 AND ($2 IS NULL OR a.state = $2)
               AND ($3 IS NULL OR a.user_id = $3) AND ($4 IS NULL OR a.id < $4)
             ORDER BY a.id DESC LIMIT $5"
        ))
        .bind(sale.0)
        .bind(query.state)
        .bind(query.user.as_ref().map(|u| u.as_str()))
        .bind(query.before)
        .bind(i64::from(query.limit))
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        rows.iter().map(record_from_row).collect()
    }

    async fn trail(&self, id: AttemptId) -> LedgerResult<Vec<TransitionRow>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT from_state, to_state, reason, cause, trace_id, at FROM attempt_transitions
             WHERE attempt_id = $1 ORDER BY id",
        )
        .bind(id.local)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| TransitionRow {
                from: r.get("from_state"),
                to: r.get("to_state"),
                reason: r.get("reason"),
                cause: r.get("cause"),
                trace_id: r.get("trace_id"),
                at: r.get::<At, _>("at").0,
            })
            .collect())
    }

    async fn payment_events(&self, id: AttemptId) -> LedgerResult<Vec<PaymentEventRow>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT e.provider_event_id, e.kind, e.received_at FROM payment_events e
             JOIN payments p ON p.reference = e.payment_reference
             WHERE p.attempt_id = $1 ORDER BY e.received_at, e.provider_event_id",
        )
        .bind::<Uuid>(id.local)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| PaymentEventRow {
                provider_event_id: r.get("provider_event_id"),
                kind: r.get("kind"),
                received_at: r.get::<At, _>("received_at").0,
            })
            .collect())
    }

    async fn create_admin_key(
        &self,
        key: &AdminKeyRow,
        key_hash: &str,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| flows::create_admin_key(tx, key, key_hash, entry)).await
    }

    async fn admin_key(&self, key_hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
        operators::key(&mut *self.conn().await?, key_hash).await
    }

    async fn admin_keys(&self) -> LedgerResult<Vec<AdminKeyRow>> {
        operators::keys(&mut *self.conn().await?).await
    }

    async fn revoke_admin_key(
        &self,
        name: &str,
        audit: &Audit<'_, AdminKeyRow>,
    ) -> LedgerResult<Option<AdminKeyRow>> {
        in_write!(self, |tx| flows::revoke_admin_key(tx, name, audit)).await
    }

    async fn record_figures(&self, figures: &SaleFigures) -> LedgerResult<()> {
        figures::record(&mut *self.conn().await?, figures).await
    }

    async fn figures(&self, sale: SaleId, since: DateTime<Utc>) -> LedgerResult<Vec<SaleFigures>> {
        figures::since(&mut *self.conn().await?, sale, since).await
    }

    async fn prune_figures(&self, before: DateTime<Utc>) -> LedgerResult<u64> {
        figures::prune(&mut *self.conn().await?, before).await
    }

    async fn admin_audit(&self, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
        operators::audit(&mut *self.conn().await?, query).await
    }
}
