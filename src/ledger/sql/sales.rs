//! Sales: creation (with their units), settings, stock changes, counts, and what the queue store
//! has followed of them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{db_error, stock, Conn, DbRow};
use crate::domain::{
    Admission, Category, Currency, Opening, Price, ProofOfWork, Sale, SaleId, SaleStatus, Stock,
    StockKind, Ttls,
};
use crate::ledger::sql_types::{At, TextList};
use crate::ledger::transition::SaleRows;

#[cfg(doc)]
use crate::ledger::{transition::LedgerTx, QueueSyncLedger};
use crate::ledger::{AdmissionPlan, LedgerError, LedgerResult, LedgerStats, SaleRecord};

/// A sale's columns (its free units are counted apart, see [`load`]).
macro_rules! sale_columns {
    () => {
        "id, name, opens_at, closes_at, stock_kind, total, per_user_limit,
    admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute, max_active,
    adaptive_min_rate, adaptive_max_rate, pow_bits, pow_salt, opening, lottery_seed, status,
    created_at, currency, unit_price, layout_id, instant"
    };
}

async fn insert_seats(conn: &mut Conn, id: SaleId, seats: &[String]) -> LedgerResult<()> {
    sqlx::query(concat!(
        "INSERT INTO stock_units (sale_id, unit_id) SELECT $1, value FROM ",
        each_text!("$2")
    ))
    .bind(id.0)
    .bind(TextList(seats))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// A sale's prices: its currency and unit price (none: not priced), and its categories with
/// the seats of each, from `seats` (each with its category, if any).
async fn price_of(
    conn: &mut Conn,
    row: &DbRow,
    seats: &[(String, Option<String>)],
) -> LedgerResult<Option<Price>> {
    let bad = || LedgerError::Other("bad currency or unit_price in sales row".into());
    let (Some(code), Some(unit_price)) = (
        row.get::<Option<String>, _>("currency"),
        row.get::<Option<i64>, _>("unit_price"),
    ) else {
        return Ok(None);
    };
    let listed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT name, unit_price FROM sale_categories WHERE sale_id = $1 ORDER BY position",
    )
    .bind(row.get::<uuid::Uuid, _>("id"))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    let mut categories: Vec<Category> = listed
        .into_iter()
        .map(|(name, unit_price)| Category {
            name,
            unit_price: unit_price.max(0) as u64,
            seats: Vec::new(),
        })
        .collect();
    let index: std::collections::HashMap<String, usize> = categories
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    for (seat, category) in seats {
        if let Some(&i) = category.as_ref().and_then(|c| index.get(c)) {
            categories[i].seats.push(seat.clone());
        }
    }
    Ok(Some(Price {
        currency: Currency::parse(&code).map_err(|_| bad())?,
        unit_price: u64::try_from(unit_price).map_err(|_| bad())?,
        categories,
    }))
}

fn sale_from_row(
    row: &DbRow,
    seats: Option<Vec<String>>,
    price: Option<Price>,
) -> LedgerResult<Sale> {
    let bad = |what: &str| LedgerError::Other(format!("bad {what} in sales row"));
    let kind = StockKind::parse(row.get("stock_kind")).ok_or_else(|| bad("stock_kind"))?;
    let int = |name: &str| row.get::<i32, _>(name) as u32;
    let stock = match kind {
        StockKind::Quantity => Stock::Quantity(int("total")),
        StockKind::Seats => Stock::Seats(seats.unwrap_or_default()),
    };
    Ok(Sale {
        id: SaleId(row.get("id")),
        name: row.get("name"),
        opens_at: row.get::<At, _>("opens_at").0,
        closes_at: row.get::<Option<At>, _>("closes_at").map(|t| t.0),
        stock,
        per_user_limit: int("per_user_limit"),
        ttls: Ttls {
            admission_secs: int("admission_ttl_secs"),
            hold_secs: int("hold_ttl_secs"),
            payment_secs: int("payment_ttl_secs"),
        },
        admission: admission_from_row(row),
        proof_of_work: ProofOfWork {
            bits: int("pow_bits") as u8,
            salt: row.get("pow_salt"),
        },
        opening: Opening::from_stored(row.get("opening"), row.get("lottery_seed")),
        price,
        status: SaleStatus::parse(row.get("status")).ok_or_else(|| bad("status"))?,
        created_at: row.get::<At, _>("created_at").0,
        layout: row.get("layout_id"),
        instant: row.get("instant"),
    })
}

fn admission_from_row(row: &DbRow) -> Admission {
    let int = |name: &str| row.get::<i32, _>(name) as i64;
    let bound = |name: &str| row.get::<Option<i32>, _>(name).map(i64::from);
    Admission::from_stored(
        int("rate_per_minute"),
        int("max_active"),
        bound("adaptive_min_rate"),
        bound("adaptive_max_rate"),
    )
}

/// The sale with its free units counted: a quantity sale's counter, or a scan of the free
/// seats (so not for every second, see [`settings`]).
pub(super) async fn load(conn: &mut Conn, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
    let Some(sale) = settings(&mut *conn, id).await? else {
        return Ok(None);
    };
    let (remaining, settings_version): (i64, i64) = sqlx::query_as(
        "SELECT CASE WHEN stock_kind = 'quantity'
                    THEN (SELECT CAST(free AS BIGINT) FROM quantity_stock WHERE sale_id = $1)
                    ELSE (SELECT count(*) FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL)
                END,
                settings_version
         FROM sales WHERE id = $1",
    )
    .bind(id.0)
    .fetch_one(conn)
    .await
    .map_err(db_error)?;
    Ok(Some(SaleRecord {
        sale,
        remaining: remaining as u32,
        settings_version: settings_version as u64,
    }))
}

/// The sale, its free units not counted.
pub(super) async fn settings(conn: &mut Conn, id: SaleId) -> LedgerResult<Option<Sale>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        sale_columns!(),
        " FROM sales WHERE id = $1"
    ))
    .bind(id.0)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    let seats: Option<Vec<(String, Option<String>)>> =
        if row.get::<&str, _>("stock_kind") == "seats" {
            let seats = sqlx::query_as(
                "SELECT unit_id, category FROM stock_units WHERE sale_id = $1 ORDER BY unit_id",
            )
            .bind(id.0)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_error)?;
            Some(seats)
        } else {
            None
        };
    let price = price_of(conn, &row, seats.as_deref().unwrap_or_default()).await?;
    let seats = seats.map(|seats| seats.into_iter().map(|(seat, _)| seat).collect());
    sale_from_row(&row, seats, price).map(Some)
}

/// Writes a sale's admission settings: [`SaleRows::write_admission`], and a phase's as it begins.
pub(super) async fn write_admission(
    conn: &mut Conn,
    id: SaleId,
    admission: Admission,
) -> LedgerResult<()> {
    let (min, max) = admission.stored_bounds();
    sqlx::query(
        "UPDATE sales SET rate_per_minute = $2, max_active = $3, adaptive_min_rate = $4,
            adaptive_max_rate = $5, settings_version = settings_version + 1
         WHERE id = $1",
    )
    .bind(id.0)
    .bind(admission.rate_per_minute as i32)
    .bind(admission.max_active as i32)
    .bind(min.map(|v| v as i32))
    .bind(max.map(|v| v as i32))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn admitting(conn: &mut Conn) -> LedgerResult<Vec<AdmissionPlan>> {
    let rows = sqlx::query(concat!(
        "SELECT id, rate_per_minute, max_active, adaptive_min_rate, adaptive_max_rate,
                admission_ttl_secs, opening, lottery_seed, closes_at, instant FROM sales
         WHERE status = 'open' AND opens_at <= ",
        now!()
    ))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| AdmissionPlan {
            sale: SaleId(r.get("id")),
            admission: admission_from_row(r),
            admission_ttl_secs: r.get::<i32, _>("admission_ttl_secs") as u32,
            opening: Opening::from_stored(r.get("opening"), r.get("lottery_seed")),
            closes_at: r.get::<Option<At>, _>("closes_at").map(|t| t.0),
            instant: r.get("instant"),
        })
        .collect())
}

pub(super) async fn stats(conn: &mut Conn, id: SaleId) -> LedgerResult<LedgerStats> {
    let sale = load(&mut *conn, id).await?.ok_or(LedgerError::NotFound)?;
    let rows = sqlx::query_as(
        "SELECT state, reason, count(*) FROM attempts WHERE sale_id = $1 GROUP BY state, reason",
    )
    .bind(id.0)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    // Every hold by its attempt's state: units count while not given back (an expired
    // attempt's are), money also once refunded.
    let holds = sqlx::query_as(
        "SELECT a.state, a.reason, CAST(SUM(h.quantity) AS BIGINT), CAST(SUM(h.amount) AS BIGINT)
         FROM holds h JOIN attempts a ON a.id = h.attempt_id
         WHERE h.sale_id = $1 GROUP BY a.state, a.reason",
    )
    .bind(id.0)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    let mut stats = LedgerStats::tally(sale.remaining, sale.sale.stock.total(), rows, holds);
    stats.currency = sale.sale.price.map(|p| p.currency);
    Ok(stats)
}

pub(super) async fn free_stock(conn: &mut Conn, id: SaleId) -> LedgerResult<Stock> {
    let kind: Option<String> = sqlx::query_scalar("SELECT stock_kind FROM sales WHERE id = $1")
        .bind(id.0)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    let kind = kind.ok_or(LedgerError::NotFound)?;
    match StockKind::parse(&kind) {
        Some(StockKind::Quantity) => {
            let free: Option<i32> =
                sqlx::query_scalar("SELECT free FROM quantity_stock WHERE sale_id = $1")
                    .bind(id.0)
                    .fetch_optional(conn)
                    .await
                    .map_err(db_error)?;
            Ok(Stock::Quantity(free.unwrap_or(0).max(0) as u32))
        }
        Some(StockKind::Seats) => {
            let free: Vec<String> = sqlx::query_scalar(
                "SELECT unit_id FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
                 ORDER BY unit_id",
            )
            .bind(id.0)
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
            Ok(Stock::Seats(free))
        }
        None => Err(LedgerError::Other("bad stock_kind in sales row".into())),
    }
}

/// [`QueueSyncLedger::sales_behind_store`].
pub(super) async fn behind_store(conn: &mut Conn, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        conn,
        "SELECT id, settings_version FROM sales WHERE store_version < settings_version
         ORDER BY id LIMIT $1",
        limit,
    )
    .await
}

/// [`QueueSyncLedger::sales_settings_to_check`].
pub(super) async fn settings_to_check(
    conn: &mut Conn,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        conn,
        "SELECT id, settings_version FROM sales
         ORDER BY status = 'closed', created_at DESC, id DESC LIMIT $1",
        limit,
    )
    .await
}

/// The (sale, version) rows `sql` selects, its one parameter the most rows.
async fn sale_versions(
    conn: &mut Conn,
    sql: &'static str,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(sql)
        .bind(i64::from(limit))
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`QueueSyncLedger::sales_followed_within`].
pub(super) async fn followed_within(
    conn: &mut Conn,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(concat!(
        "SELECT id, store_version FROM sales WHERE store_followed_at > ",
        ms_before_now!("$1"),
        " ORDER BY store_followed_at DESC LIMIT $2"
    ))
    .bind(within_ms as i64)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`QueueSyncLedger::store_followed`]: the later of the two versions stays.
pub(super) async fn store_followed(conn: &mut Conn, id: SaleId, version: u64) -> LedgerResult<()> {
    sqlx::query(concat!(
        "UPDATE sales SET store_followed_at = ",
        now!(),
        ", store_version = CASE WHEN store_version > $2 THEN store_version ELSE $2 END
         WHERE id = $1"
    ))
    .bind(id.0)
    .bind(version as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl SaleRows for Conn {
    /// The sale's row .
    async fn insert_sale(&mut self, sale: &Sale) -> LedgerResult<()> {
        let conn = self;
        let (min_rate, max_rate) = sale.admission.stored_bounds();
        sqlx::query(
            "INSERT INTO sales (id, name, opens_at, closes_at, stock_kind, total,
                per_user_limit, admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute,
                max_active, adaptive_min_rate, adaptive_max_rate, status, created_at, opening,
                lottery_seed, currency, unit_price, layout_id, instant)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                     $19, $20, $21, $22)",
        )
        .bind(sale.id.0)
        .bind(&sale.name)
        .bind(At(sale.opens_at))
        .bind(At::of(sale.closes_at))
        .bind(sale.stock.kind().as_str())
        .bind(sale.stock.total() as i32)
        .bind(sale.per_user_limit as i32)
        .bind(sale.ttls.admission_secs as i32)
        .bind(sale.ttls.hold_secs as i32)
        .bind(sale.ttls.payment_secs as i32)
        .bind(sale.admission.rate_per_minute as i32)
        .bind(sale.admission.max_active as i32)
        .bind(min_rate.map(|v| v as i32))
        .bind(max_rate.map(|v| v as i32))
        .bind(sale.status.as_str())
        .bind(At(sale.created_at))
        .bind(sale.opening.as_str())
        .bind(sale.opening.seed().unwrap_or_default())
        .bind(sale.price.as_ref().map(|p| p.currency.code()))
        .bind(sale.price.as_ref().map(|p| p.unit_price as i64))
        .bind(sale.layout)
        .bind(sale.instant)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// The sale's units : its seats, or "1".."total", and its seat
    /// categories with each seat's.
    async fn insert_units(&mut self, sale: &Sale) -> LedgerResult<()> {
        let conn = self;
        match &sale.stock {
            Stock::Seats(seats) => insert_seats(&mut *conn, sale.id, seats).await?,
            Stock::Quantity(n) => stock::create(&mut *conn, sale.id, *n).await?,
        }
        let categories = sale.price.iter().flat_map(|p| &p.categories);
        for (position, category) in categories.enumerate() {
            sqlx::query(
                "INSERT INTO sale_categories (sale_id, name, unit_price, position)
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(sale.id.0)
            .bind(&category.name)
            .bind(category.unit_price as i64)
            .bind(position as i32)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
            sqlx::query(concat!(
                "UPDATE stock_units SET category = $2
                 WHERE sale_id = $1 AND unit_id IN (SELECT value FROM ",
                each_text!("$3"),
                ")"
            ))
            .bind(sale.id.0)
            .bind(&category.name)
            .bind(TextList(&category.seats))
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }

    /// On PostgreSQL `FOR NO KEY UPDATE`: a change to a sale
    /// excludes another change, not the attempts that reference the sale (their inserts take
    /// `KEY SHARE`), so admissions go on while an operator's change reads the sale before and
    /// after. On SQLite the write transaction holds the database.
    async fn lock_sale_status(&mut self, id: SaleId) -> LedgerResult<Option<String>> {
        let conn = self;
        sqlx::query_scalar(concat!(
            "SELECT status FROM sales WHERE id = $1",
            row_lock!(" FOR NO KEY UPDATE")
        ))
        .bind(id.0)
        .fetch_optional(conn)
        .await
        .map_err(db_error)
    }

    async fn write_sale_status(&mut self, id: SaleId, status: SaleStatus) -> LedgerResult<()> {
        let conn = self;
        sqlx::query(
            "UPDATE sales SET status = $2, settings_version = settings_version + 1 WHERE id = $1",
        )
        .bind(id.0)
        .bind(status.as_str())
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// Locked as the sale's status is (`lock_sale_status`).
    async fn lock_sale_stock(&mut self, id: SaleId) -> LedgerResult<Option<(StockKind, u32)>> {
        let conn = self;
        let row: Option<(String, i32)> = sqlx::query_as(concat!(
            "SELECT stock_kind, total FROM sales WHERE id = $1",
            row_lock!(" FOR NO KEY UPDATE")
        ))
        .bind(id.0)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
        Ok(row.and_then(|(kind, total)| Some((StockKind::parse(&kind)?, total as u32))))
    }

    /// The counter goes up.
    async fn add_units(&mut self, id: SaleId, n: u32) -> LedgerResult<()> {
        let conn = self;
        stock::give_back(conn, id, n).await
    }

    /// A seat the sale has already is [`LedgerError::SeatExists`].
    async fn add_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<()> {
        let conn = self;
        let existing: Option<String> = sqlx::query_scalar(concat!(
            "SELECT unit_id FROM stock_units
             WHERE sale_id = $1 AND unit_id IN (SELECT value FROM ",
            each_text!("$2"),
            ") LIMIT 1"
        ))
        .bind(id.0)
        .bind(TextList(seats))
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
        if let Some(seat) = existing {
            return Err(LedgerError::SeatExists(seat));
        }
        insert_seats(conn, id, seats).await
    }

    /// Free units only (those no attempt holds).
    async fn withdraw_units(&mut self, id: SaleId, n: u32) -> LedgerResult<u32> {
        let conn = self;
        stock::withdraw(conn, id, n).await
    }

    /// The named seats that are free.
    async fn withdraw_seats(&mut self, id: SaleId, seats: &[String]) -> LedgerResult<u32> {
        let conn = self;
        let done = sqlx::query(concat!(
            "DELETE FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
               AND unit_id IN (SELECT value FROM ",
            each_text!("$2"),
            ")"
        ))
        .bind(id.0)
        .bind(TextList(seats))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() as u32)
    }

    async fn write_sale_total(&mut self, id: SaleId, total: u32) -> LedgerResult<()> {
        let conn = self;
        sqlx::query("UPDATE sales SET total = $2 WHERE id = $1")
            .bind(id.0)
            .bind(total as i32)
            .execute(conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn load_sale(&mut self, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
        load(self, id).await
    }

    async fn write_admission(&mut self, id: SaleId, admission: Admission) -> LedgerResult<()> {
        write_admission(self, id, admission).await
    }

    async fn write_proof_of_work(&mut self, id: SaleId, pow: &ProofOfWork) -> LedgerResult<()> {
        let conn = self;
        sqlx::query("UPDATE sales SET pow_bits = $2, pow_salt = $3 WHERE id = $1")
            .bind(id.0)
            .bind(i32::from(pow.bits))
            .bind(&pow.salt)
            .execute(conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn write_details(
        &mut self,
        id: SaleId,
        name: Option<&str>,
        closes_at: Option<DateTime<Utc>>,
    ) -> LedgerResult<()> {
        let conn = self;
        sqlx::query(
            "UPDATE sales SET name = coalesce($2, name), closes_at = coalesce($3, closes_at),
                settings_version = settings_version + 1
             WHERE id = $1",
        )
        .bind(id.0)
        .bind(name)
        .bind(At::of(closes_at))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }
}
