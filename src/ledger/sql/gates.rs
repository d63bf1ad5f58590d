//! Gates (`crate::ledger::GateLedger`): kept whole as JSON, with the sessions ended early.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, SqlLedger};
use crate::domain::gate::Gate;
use crate::domain::{AdminAction, AttemptId};
use crate::ledger::sql_types::At;
use crate::ledger::{flows, GateLedger, LedgerError, LedgerResult};

#[async_trait]
impl GateLedger for SqlLedger {
    async fn put_gate(&self, gate: &Gate, replace: bool, entry: &AdminAction) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            let sql = if replace {
                concat!("UPDATE gates SET body = $3, updated_at = ", now!(), " WHERE id = $1 AND sale_id = $2")
            } else {
                concat!(
                    "INSERT INTO gates (id, sale_id, body, created_at, updated_at) VALUES ($1, $2, $3, ",
                    now!(), ", ", now!(), ") ON CONFLICT DO NOTHING"
                )
            };
            let done = sqlx::query(sql)
                .bind(gate.id)
                .bind(gate.sale.0)
                .bind(Json(gate))
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            if done.rows_affected() == 0 {
                return Err(if replace {
                    LedgerError::NotFound
                } else {
                    LedgerError::Conflict("that sale already fronts a gate".into())
                });
            }
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn delete_gate(&self, id: Uuid, entry: &AdminAction) -> LedgerResult<bool> {
        in_write!(self, |tx| async {
            let done = sqlx::query("DELETE FROM gates WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            if done.rows_affected() > 0 {
                flows::record_admin_action(&mut *tx, entry).await?;
            }
            Ok::<_, LedgerError>(done.rows_affected() > 0)
        })
        .await
    }

    async fn gates(&self) -> LedgerResult<Vec<Gate>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query("SELECT body FROM gates ORDER BY created_at, id")
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| r.get::<Json<Gate>, _>("body").0)
            .collect())
    }

    async fn end_gate_session(
        &self,
        gate: Uuid,
        attempt: AttemptId,
        until: DateTime<Utc>,
    ) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        sqlx::query(
            "INSERT INTO gate_session_ends (attempt, gate_id, until) VALUES ($1, $2, $3) \
             ON CONFLICT (attempt) DO NOTHING",
        )
        .bind(attempt.to_string())
        .bind(gate)
        .bind(At(until))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn ended_gate_sessions(&self) -> LedgerResult<Vec<AttemptId>> {
        let conn = &mut *self.conn().await?;
        sqlx::query(concat!(
            "DELETE FROM gate_session_ends WHERE until <= ",
            now!()
        ))
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
        let rows = sqlx::query("SELECT attempt FROM gate_session_ends")
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .filter_map(|r| AttemptId::parse(r.get::<&str, _>("attempt")).ok())
            .collect())
    }

    async fn extend_admission(&self, attempt: AttemptId, secs: u32) -> LedgerResult<bool> {
        super::attempts::extend_admission(&mut *self.conn().await?, attempt, secs).await
    }
}
