//! Attempts on SQLite: loading, and the statements of [`LedgerTx`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::{db_error, from_ms, NOW_MS};
use crate::domain::{
    AdminAction, Admission, Buyer, LiveAttempt, ProofOfWork, Sale, SaleStatus, StockKind, Take,
};
use crate::domain::{AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent, SaleId, UserId};
use crate::ledger::transition::{timeout_state, LedgerTx};
use crate::ledger::{
    AdminKeyRow, AdmissionPlan, AttemptRecord, HeldStock, LedgerError, LedgerResult, SaleRecord,
    SyncChange,
};
use crate::queue::Admitted;

pub(super) const SELECT_FROM: &str = "SELECT a.id, a.sale_id, a.user_id, a.seq, a.state, a.reason,
        a.admission_expires_at, a.hold_expires_at, a.payment_expires_at,
        h.quantity AS hold_quantity, h.seat_ids AS hold_seats, p.reference AS payment_reference
    FROM attempts a
    LEFT JOIN holds h ON h.attempt_id = a.id
    LEFT JOIN payments p ON p.attempt_id = a.id";

pub(super) fn record_from_row(row: &SqliteRow) -> LedgerResult<AttemptRecord> {
    let bad = |what: &str| LedgerError::Other(format!("bad {what} in attempts row"));
    let state = AttemptState::from_parts(row.get("state"), row.get("reason"))
        .ok_or_else(|| bad("state"))?;
    let hold = match row.get::<Option<i64>, _>("hold_quantity") {
        Some(quantity) => Some(HeldStock {
            quantity: quantity as u32,
            seats: serde_json::from_str(row.get::<Option<&str>, _>("hold_seats").unwrap_or("[]"))
                .map_err(|_| bad("seats"))?,
        }),
        None => None,
    };
    let payment_reference: Option<Uuid> = row.get("payment_reference");
    Ok(AttemptRecord {
        id: AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        },
        user: UserId::parse(row.get("user_id")).map_err(|_| bad("user"))?,
        seq: row.get("seq"),
        state,
        admission_expires_at: from_ms(row.get("admission_expires_at")),
        hold_expires_at: row.get::<Option<i64>, _>("hold_expires_at").map(from_ms),
        payment_expires_at: row.get::<Option<i64>, _>("payment_expires_at").map(from_ms),
        hold,
        payment_reference,
    })
}

pub(super) async fn load(
    conn: &mut SqliteConnection,
    id: AttemptId,
) -> LedgerResult<Option<AttemptRecord>> {
    let row = sqlx::query(&format!("{SELECT_FROM} WHERE a.id = ?"))
        .bind(id.local)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    match row {
        Some(row) => {
            let record = record_from_row(&row)?;
            Ok((record.id.sale == id.sale).then_some(record))
        }
        None => Ok(None),
    }
}

/// A sale's live attempts and the units each user holds or bought.
pub(super) async fn live(
    pool: &SqlitePool,
    sale: SaleId,
) -> LedgerResult<(Vec<LiveAttempt>, Vec<(UserId, u32)>)> {
    let rows = sqlx::query(&format!(
        "{SELECT_FROM} WHERE a.sale_id = ? AND a.state IN ('ADMITTED', 'HOLD', 'PAYMENT_PENDING') ORDER BY a.seq"
    ))
    .bind(sale.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let mut live = Vec::with_capacity(rows.len());
    for row in &rows {
        live.extend(record_from_row(row)?.live());
    }
    let bought: Vec<(String, i64)> = sqlx::query_as(
        "SELECT a.user_id, sum(h.quantity) FROM holds h JOIN attempts a ON a.id = h.attempt_id
         WHERE h.sale_id = ? AND h.status IN ('held', 'confirmed') GROUP BY a.user_id ORDER BY a.user_id",
    )
    .bind(sale.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok((live, crate::ledger::bought_from(bought)))
}

/// The CONFIRMED attempts of `sale`, with what each bought (a snapshot's buyers).
pub(super) async fn buyers(pool: &SqlitePool, sale: SaleId) -> LedgerResult<Vec<Buyer>> {
    let rows = sqlx::query(&format!(
        "{SELECT_FROM} WHERE a.sale_id = ? AND a.state = 'CONFIRMED' ORDER BY a.seq"
    ))
    .bind(sale.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let mut buyers = Vec::with_capacity(rows.len());
    for row in &rows {
        buyers.extend(record_from_row(row)?.buyer());
    }
    Ok(buyers)
}

#[async_trait]
impl LedgerTx for SqliteConnection {
    /// The write transaction already holds the database lock.
    async fn lock_attempt(&mut self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        load(self, id).await
    }

    async fn is_past(&mut self, deadline: DateTime<Utc>) -> LedgerResult<bool> {
        sqlx::query_scalar(&format!("SELECT ? <= {NOW_MS}"))
            .bind(deadline.timestamp_millis())
            .fetch_one(self)
            .await
            .map_err(db_error)
    }

    async fn take_units(&mut self, id: AttemptId, take: &Take) -> LedgerResult<()> {
        let (claimed, seats): (Vec<String>, Vec<String>) = match take {
            Take::Quantity(n) => {
                let claimed = sqlx::query_scalar(
                    "UPDATE stock_units SET attempt_id = ?
                     WHERE rowid IN (SELECT rowid FROM stock_units WHERE sale_id = ? AND attempt_id IS NULL LIMIT ?)
                     RETURNING unit_id",
                )
                .bind(id.local)
                .bind(id.sale.0)
                .bind(*n as i64)
                .fetch_all(&mut *self)
                .await
                .map_err(db_error)?;
                (claimed, Vec::new())
            }
            Take::Seats(seats) => {
                let claimed = sqlx::query_scalar(
                    "UPDATE stock_units SET attempt_id = ?
                     WHERE sale_id = ? AND attempt_id IS NULL AND unit_id IN (SELECT value FROM json_each(?))
                     RETURNING unit_id",
                )
                .bind(id.local)
                .bind(id.sale.0)
                .bind(serde_json::to_string(seats).unwrap_or_default())
                .fetch_all(&mut *self)
                .await
                .map_err(db_error)?;
                (claimed, seats.clone())
            }
        };
        let wanted = take.units() as usize;
        if claimed.len() < wanted {
            let Some(seat) = seats.iter().find(|s| !claimed.contains(s)) else {
                return Err(LedgerError::SoldOut);
            };
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM stock_units WHERE sale_id = ? AND unit_id = ?)",
            )
            .bind(id.sale.0)
            .bind(seat)
            .fetch_one(&mut *self)
            .await
            .map_err(db_error)?;
            return Err(if exists {
                LedgerError::SeatTaken(seat.clone())
            } else {
                LedgerError::UnknownSeat(seat.clone())
            });
        }
        sqlx::query(&format!(
            "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status, created_at)
             VALUES (?, ?, ?, ?, 'held', {NOW_MS})"
        ))
        .bind(id.local)
        .bind(id.sale.0)
        .bind(wanted as i64)
        .bind(serde_json::to_string(&seats).unwrap_or_default())
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn return_units(&mut self, id: AttemptId) -> LedgerResult<()> {
        let ended = sqlx::query(&format!(
            "UPDATE holds SET status = 'returned', ended_at = {NOW_MS} WHERE attempt_id = ? AND status IN ('held', 'confirmed')"
        ))
        .bind(id.local)
        .execute(&mut *self)
        .await
        .map_err(db_error)?;
        if ended.rows_affected() == 1 {
            sqlx::query(
                "UPDATE stock_units SET attempt_id = NULL WHERE sale_id = ? AND attempt_id = ?",
            )
            .bind(id.sale.0)
            .bind(id.local)
            .execute(self)
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }

    async fn enter_state(&mut self, id: AttemptId, to: AttemptState) -> LedgerResult<()> {
        let local = id.local;
        let also = match to {
            AttemptState::Hold => Some(format!(
                "UPDATE attempts SET hold_expires_at = {NOW_MS} + 1000 *
                   (SELECT hold_ttl_secs FROM sales WHERE sales.id = attempts.sale_id) WHERE id = ?"
            )),
            AttemptState::PaymentPending => {
                sqlx::query(&format!(
                    "INSERT OR IGNORE INTO payments (reference, attempt_id, status, created_at, updated_at)
                     VALUES (?, ?, 'pending', {NOW_MS}, {NOW_MS})"
                ))
                .bind(Uuid::new_v4())
                .bind(local)
                .execute(&mut *self)
                .await
                .map_err(db_error)?;
                Some(format!(
                    "UPDATE attempts SET payment_expires_at = {NOW_MS} + 1000 *
                       (SELECT payment_ttl_secs FROM sales WHERE sales.id = attempts.sale_id) WHERE id = ?"
                ))
            }
            AttemptState::Confirmed => {
                sqlx::query(&format!("UPDATE payments SET status = 'succeeded', updated_at = {NOW_MS} WHERE attempt_id = ?"))
                    .bind(local)
                    .execute(&mut *self)
                    .await
                    .map_err(db_error)?;
                Some(format!("UPDATE holds SET status = 'confirmed', ended_at = {NOW_MS} WHERE attempt_id = ? AND status = 'held'"))
            }
            AttemptState::Expired { .. } => Some(format!(
                "UPDATE payments SET status = 'failed', updated_at = {NOW_MS} WHERE attempt_id = ? AND status = 'pending'"
            )),
            AttemptState::Queued | AttemptState::Admitted => None,
        };
        if let Some(sql) = also {
            sqlx::query(&sql)
                .bind(local)
                .execute(&mut *self)
                .await
                .map_err(db_error)?;
        }
        sqlx::query(&format!(
            "UPDATE attempts SET state = ?, reason = ?, updated_at = {NOW_MS} WHERE id = ?"
        ))
        .bind(to.name())
        .bind(to.reason().map(|r| r.as_str()))
        .bind(local)
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn audit(&mut self, id: AttemptId, decision: &Decision) -> LedgerResult<()> {
        sqlx::query(&format!(
            "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause, at)
             VALUES (?, ?, ?, ?, ?, {NOW_MS})"
        ))
        .bind(id.local)
        .bind(decision.from.name())
        .bind(decision.to.name())
        .bind(decision.to.reason().map(|r| r.as_str()))
        .bind(decision.event.as_str())
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn insert_event(&mut self, event: &DomainEvent) -> LedgerResult<()> {
        let payload =
            serde_json::to_string(event).map_err(|e| LedgerError::Other(e.to_string()))?;
        sqlx::query(&format!(
            "INSERT INTO outbox (id, sale_id, event_type, payload, created_at) VALUES (?, ?, ?, ?, {NOW_MS})"
        ))
        .bind(event.id)
        .bind(event.sale_id.0)
        .bind(&event.kind)
        .bind(payload)
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn record_sync(&mut self, id: AttemptId, change: SyncChange) -> LedgerResult<i64> {
        sqlx::query_scalar(&format!(
            "INSERT INTO queue_sync (sale_id, attempt_id, change, created_at)
             VALUES (?, ?, ?, {NOW_MS}) RETURNING id"
        ))
        .bind(id.sale.0)
        .bind(id.local)
        .bind(change.as_str())
        .fetch_one(self)
        .await
        .map_err(db_error)
    }

    async fn insert_admitted(
        &mut self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<Uuid>> {
        let mut inserted = Vec::with_capacity(admitted.len());
        for a in admitted {
            // OR IGNORE: a retried batch inserts nothing twice.
            let done = sqlx::query(&format!(
                "INSERT OR IGNORE INTO attempts (id, sale_id, user_id, seq, state, admitted_at, admission_expires_at, updated_at)
                 VALUES (?, ?, ?, ?, 'ADMITTED', {NOW_MS}, {NOW_MS} + 1000 * ?, {NOW_MS})"
            ))
            .bind(a.attempt.local)
            .bind(plan.sale.0)
            .bind(a.user.as_str())
            .bind(a.seq as i64)
            .bind(plan.admission_ttl_secs as i64)
            .execute(&mut *self)
            .await
            .map_err(db_error)?;
            if done.rows_affected() == 1 {
                inserted.push(a.attempt.local);
            }
        }
        Ok(inserted)
    }

    async fn payment_attempt(&mut self, reference: Uuid) -> LedgerResult<Option<AttemptId>> {
        let row = sqlx::query("SELECT a.id, a.sale_id FROM payments p JOIN attempts a ON a.id = p.attempt_id WHERE p.reference = ?")
            .bind(reference)
            .fetch_optional(self)
            .await
            .map_err(db_error)?;
        Ok(row.map(|row| AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        }))
    }

    async fn claim_payment_event(
        &mut self,
        provider_event_id: &str,
        reference: Uuid,
        succeeded: bool,
    ) -> LedgerResult<bool> {
        let claimed = sqlx::query(&format!(
            "INSERT OR IGNORE INTO payment_events (provider_event_id, payment_reference, kind, received_at) VALUES (?, ?, ?, {NOW_MS})"
        ))
        .bind(provider_event_id)
        .bind(reference)
        .bind(if succeeded { "succeeded" } else { "failed" })
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(claimed.rows_affected() == 1)
    }

    /// The write transaction holds the database: the rows are this transaction's.
    async fn due(&mut self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<AttemptId>> {
        let (state, deadline) = timeout_state(event)?;
        let rows = sqlx::query(&format!(
            "SELECT id, sale_id FROM attempts WHERE state = ? AND {deadline} <= {NOW_MS} ORDER BY {deadline} LIMIT ?"
        ))
        .bind(state)
        .bind(limit as i64)
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
        super::sales::insert(self, sale).await
    }

    async fn insert_units(&mut self, sale: &Sale) -> LedgerResult<()> {
        super::sales::insert_units(self, sale).await
    }

    async fn lock_sale_status(&mut self, id: SaleId) -> LedgerResult<Option<String>> {
        super::sales::lock_status(self, id).await
    }

    async fn write_sale_status(&mut self, id: SaleId, status: SaleStatus) -> LedgerResult<()> {
        super::sales::write_status(self, id, status).await
    }
    async fn lock_sale_stock(&mut self, id: SaleId) -> LedgerResult<Option<(StockKind, u32)>> {
        super::sales::lock_stock(self, id).await
    }

    async fn add_units(&mut self, id: SaleId, n: u32) -> LedgerResult<()> {
        super::sales::add_units(self, id, n).await
    }

    async fn add_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<()> {
        super::sales::add_seats(self, id, seats).await
    }

    async fn withdraw_units(&mut self, id: SaleId, n: u32) -> LedgerResult<u32> {
        super::sales::withdraw_units(self, id, n).await
    }

    async fn withdraw_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<u32> {
        super::sales::withdraw_seats(self, id, seats).await
    }

    async fn write_sale_total(&mut self, id: SaleId, total: u32) -> LedgerResult<()> {
        super::sales::write_total(self, id, total).await
    }
    async fn load_sale(&mut self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        super::sales::load(self, id).await
    }

    async fn write_admission(&mut self, id: SaleId, admission: Admission) -> LedgerResult<()> {
        super::sales::write_admission(self, id, admission).await
    }

    async fn write_proof_of_work(&mut self, id: SaleId, pow: &ProofOfWork) -> LedgerResult<()> {
        super::sales::write_proof_of_work(self, id, pow).await
    }

    async fn write_details(
        &mut self,
        id: SaleId,
        name: Option<&str>,
        closes_at: Option<DateTime<Utc>>,
    ) -> LedgerResult<()> {
        super::sales::write_details(self, id, name, closes_at).await
    }

    async fn insert_admin_action(&mut self, action: &AdminAction) -> LedgerResult<()> {
        super::operators::insert_action(self, action).await
    }

    async fn insert_admin_key(&mut self, key: &AdminKeyRow, key_hash: &str) -> LedgerResult<()> {
        super::operators::insert_key(self, key, key_hash).await
    }

    async fn lock_admin_key(&mut self, name: &str) -> LedgerResult<Option<AdminKeyRow>> {
        super::operators::lock_key(self, name).await
    }

    async fn write_key_revoked(&mut self, name: &str) -> LedgerResult<AdminKeyRow> {
        super::operators::write_revoked(self, name).await
    }
}
