//! The statements of [`LedgerTx`] that the shared transitions and flows (`ledger/transition.rs`,
//! `ledger/flows.rs`) run on an open transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{attempts, db_error, operators, outbox, sales, Conn};
use crate::domain::{
    AdminAction, Admission, AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent,
    ProofOfWork, Sale, SaleId, SaleStatus, StockKind, Take,
};
use crate::ledger::sql_types::At;
use crate::ledger::transition::{timeout_state, LedgerTx};
use crate::ledger::{
    AdminKeyRow, AdmissionPlan, AttemptRecord, LedgerResult, SaleRecord, SyncChange,
};
use crate::queue::Admitted;

#[async_trait]
impl LedgerTx for Conn {
    async fn lock_attempt(&mut self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        attempts::lock(self, id).await
    }

    async fn is_past(&mut self, deadline: DateTime<Utc>) -> LedgerResult<bool> {
        sqlx::query_scalar(concat!("SELECT $1 <= ", now!()))
            .bind(At(deadline))
            .fetch_one(self)
            .await
            .map_err(db_error)
    }

    async fn take_units(&mut self, id: AttemptId, take: &Take) -> LedgerResult<()> {
        attempts::take_units(self, id, take).await
    }

    async fn return_units(&mut self, id: AttemptId) -> LedgerResult<()> {
        attempts::return_units(self, id).await
    }

    async fn enter_state(&mut self, id: AttemptId, to: AttemptState) -> LedgerResult<()> {
        attempts::enter_state(self, &[id.local], to).await
    }

    async fn audit(&mut self, id: AttemptId, decision: &Decision) -> LedgerResult<()> {
        attempts::audit(self, id, decision).await
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

    async fn lock_attempts(
        &mut self,
        sale: SaleId,
        ids: &[Uuid],
    ) -> LedgerResult<Vec<AttemptRecord>> {
        attempts::lock_all(self, sale, ids).await
    }

    async fn take_each(&mut self, sale: SaleId, wants: &[u32]) -> LedgerResult<Vec<bool>> {
        super::stock::take_each(self, sale, wants).await
    }

    async fn take_all(&mut self, sale: SaleId, n: u32) -> LedgerResult<bool> {
        super::stock::take(self, sale, n).await
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

    async fn claim_seats(&mut self, id: AttemptId, seats: &[String]) -> LedgerResult<()> {
        attempts::claim_seats(self, id, seats).await
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

    async fn enter_states(&mut self, ids: &[Uuid], to: AttemptState) -> LedgerResult<()> {
        attempts::enter_state(self, ids, to).await
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

    async fn insert_sale(&mut self, sale: &Sale) -> LedgerResult<()> {
        sales::insert(self, sale).await
    }

    async fn insert_units(&mut self, sale: &Sale) -> LedgerResult<()> {
        sales::insert_units(self, sale).await
    }

    async fn lock_sale_status(&mut self, id: SaleId) -> LedgerResult<Option<String>> {
        sales::lock_status(self, id).await
    }

    async fn write_sale_status(&mut self, id: SaleId, status: SaleStatus) -> LedgerResult<()> {
        sales::write_status(self, id, status).await
    }

    async fn lock_sale_stock(&mut self, id: SaleId) -> LedgerResult<Option<(StockKind, u32)>> {
        sales::lock_stock(self, id).await
    }

    async fn add_units(&mut self, id: SaleId, n: u32) -> LedgerResult<()> {
        sales::add_units(self, id, n).await
    }

    async fn add_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<()> {
        sales::add_seats(self, id, seats).await
    }

    async fn withdraw_units(&mut self, id: SaleId, n: u32) -> LedgerResult<u32> {
        sales::withdraw_units(self, id, n).await
    }

    async fn withdraw_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<u32> {
        sales::withdraw_seats(self, id, seats).await
    }

    async fn write_sale_total(&mut self, id: SaleId, total: u32) -> LedgerResult<()> {
        sales::write_total(self, id, total).await
    }

    async fn load_sale(&mut self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        sales::load(self, id).await
    }

    async fn write_admission(&mut self, id: SaleId, admission: Admission) -> LedgerResult<()> {
        sales::write_admission(self, id, admission).await
    }

    async fn write_proof_of_work(&mut self, id: SaleId, pow: &ProofOfWork) -> LedgerResult<()> {
        sales::write_proof_of_work(self, id, pow).await
    }

    async fn write_details(
        &mut self,
        id: SaleId,
        name: Option<&str>,
        closes_at: Option<DateTime<Utc>>,
    ) -> LedgerResult<()> {
        sales::write_details(self, id, name, closes_at).await
    }

    async fn insert_admin_action(&mut self, action: &AdminAction) -> LedgerResult<()> {
        operators::insert_action(self, action).await
    }

    async fn insert_admin_key(&mut self, key: &AdminKeyRow, key_hash: &str) -> LedgerResult<()> {
        operators::insert_key(self, key, key_hash).await
    }

    async fn lock_admin_key(&mut self, name: &str) -> LedgerResult<Option<AdminKeyRow>> {
        operators::lock_key(self, name).await
    }

    async fn write_key_revoked(&mut self, name: &str) -> LedgerResult<AdminKeyRow> {
        operators::write_revoked(self, name).await
    }
}
