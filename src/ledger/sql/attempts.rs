//! Attempts: loading, and the statements of a transition that touch stock, holds and payments.

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, Conn, DbRow};
use crate::domain::{
    AttemptId, AttemptState, Buyer, Currency, Decision, LiveAttempt, Money, SaleId, Take, UserId,
};
use crate::ledger::sql_types::{At, Ids, Seats, TextList};
use crate::ledger::transition::AttemptRows;
use crate::ledger::{AttemptRecord, HeldStock, LedgerError, LedgerResult};

/// Everything [`record_from_row`] reads, and the rest of the statement, as one `&'static str`.
macro_rules! select_attempts {
    ($rest:expr) => {
        concat!(
            "SELECT a.id, a.sale_id, a.user_id, a.seq, a.state, a.reason,
        a.admission_expires_at, a.hold_expires_at, a.payment_expires_at,
        h.quantity AS hold_quantity, h.seat_ids AS hold_seats, h.amount AS hold_amount,
        h.currency AS hold_currency, p.reference AS payment_reference,
        p.provider_payment_id, p.last_failure AS payment_failure
    FROM attempts a
    LEFT JOIN holds h ON h.attempt_id = a.id
    LEFT JOIN payments p ON p.attempt_id = a.id ",
            $rest
        )
    };
}
pub(super) use select_attempts;

pub(super) fn record_from_row(row: &DbRow) -> LedgerResult<AttemptRecord> {
    let bad = |what: &str| LedgerError::Other(format!("bad {what} in attempts row"));
    let state = AttemptState::from_parts(row.get("state"), row.get("reason"))
        .ok_or_else(|| bad("state"))?;
    let hold = match row
        .try_get::<Option<i32>, _>("hold_quantity")
        .map_err(|_| bad("hold"))?
    {
        Some(quantity) => Some(HeldStock {
            quantity: quantity as u32,
            seats: row
                .try_get::<Option<Seats>, _>("hold_seats")
                .map_err(|_| bad("seats"))?
                .unwrap_or_default()
                .0,
            amount: money_from_row(row, "hold_amount", "hold_currency")?,
        }),
        None => None,
    };
    Ok(AttemptRecord {
        id: AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        },
        user: UserId::parse(row.get("user_id")).map_err(|_| bad("user"))?,
        seq: row.get("seq"),
        state,
        admission_expires_at: row.get::<At, _>("admission_expires_at").0,
        hold_expires_at: row.get::<Option<At>, _>("hold_expires_at").map(|t| t.0),
        payment_expires_at: row.get::<Option<At>, _>("payment_expires_at").map(|t| t.0),
        hold,
        payment_reference: row.get("payment_reference"),
        provider_payment_id: row.get("provider_payment_id"),
        payment_failure: row.get("payment_failure"),
    })
}

/// An amount and its currency, from two columns (both NULL: not priced).
pub(super) fn money_from_row(
    row: &DbRow,
    amount: &str,
    currency: &str,
) -> LedgerResult<Option<Money>> {
    let bad = || LedgerError::Other(format!("bad {amount} or {currency}"));
    let amount: Option<i64> = row.try_get(amount).map_err(|_| bad())?;
    let currency: Option<String> = row.try_get(currency).map_err(|_| bad())?;
    match (amount, currency) {
        (Some(amount), Some(code)) => Ok(Some(Money {
            amount: u64::try_from(amount).map_err(|_| bad())?,
            currency: Currency::parse(&code).map_err(|_| bad())?,
        })),
        _ => Ok(None),
    }
}

/// The attempt, if it is one of its sale's.
fn of_sale(row: Option<DbRow>, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
    match row {
        Some(row) if row.get::<Uuid, _>("sale_id") == id.sale.0 => record_from_row(&row).map(Some),
        _ => Ok(None),
    }
}

pub(super) async fn load(conn: &mut Conn, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
    let row = sqlx::query(select_attempts!("WHERE a.id = $1"))
        .bind(id.local)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    of_sale(row, id)
}

/// A sale's live attempts and the units each user holds or bought.
pub(super) async fn live(
    conn: &mut Conn,
    sale: SaleId,
) -> LedgerResult<(Vec<LiveAttempt>, Vec<(UserId, u32)>)> {
    let rows = sqlx::query(select_attempts!(
        "WHERE a.sale_id = $1 AND a.state IN ('ADMITTED', 'HOLD', 'PAYMENT_PENDING') ORDER BY a.seq"
    ))
    .bind(sale.0)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    let mut live = Vec::with_capacity(rows.len());
    for row in &rows {
        live.extend(record_from_row(row)?.live());
    }
    let bought: Vec<(String, i64)> = sqlx::query_as(
        "SELECT a.user_id, CAST(sum(h.quantity) AS BIGINT) FROM holds h
         JOIN attempts a ON a.id = h.attempt_id
         WHERE h.sale_id = $1 AND h.status IN ('held', 'confirmed')
         GROUP BY a.user_id ORDER BY a.user_id",
    )
    .bind(sale.0)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok((live, crate::ledger::bought_from(bought)))
}

/// The CONFIRMED attempts of `sale`, with what each bought (a snapshot's buyers).
/// Moves an admitted attempt's deadline to `secs` from now (a gate's session renewed; its
/// state stays); whether it was admitted.
pub(super) async fn extend_admission(
    conn: &mut Conn,
    attempt: AttemptId,
    secs: u32,
) -> LedgerResult<bool> {
    let done = sqlx::query(concat!(
        "UPDATE attempts SET admission_expires_at = ",
        secs_from_now!("CAST($3 AS BIGINT)"),
        " WHERE id = $1 AND sale_id = $2 AND state = 'ADMITTED'"
    ))
    .bind(attempt.local)
    .bind(attempt.sale.0)
    .bind(i64::from(secs))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn buyers(conn: &mut Conn, sale: SaleId) -> LedgerResult<Vec<Buyer>> {
    let rows = sqlx::query(select_attempts!(
        "WHERE a.sale_id = $1 AND a.state = 'CONFIRMED' ORDER BY a.seq"
    ))
    .bind(sale.0)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    let mut buyers = Vec::with_capacity(rows.len());
    for row in &rows {
        buyers.extend(record_from_row(row)?.buyer());
    }
    Ok(buyers)
}

/// Claims seat `$3` of sale `$1` for attempt `$2` if it is free; its id if so. A statement a
/// seat, an equality on both columns of the free-units index: right after a sale is made, its
/// statistics do not know its units, and the planner reads a list of seats (`IN`, `= ANY`)
/// by scanning every free unit of the sale.
pub const CLAIM_SEAT: &str = "UPDATE stock_units SET attempt_id = $2
     WHERE sale_id = $1 AND unit_id = $3 AND attempt_id IS NULL
     RETURNING unit_id";

/// Inserts the hold rows of attempts that took their units or seats (`held`). The amount is
/// the sum of the units' prices as the sale has them now: a seat's category's, or the sale's
/// unit price (NULL when the sale is not priced).
pub(crate) async fn insert_holds(
    conn: &mut Conn,
    sale: SaleId,
    holds: &[(AttemptId, &Take)],
) -> LedgerResult<()> {
    for (id, take) in holds {
        let seats: &[String] = match take {
            Take::Quantity(_) => &[],
            Take::Seats(seats) => seats,
        };
        sqlx::query(concat!(
            "INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status, created_at, amount,
                               currency)
             SELECT $1, $2, $3, $4, 'held', ",
            now!(),
            ", CASE WHEN $5 THEN CAST($3 * s.unit_price AS BIGINT) ELSE
                  (SELECT CAST(sum(coalesce(c.unit_price, s.unit_price)) AS BIGINT)
                   FROM stock_units u
                   LEFT JOIN sale_categories c ON c.sale_id = u.sale_id AND c.name = u.category
                   WHERE u.sale_id = $2 AND u.attempt_id = $1) END,
                s.currency
             FROM sales s WHERE s.id = $2"
        ))
        .bind(id.local)
        .bind(sale.0)
        .bind(take.units() as i32)
        .bind(TextList(seats))
        .bind(seats.is_empty())
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// Why a hold could not be claimed: sold out, or a seat does not exist, or someone holds it.
async fn missing_seat(
    conn: &mut Conn,
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

/// Frees the seats the attempt holds.
async fn free_seats_of(conn: &mut Conn, id: AttemptId) -> LedgerResult<()> {
    sqlx::query("UPDATE stock_units SET attempt_id = NULL WHERE sale_id = $1 AND attempt_id = $2")
        .bind(id.sale.0)
        .bind(id.local)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Writes a decision's row of the audit trail (from, to, cause).
pub(crate) async fn audit(conn: &mut Conn, id: AttemptId, decision: &Decision) -> LedgerResult<()> {
    sqlx::query(concat!(
        "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause, trace_id, at)
         VALUES ($1, $2, $3, $4, $5, $6, ",
        now!(),
        ")"
    ))
    .bind(id.local)
    .bind(decision.from.name())
    .bind(decision.to.name())
    .bind(decision.to.reason().map(|r| r.as_str()))
    .bind(decision.event.as_str())
    .bind(crate::telemetry::traces::current_trace_id())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl AttemptRows for Conn {
    /// Loads and locks the attempt for the rest of the transaction (`FOR UPDATE OF a` locks only
    /// the attempt).
    async fn lock_attempt(&mut self, id: AttemptId) -> LedgerResult<Option<AttemptRecord>> {
        let conn = self;
        let row = sqlx::query(select_attempts!(concat!(
            "WHERE a.id = $1",
            row_lock!(" FOR UPDATE OF a")
        )))
        .bind(id.local)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
        of_sale(row, id)
    }

    /// Claims the hold's units: free units of a quantity sale, or the named seats. All or nothing:
    /// short of units, nothing is taken (seats claimed before the one missing are let go again).
    async fn take_units(&mut self, id: AttemptId, take: &Take) -> LedgerResult<()> {
        let conn = self;
        match take {
            Take::Quantity(n) => {
                if !super::stock::take(&mut *conn, id.sale, *n).await? {
                    return Err(LedgerError::SoldOut);
                }
            }
            Take::Seats(seats) => conn.claim_seats(id, seats).await?,
        }
        insert_holds(conn, id.sale, &[(id, take)]).await
    }

    /// Ends a hold, or a purchase refunded, whose units go back, exactly once (the hold's status
    /// guards it): a quantity to the sale's counter, seats to the free seats.
    async fn return_units(&mut self, id: AttemptId) -> LedgerResult<()> {
        let conn = self;
        let ended: Option<(i32, Seats)> = sqlx::query_as(concat!(
            "UPDATE holds SET status = 'returned', ended_at = ",
            now!(),
            " WHERE attempt_id = $1 AND status IN ('held', 'confirmed')
             RETURNING quantity, seat_ids"
        ))
        .bind(id.local)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
        match ended {
            Some((quantity, Seats(seats))) if seats.is_empty() => {
                super::stock::give_back(conn, id.sale, quantity as u32).await
            }
            Some(_) => free_seats_of(conn, id).await,
            None => Ok(()),
        }
    }

    /// The new state of the attempts `ids`, and what entering it writes besides (deadlines, the
    /// payment rows), in one statement of each kind however many they are.
    async fn enter_state(&mut self, id: AttemptId, to: AttemptState) -> LedgerResult<()> {
        self.enter_states(&[id.local], to).await
    }

    async fn audit(&mut self, id: AttemptId, decision: &Decision) -> LedgerResult<()> {
        audit(self, id, decision).await
    }

    /// Loads and locks the attempts `ids` for the rest of the transaction, in the order of their
    /// ids (so two batches that share an attempt lock in the same order); the ones of `sale`.
    /// Found by their primary key alone: with the sale in the condition, a planner whose
    /// statistics predate the sale's rows (a drop fills the table in seconds) read the sale's
    /// attempts through another index, every one of them at every batch.
    async fn lock_attempts(
        &mut self,
        sale: SaleId,
        ids: &[Uuid],
    ) -> LedgerResult<Vec<AttemptRecord>> {
        let conn = self;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(select_attempts!(concat!(
            "WHERE a.id ",
            in_ids!("$1"),
            " ORDER BY a.id",
            row_lock!(" FOR UPDATE OF a")
        )))
        .bind(Ids(ids))
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        rows.iter()
            .filter(|row| row.get::<Uuid, _>("sale_id") == sale.0)
            .map(record_from_row)
            .collect()
    }

    /// Claims each of the named seats for the attempt, all or none ([`LedgerError::SeatTaken`],
    /// [`LedgerError::UnknownSeat`] for the first one missing).
    async fn claim_seats(&mut self, id: AttemptId, seats: &[String]) -> LedgerResult<()> {
        let conn = self;
        let mut claimed = Vec::with_capacity(seats.len());
        for seat in seats {
            let got: Option<String> = sqlx::query_scalar(CLAIM_SEAT)
                .bind(id.sale.0)
                .bind(id.local)
                .bind(seat)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_error)?;
            claimed.extend(got);
        }
        if claimed.len() == seats.len() {
            return Ok(());
        }
        let missing = missing_seat(&mut *conn, id, seats, &claimed).await?;
        free_seats_of(conn, id).await?;
        Err(missing)
    }

    async fn enter_states(&mut self, ids: &[Uuid], to: AttemptState) -> LedgerResult<()> {
        let conn = self;
        if ids.is_empty() {
            return Ok(());
        }
        let also = match to {
            AttemptState::Hold => Some(concat!(
                "UPDATE attempts SET hold_expires_at = ",
                secs_from_now!(
                    "(SELECT hold_ttl_secs FROM sales WHERE sales.id = attempts.sale_id)"
                ),
                " WHERE id ",
                in_ids!("$1")
            )),
            AttemptState::PaymentPending => {
                let payments: Vec<(Uuid, Uuid)> =
                    ids.iter().map(|id| (Uuid::new_v4(), *id)).collect();
                super::insert_payments(&mut *conn, &payments).await?;
                Some(concat!(
                    "UPDATE attempts SET payment_expires_at = ",
                    secs_from_now!(
                        "(SELECT payment_ttl_secs FROM sales WHERE sales.id = attempts.sale_id)"
                    ),
                    " WHERE id ",
                    in_ids!("$1")
                ))
            }
            AttemptState::Confirmed => {
                sqlx::query(concat!(
                    "UPDATE payments SET status = 'succeeded', updated_at = ",
                    now!(),
                    " WHERE attempt_id ",
                    in_ids!("$1")
                ))
                .bind(Ids(ids))
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
                Some(concat!(
                    "UPDATE holds SET status = 'confirmed', ended_at = ",
                    now!(),
                    " WHERE status = 'held' AND attempt_id ",
                    in_ids!("$1")
                ))
            }
            AttemptState::Expired { .. } => Some(concat!(
                "UPDATE payments SET status = 'failed', updated_at = ",
                now!(),
                " WHERE status = 'pending' AND attempt_id ",
                in_ids!("$1")
            )),
            AttemptState::Queued | AttemptState::Admitted => None,
        };
        if let Some(sql) = also {
            sqlx::query(sql)
                .bind(Ids(ids))
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
        }
        sqlx::query(concat!(
            "UPDATE attempts SET state = $2, reason = $3, updated_at = ",
            now!(),
            " WHERE id ",
            in_ids!("$1")
        ))
        .bind(Ids(ids))
        .bind(to.name())
        .bind(to.reason().map(|r| r.as_str()))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }
}
