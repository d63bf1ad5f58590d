//! Attempts on PostgreSQL: loading, and the statements of [`LedgerTx`] that the shared
//! transition flow (`ledger/transition.rs`) runs in one transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::{db_error, outbox};
use crate::domain::{
    AdminAction, Admission, Buyer, LiveAttempt, ProofOfWork, Sale, SaleStatus, StockKind, Take,
};
use crate::domain::{AttemptEvent, AttemptId, AttemptState, Decision, DomainEvent, SaleId, UserId};
use crate::ledger::transition::{apply_in, timeout_state, LedgerTx};
#[cfg(doc)]
use crate::ledger::Ledger;
use crate::ledger::{
    flows, AdminKeyRow, AdmissionPlan, Applied, AttemptRecord, Audit, HeldStock, LedgerError,
    LedgerResult, SaleRecord, SyncChange,
};
use crate::queue::Admitted;

/// Everything [`record_from_row`] reads; `FOR UPDATE OF a` locks only the attempt.
pub(super) const SELECT_FROM: &str = "SELECT a.id, a.sale_id, a.user_id, a.seq, a.state, a.reason,
        a.admission_expires_at, a.hold_expires_at, a.payment_expires_at,
        h.quantity AS hold_quantity, h.seat_ids AS hold_seats, h.status AS hold_status,
        p.reference AS payment_reference
    FROM attempts a
    LEFT JOIN holds h ON h.attempt_id = a.id
    LEFT JOIN payments p ON p.attempt_id = a.id";

pub(super) fn record_from_row(row: &PgRow) -> LedgerResult<AttemptRecord> {
    let state = AttemptState::from_parts(row.get("state"), row.get("reason"))
        .ok_or_else(|| LedgerError::Other("bad state in attempts row".into()))?;
    let hold = row
        .get::<Option<i32>, _>("hold_quantity")
        .map(|quantity| HeldStock {
            quantity: quantity as u32,
            seats: row
                .get::<Option<Vec<String>>, _>("hold_seats")
                .unwrap_or_default(),
        });
    Ok(AttemptRecord {
        id: AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        },
        user: UserId::parse(row.get("user_id"))
            .map_err(|_| LedgerError::Other("bad user in attempts row".into()))?,
        seq: row.get("seq"),
        state,
        admission_expires_at: row.get("admission_expires_at"),
        hold_expires_at: row.get("hold_expires_at"),
        payment_expires_at: row.get("payment_expires_at"),
        hold,
        payment_reference: row.get("payment_reference"),
    })
}

pub(super) async fn load(pool: &PgPool, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
    let row = sqlx::query(&format!("{SELECT_FROM} WHERE a.id = $1"))
        .bind(id.local)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    match row {
        Some(row) if row.get::<Uuid, _>("sale_id") == id.sale.0 => record_from_row(&row).map(Some),
        _ => Ok(None),
    }
}

/// Loads and locks the attempt for the rest of the transaction.
pub(super) async fn lock(
    conn: &mut PgConnection,
    id: AttemptId,
) -> LedgerResult<Option<AttemptRecord>> {
    let row = sqlx::query(&format!("{SELECT_FROM} WHERE a.id = $1 FOR UPDATE OF a"))
        .bind(id.local)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    match row {
        Some(row) if row.get::<Uuid, _>("sale_id") == id.sale.0 => record_from_row(&row).map(Some),
        _ => Ok(None),
    }
}

/// A sale's live attempts and the units each user holds or bought.
pub(super) async fn live(
    pool: &PgPool,
    sale: SaleId,
) -> LedgerResult<(Vec<LiveAttempt>, Vec<(UserId, u32)>)> {
    let rows = sqlx::query(&format!(
        "{SELECT_FROM} WHERE a.sale_id = $1 AND a.state IN ('ADMITTED', 'HOLD', 'PAYMENT_PENDING') ORDER BY a.seq"
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
        "SELECT a.user_id, sum(h.quantity)::bigint FROM holds h JOIN attempts a ON a.id = h.attempt_id
         WHERE h.sale_id = $1 AND h.status IN ('held', 'confirmed') GROUP BY a.user_id ORDER BY a.user_id",
    )
    .bind(sale.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok((live, crate::ledger::bought_from(bought)))
}

pub(super) async fn apply(
    pool: &PgPool,
    id: AttemptId,
    user: Option<&UserId>,
    event: AttemptEvent,
    take: Option<&Take>,
) -> LedgerResult<Applied> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let outcome = apply_in(&mut *tx, id, user, event, take).await?;
    tx.commit().await.map_err(db_error)?;
    outcome
}

/// [`Ledger::refund`]'s transaction.
pub(super) async fn refund(
    pool: &PgPool,
    id: AttemptId,
    audit: &Audit<'_, AttemptRecord>,
) -> LedgerResult<Applied> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let outcome = flows::refund(&mut *tx, id, audit).await?;
    tx.commit().await.map_err(db_error)?;
    outcome
}

/// The CONFIRMED attempts of `sale`, with what each bought (a snapshot's buyers).
pub(super) async fn buyers(pool: &PgPool, sale: SaleId) -> LedgerResult<Vec<Buyer>> {
    let rows = sqlx::query(&format!(
        "{SELECT_FROM} WHERE a.sale_id = $1 AND a.state = 'CONFIRMED' ORDER BY a.seq"
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
impl LedgerTx for PgConnection {
    async fn lock_attempt(&mut self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        lock(self, id).await
    }

    async fn is_past(&mut self, deadline: DateTime<Utc>) -> LedgerResult<bool> {
        sqlx::query_scalar("SELECT $1 <= now()")
            .bind(deadline)
            .fetch_one(self)
            .await
            .map_err(db_error)
    }

    async fn take_units(&mut self, id: AttemptId, take: &Take) -> LedgerResult<()> {
        take_units(self, id, take).await
    }

    async fn return_units(&mut self, id: AttemptId) -> LedgerResult<()> {
        return_units(self, id).await
    }

    async fn enter_state(&mut self, id: AttemptId, to: AttemptState) -> LedgerResult<()> {
        enter_state(self, id.local, to).await
    }

    async fn audit(&mut self, id: AttemptId, decision: &Decision) -> LedgerResult<()> {
        sqlx::query(
            "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause)
             VALUES ($1, $2, $3, $4, $5)",
        )
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
        outbox::insert(self, event).await
    }

    async fn record_sync(&mut self, id: AttemptId, change: SyncChange) -> LedgerResult<i64> {
        sqlx::query_scalar(
            "INSERT INTO queue_sync (sale_id, attempt_id, change) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(id.sale.0)
        .bind(id.local)
        .bind(change.as_str())
        .fetch_one(self)
        .await
        .map_err(db_error)
    }

    /// One statement for the batch: its ids as an array.
    async fn audit_all(&mut self, ids: &[AttemptId], decision: &Decision) -> LedgerResult<()> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.local).collect();
        sqlx::query(
            "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause)
             SELECT unnest($1::uuid[]), $2, $3, $4, $5",
        )
        .bind(&ids)
        .bind(decision.from.name())
        .bind(decision.to.name())
        .bind(decision.to.reason().map(|r| r.as_str()))
        .bind(decision.event.as_str())
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// One statement for the batch: its columns as arrays.
    async fn insert_admitted(
        &mut self,
        plan: &AdmissionPlan,
        admitted: &[Admitted],
    ) -> LedgerResult<Vec<Uuid>> {
        let ids: Vec<Uuid> = admitted.iter().map(|a| a.attempt.local).collect();
        let users: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
        let seqs: Vec<i64> = admitted.iter().map(|a| a.seq as i64).collect();
        sqlx::query_scalar(
            "INSERT INTO attempts (id, sale_id, user_id, seq, state, admission_expires_at)
             SELECT id, $1, user_id, seq, 'ADMITTED', now() + make_interval(secs => $5)
             FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS t(id, user_id, seq)
             ON CONFLICT (id) DO NOTHING RETURNING id",
        )
        .bind(plan.sale.0)
        .bind(&ids)
        .bind(&users)
        .bind(&seqs)
        .bind(plan.admission_ttl_secs as f64)
        .fetch_all(self)
        .await
        .map_err(db_error)
    }

    async fn payment_attempt(&mut self, reference: Uuid) -> LedgerResult<Option<AttemptId>> {
        let found: Option<(Uuid, Uuid)> = sqlx::query_as(
            "SELECT a.id, a.sale_id FROM payments p JOIN attempts a ON a.id = p.attempt_id WHERE p.reference = $1",
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
        let claimed = sqlx::query(
            "INSERT INTO payment_events (provider_event_id, payment_reference, kind) VALUES ($1, $2, $3)
             ON CONFLICT (provider_event_id) DO NOTHING",
        )
        .bind(provider_event_id)
        .bind(reference)
        .bind(if succeeded { "succeeded" } else { "failed" })
        .execute(self)
        .await
        .map_err(db_error)?;
        Ok(claimed.rows_affected() == 1)
    }

    /// `FOR UPDATE SKIP LOCKED`: reapers on several replicas (and user requests) never expire
    /// one attempt twice, nor wait for each other.
    async fn due(&mut self, event: AttemptEvent, limit: u32) -> LedgerResult<Vec<AttemptId>> {
        let (state, deadline) = timeout_state(event)?;
        let rows = sqlx::query(&format!(
            "SELECT id, sale_id FROM attempts WHERE state = $1 AND {deadline} <= now()
             ORDER BY {deadline} LIMIT $2 FOR UPDATE SKIP LOCKED"
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

/// The new state, and what entering it writes besides.
async fn enter_state(conn: &mut PgConnection, id: Uuid, to: AttemptState) -> LedgerResult<()> {
    let also = match to {
        AttemptState::Hold => Some(
            "UPDATE attempts a SET hold_expires_at = now() + make_interval(secs => s.hold_ttl_secs)
             FROM sales s WHERE a.id = $1 AND s.id = a.sale_id",
        ),
        AttemptState::PaymentPending => {
            sqlx::query(
                "INSERT INTO payments (reference, attempt_id, status) VALUES ($1, $2, 'pending')
                 ON CONFLICT (attempt_id) DO NOTHING",
            )
            .bind(Uuid::new_v4())
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
            Some(
                "UPDATE attempts a SET payment_expires_at = now() + make_interval(secs => s.payment_ttl_secs)
                 FROM sales s WHERE a.id = $1 AND s.id = a.sale_id",
            )
        }
        AttemptState::Confirmed => {
            sqlx::query("UPDATE payments SET status = 'succeeded', updated_at = now() WHERE attempt_id = $1")
                .bind(id)
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
            Some("UPDATE holds SET status = 'confirmed', ended_at = now() WHERE attempt_id = $1 AND status = 'held'")
        }
        AttemptState::Expired { .. } => Some(
            "UPDATE payments SET status = 'failed', updated_at = now() WHERE attempt_id = $1 AND status = 'pending'",
        ),
        AttemptState::Queued | AttemptState::Admitted => None,
    };
    if let Some(sql) = also {
        sqlx::query(sql)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
    }
    sqlx::query("UPDATE attempts SET state = $2, reason = $3, updated_at = now() WHERE id = $1")
        .bind(id)
        .bind(to.name())
        .bind(to.reason().map(|r| r.as_str()))
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Claims up to `$3` free units of sale `$1` for attempt `$2`, returning their ids. The free
/// units are picked and locked by an uncorrelated sub-select, which PostgreSQL runs once (an
/// InitPlan), then updated by row address. Written as `unit_id IN (SELECT … LIMIT $3 FOR UPDATE
/// SKIP LOCKED)`, the planner may run the locking sub-select again for every unit of the sale
/// (a nested-loop semi-join, its choice when the table's statistics predate the sale's units,
/// as right after a sale is created): in the benchmark, holds of a new sale stalled for
/// minutes that way. The rows are locked by this transaction, so their addresses hold still.
///
/// Run after [`FREE_UNITS_BY_INDEX`] in the same transaction.
pub const CLAIM_FREE_UNITS: &str = "UPDATE stock_units SET attempt_id = $2
     WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
         LIMIT $3 FOR UPDATE SKIP LOCKED))
     RETURNING unit_id";

/// Free units are found through the free-units index, never by a sequential scan. For a
/// `LIMIT`, the planner likes a sequential scan when its statistics say free rows are many,
/// reckoning it meets some early; but a new sale's units are stored behind every older sale's
/// rows, so each hold would read all of those first (`docs/benchmarks.md` has the figures).
/// For the rest of the hold transaction, whose statements go by key, the setting changes
/// nothing.
pub const FREE_UNITS_BY_INDEX: &str = "SET LOCAL enable_seqscan = off";

/// Claims the hold's units: free units of a quantity sale (skipping those another hold is
/// claiming right now, so holds never wait on each other), or the named seats. All or nothing:
/// short of units, the caller's transaction rolls back.
async fn take_units(conn: &mut PgConnection, id: AttemptId, take: &Take) -> LedgerResult<()> {
    let (claimed, wanted, seats): (Vec<String>, usize, Vec<String>) = match take {
        Take::Quantity(n) => {
            sqlx::query(FREE_UNITS_BY_INDEX)
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
            let claimed = sqlx::query_scalar(CLAIM_FREE_UNITS)
                .bind(id.sale.0)
                .bind(id.local)
                .bind(*n as i64)
                .fetch_all(&mut *conn)
                .await
                .map_err(db_error)?;
            (claimed, *n as usize, Vec::new())
        }
        Take::Seats(seats) => {
            let claimed = sqlx::query_scalar(
                "UPDATE stock_units SET attempt_id = $2
                 WHERE sale_id = $1 AND unit_id = ANY($3) AND attempt_id IS NULL
                 RETURNING unit_id",
            )
            .bind(id.sale.0)
            .bind(id.local)
            .bind(seats)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_error)?;
            (claimed, seats.len(), seats.clone())
        }
    };
    if claimed.len() < wanted {
        return Err(match take {
            Take::Quantity(_) => LedgerError::SoldOut,
            Take::Seats(seats) => missing_seat(conn, id, seats, &claimed).await?,
        });
    }
    sqlx::query(
        "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status) VALUES ($1, $2, $3, $4, 'held')",
    )
    .bind(id.local)
    .bind(id.sale.0)
    .bind(wanted as i32)
    .bind(&seats)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Why a seat could not be claimed: it does not exist, or someone holds it.
async fn missing_seat(
    conn: &mut PgConnection,
    id: AttemptId,
    seats: &[String],
    claimed: &[String],
) -> LedgerResult<LedgerError> {
    let Some(seat) = seats.iter().find(|s| !claimed.contains(s)) else {
        return Ok(LedgerError::SoldOut);
    };
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM stock_units WHERE sale_id = $1 AND unit_id = $2)",
    )
    .bind(id.sale.0)
    .bind(seat)
    .fetch_one(conn)
    .await
    .map_err(db_error)?;
    Ok(if exists {
        LedgerError::SeatTaken(seat.clone())
    } else {
        LedgerError::UnknownSeat(seat.clone())
    })
}

/// Ends a hold, or a purchase refunded, whose units go back, exactly once (the hold's status
/// guards it).
async fn return_units(conn: &mut PgConnection, id: AttemptId) -> LedgerResult<()> {
    let ended = sqlx::query("UPDATE holds SET status = 'returned', ended_at = now() WHERE attempt_id = $1 AND status IN ('held', 'confirmed')")
        .bind(id.local)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    if ended.rows_affected() == 1 {
        sqlx::query(
            "UPDATE stock_units SET attempt_id = NULL WHERE sale_id = $1 AND attempt_id = $2",
        )
        .bind(id.sale.0)
        .bind(id.local)
        .execute(conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}
