//! The statements of [`LedgerTx`] that the shared transitions and flows (`ledger/transition.rs`,
//! `ledger/flows.rs`) run on an open transaction, apart from those of one table, which its
//! module implements (`AttemptRows` in `attempts.rs`, `StockRows`, `SaleRows`, `OperatorRows`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{attempts, db_error, outbox, Conn};
use crate::domain::{AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent, SaleId, Take};
use crate::ledger::sql_types::At;
use crate::ledger::transition::{timeout_state, LedgerTx};
use crate::ledger::{AdmissionPlan, LedgerResult, SyncChange};
use crate::queue::Admitted;

#[async_trait]
impl LedgerTx for Conn {
    async fn is_past(&mut self, deadline: DateTime<Utc>) -> LedgerResult<bool> {
        sqlx::query_scalar(concat!("SELECT $1 <= ", now!()))
            .bind(At(deadline))
            .fetch_one(self)
            .await
            .map_err(db_error)
    }

    async fn insert_event(&mut self, event: &DomainEvent) -> LedgerResult<()> {
        outbox::insert(self, event).await
    }

    async fn record_sync(&mut self, id: AttemptId, change: SyncChange) -> LedgerResult<i64> {
        super::queue_sync::record(self, id, change).await
    }

    async fn now(&mut self) -> LedgerResult<DateTime<Utc>> {
        let now: At = sqlx::query_scalar(concat!("SELECT ", now!()))
            .fetch_one(self)
            .await
            .map_err(db_error)?;
        Ok(now.0)
    }

    async fn by_index(&mut self) -> LedgerResult<()> {
        super::by_index(self).await
    }

    async fn mark(&mut self) -> LedgerResult<()> {
        sqlx::query("SAVEPOINT mark")
            .execute(&mut *self)
            .await
            .map_err(super::db_error)?;
        Ok(())
    }

    async fn back_to_mark(&mut self) -> LedgerResult<()> {
        sqlx::query("ROLLBACK TO SAVEPOINT mark")
            .execute(&mut *self)
            .await
            .map_err(super::db_error)?;
        Ok(())
    }

    async fn insert_holds(
        &mut self,
        sale: SaleId,
        holds: &[(AttemptId, &Take)],
    ) -> LedgerResult<()> {
        let (quantities, seats): (Vec<_>, Vec<_>) = holds
            .iter()
            .partition(|(_, take)| matches!(take, Take::Quantity(_)));
        let quantities: Vec<(Uuid, u32)> = quantities
            .iter()
            .map(|(id, take)| (id.local, take.units()))
            .collect();
        if !quantities.is_empty() {
            super::insert_quantity_holds(self, sale, &quantities).await?;
        }
        if !seats.is_empty() {
            attempts::insert_holds(self, sale, &seats).await?;
        }
        Ok(())
    }

    async fn record_syncs(
        &mut self,
        changes: &[(AttemptId, SyncChange)],
    ) -> LedgerResult<Vec<i64>> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        super::record_syncs(self, changes).await
    }

    async fn insert_events(&mut self, events: &[DomainEvent]) -> LedgerResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        super::insert_events(self, events).await
    }

    async fn confirmed_of(
        &mut self,
        sale: SaleId,
        users: &[String],
    ) -> LedgerResult<Vec<(String, Uuid)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let rows = super::attempts_of_users(self, sale, users).await?;
        Ok(rows
            .into_iter()
            .filter(|(_, _, state)| state == AttemptState::Confirmed.name())
            .map(|(user, id, _)| (user, id))
            .collect())
    }

    async fn insert_claims(
        &mut self,
        sale: SaleId,
        claims: &[(Uuid, &str, i64)],
    ) -> LedgerResult<()> {
        if claims.is_empty() {
            return Ok(());
        }
        super::insert_claims(self, sale, claims).await
    }

    async fn audit_all(&mut self, ids: &[AttemptId], decision: &Decision) -> LedgerResult<()> {
        super::audit_all(self, ids, decision).await
    }

    async fn insert_admitted(
        &mut self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<Uuid>> {
        super::insert_admitted(self, plan, admitted).await
    }

    async fn payment_attempt(&mut self, reference: Uuid) -> LedgerResult<Option<AttemptId>> {
        let found: Option<(Uuid, Uuid)> = sqlx::query_as(
            "SELECT a.id, a.sale_id FROM payments p JOIN attempts a ON a.id = p.attempt_id
             WHERE p.reference = $1",
        )
        .bind(reference)
        .fetch_optional(self)
        .await
        .map_err(db_error)?;
        Ok(found.map(|(local, sale)| AttemptId {
            sale: SaleId(sale),
            local,
        }))
    }

    async fn claim_payment_event(
        &mut self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<bool> {
        let kind = if succeeded { "succeeded" } else { "failed" };
        super::payments::note(self, provider_event_id, reference, kind).await
    }

    /// On PostgreSQL `FOR UPDATE SKIP LOCKED`: reapers on several replicas (and user requests)
    /// never expire one attempt twice, nor wait for each other. On SQLite the write
    /// transaction holds the database: the rows are this transaction's.
    async fn due(&mut self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<AttemptId>> {
        let (state, deadline) = timeout_state(event)?;
        let rows = sqlx::query(&format!(
            concat!(
                "SELECT id, sale_id FROM attempts WHERE state = $1 AND {deadline} <= ",
                now!(),
                " ORDER BY {deadline} LIMIT $2",
                row_lock!(" FOR UPDATE SKIP LOCKED")
            ),
            deadline = deadline
        ))
        .bind(state)
        .bind(i64::from(limit))
        .fetch_all(self)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| AttemptId {
                sale: SaleId(row.get("sale_id")),
                local: row.get("id"),
            })
            .collect())
    }
}
