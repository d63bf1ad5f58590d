//! Sales: creation (with their seats), settings, and counts.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::db_error;
use chrono::{DateTime, Utc};

use crate::domain::{
    AdminAction, Admission, Opening, ProofOfWork, Sale, SaleId, SaleStatus, Stock, StockKind, Ttls,
};
use crate::ledger::{
    flows, AdmissionPlan, Audit, LedgerError, LedgerResult, LedgerStats, SaleChange, SaleRecord,
};
#[cfg(doc)]
use crate::ledger::{transition::LedgerTx, Ledger};

/// A sale's columns (its free units are counted apart, see [`load`]).
const COLUMNS: &str = "id, name, opens_at, closes_at, stock_kind, total, per_user_limit,
    admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute, max_active,
    adaptive_min_rate, adaptive_max_rate, pow_bits, pow_salt, opening, lottery_seed, status,
    created_at";

pub(super) async fn create(
    pool: &PgPool,
    sale: &Sale,
    entry: Option<&AdminAction>,
) -> LedgerResult<()> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    flows::create_sale(&mut *tx, sale, entry).await?;
    tx.commit().await.map_err(db_error)
}

/// [`Ledger::change_sale`]'s transaction.
pub(super) async fn change(
    pool: &PgPool,
    id: SaleId,
    change: SaleChange<'_>,
    audit: Option<&Audit<'_, SaleRecord>>,
) -> LedgerResult<SaleRecord> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let after = flows::change_sale(&mut *tx, id, change, audit).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(after)
}

/// The sale's row ([`LedgerTx::insert_sale`]).
pub(super) async fn insert(conn: &mut PgConnection, sale: &Sale) -> LedgerResult<()> {
    let total = sale.stock.total() as i32;
    sqlx::query(
        "INSERT INTO sales (id, name, opens_at, closes_at, stock_kind, total,
            per_user_limit, admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute,
            max_active, adaptive_min_rate, adaptive_max_rate, status, created_at, opening,
            lottery_seed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
    )
    .bind(sale.id.0)
    .bind(&sale.name)
    .bind(sale.opens_at)
    .bind(sale.closes_at)
    .bind(sale.stock.kind().as_str())
    .bind(total)
    .bind(sale.per_user_limit as i32)
    .bind(sale.ttls.admission_secs as i32)
    .bind(sale.ttls.hold_secs as i32)
    .bind(sale.ttls.payment_secs as i32)
    .bind(sale.admission.rate_per_minute as i32)
    .bind(sale.admission.max_active as i32)
    .bind(sale.admission.stored_bounds().0.map(|v| v as i32))
    .bind(sale.admission.stored_bounds().1.map(|v| v as i32))
    .bind(sale.status.as_str())
    .bind(sale.created_at)
    .bind(sale.opening.as_str())
    .bind(sale.opening.seed().unwrap_or_default())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The sale's units ([`LedgerTx::insert_units`]): seats as an array, a quantity as a series.
pub(super) async fn insert_units(conn: &mut PgConnection, sale: &Sale) -> LedgerResult<()> {
    let units = match &sale.stock {
        Stock::Seats(seats) => {
            sqlx::query("INSERT INTO stock_units (sale_id, unit_id) SELECT $1, unnest($2::text[])")
                .bind(sale.id.0)
                .bind(seats)
        }
        Stock::Quantity(n) => sqlx::query(
            "INSERT INTO stock_units (sale_id, unit_id) SELECT $1, g::text FROM generate_series(1, $2) g",
        )
        .bind(sale.id.0)
        .bind(*n as i32),
    };
    units.execute(conn).await.map_err(db_error)?;
    Ok(())
}

fn sale_from_row(row: &PgRow, seats: Option<Vec<String>>) -> LedgerResult<Sale> {
    let bad = |what: &str| LedgerError::Other(format!("bad {what} in sales row"));
    let kind = StockKind::parse(row.get("stock_kind")).ok_or_else(|| bad("stock_kind"))?;
    let total: i32 = row.get("total");
    let stock = match kind {
        StockKind::Quantity => Stock::Quantity(total as u32),
        StockKind::Seats => Stock::Seats(seats.unwrap_or_default()),
    };
    let sale = Sale {
        id: SaleId(row.get("id")),
        name: row.get("name"),
        opens_at: row.get("opens_at"),
        closes_at: row.get("closes_at"),
        stock,
        per_user_limit: row.get::<i32, _>("per_user_limit") as u32,
        ttls: Ttls {
            admission_secs: row.get::<i32, _>("admission_ttl_secs") as u32,
            hold_secs: row.get::<i32, _>("hold_ttl_secs") as u32,
            payment_secs: row.get::<i32, _>("payment_ttl_secs") as u32,
        },
        admission: admission_from_row(row),
        proof_of_work: ProofOfWork {
            bits: row.get::<i32, _>("pow_bits") as u8,
            salt: row.get("pow_salt"),
        },
        opening: Opening::from_stored(row.get("opening"), row.get("lottery_seed")),
        status: SaleStatus::parse(row.get("status")).ok_or_else(|| bad("status"))?,
        created_at: row.get("created_at"),
    };
    Ok(sale)
}

/// The sale with its free units counted: a scan of the free-units index, 145 ms for a million
/// units, so not for every second (see [`settings`]).
pub(super) async fn load(conn: &mut PgConnection, id: SaleId) -> LedgerResult<Option<SaleRecord>> {
    let Some(sale) = settings(&mut *conn, id).await? else {
        return Ok(None);
    };
    let (remaining, settings_version): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL),
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
pub(super) async fn settings(conn: &mut PgConnection, id: SaleId) -> LedgerResult<Option<Sale>> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM sales WHERE id = $1"))
        .bind(id.0)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    let seats = if row.get::<&str, _>("stock_kind") == "seats" {
        let seats: Vec<String> = sqlx::query_scalar(
            "SELECT unit_id FROM stock_units WHERE sale_id = $1 ORDER BY unit_id",
        )
        .bind(id.0)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Some(seats)
    } else {
        None
    };
    sale_from_row(&row, seats).map(Some)
}

/// [`LedgerTx::lock_sale_status`]. `FOR NO KEY UPDATE`: a change to a sale excludes another
/// change, not the attempts that reference the sale (their inserts take `KEY SHARE`), so
/// admissions go on while an operator's change reads the sale before and after.
pub(super) async fn lock_status(
    conn: &mut PgConnection,
    id: SaleId,
) -> LedgerResult<Option<String>> {
    sqlx::query_scalar("SELECT status FROM sales WHERE id = $1 FOR NO KEY UPDATE")
        .bind(id.0)
        .fetch_optional(conn)
        .await
        .map_err(db_error)
}

pub(super) async fn write_status(
    conn: &mut PgConnection,
    id: SaleId,
    status: SaleStatus,
) -> LedgerResult<()> {
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

/// [`LedgerTx::write_admission`].
pub(super) async fn write_admission(
    conn: &mut PgConnection,
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

pub(super) async fn admitting(pool: &PgPool) -> LedgerResult<Vec<AdmissionPlan>> {
    let rows = sqlx::query(
        "SELECT id, rate_per_minute, max_active, adaptive_min_rate, adaptive_max_rate,
                admission_ttl_secs, opening, lottery_seed, closes_at FROM sales
         WHERE status = 'open' AND opens_at <= now()",
    )
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| AdmissionPlan {
            sale: SaleId(r.get("id")),
            admission: admission_from_row(r),
            admission_ttl_secs: r.get::<i32, _>("admission_ttl_secs") as u32,
            opening: Opening::from_stored(r.get("opening"), r.get("lottery_seed")),
            closes_at: r.get("closes_at"),
        })
        .collect())
}

pub(super) async fn stats(pool: &PgPool, id: SaleId) -> LedgerResult<LedgerStats> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    let sale = load(&mut conn, id).await?.ok_or(LedgerError::NotFound)?;
    drop(conn);
    let rows = sqlx::query_as(
        "SELECT state, reason, count(*) FROM attempts WHERE sale_id = $1 GROUP BY state, reason",
    )
    .bind(id.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let units = sqlx::query_as(
        "SELECT a.state, SUM(h.quantity) FROM holds h JOIN attempts a ON a.id = h.attempt_id \
         WHERE h.sale_id = $1 AND h.status <> 'returned' GROUP BY a.state",
    )
    .bind(id.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(LedgerStats::tally(
        sale.remaining,
        sale.sale.stock.total(),
        rows,
        units,
    ))
}

pub(super) async fn free_stock(pool: &PgPool, id: SaleId) -> LedgerResult<Stock> {
    let kind: Option<String> = sqlx::query_scalar("SELECT stock_kind FROM sales WHERE id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let kind = kind.ok_or(LedgerError::NotFound)?;
    let free: Vec<String> = sqlx::query_scalar(
        "SELECT unit_id FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL ORDER BY unit_id",
    )
    .bind(id.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let kind = StockKind::parse(&kind)
        .ok_or_else(|| LedgerError::Other("bad stock_kind in sales row".into()))?;
    Ok(Stock::from_free_units(kind, free))
}

fn admission_from_row(row: &PgRow) -> Admission {
    let int = |name: &str| row.get::<i32, _>(name) as i64;
    let bound = |name: &str| row.get::<Option<i32>, _>(name).map(i64::from);
    Admission::from_stored(
        int("rate_per_minute"),
        int("max_active"),
        bound("adaptive_min_rate"),
        bound("adaptive_max_rate"),
    )
}

/// [`LedgerTx::write_proof_of_work`].
pub(super) async fn write_proof_of_work(
    conn: &mut PgConnection,
    id: SaleId,
    pow: &ProofOfWork,
) -> LedgerResult<()> {
    sqlx::query("UPDATE sales SET pow_bits = $2, pow_salt = $3 WHERE id = $1")
        .bind(id.0)
        .bind(i32::from(pow.bits))
        .bind(&pow.salt)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::write_details`].
pub(super) async fn write_details(
    conn: &mut PgConnection,
    id: SaleId,
    name: Option<&str>,
    closes_at: Option<DateTime<Utc>>,
) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE sales SET name = coalesce($2, name), closes_at = coalesce($3, closes_at),
            settings_version = settings_version + 1
         WHERE id = $1",
    )
    .bind(id.0)
    .bind(name)
    .bind(closes_at)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::lock_sale_stock`] (`FOR NO KEY UPDATE`, as [`lock_status`]).
pub(super) async fn lock_stock(
    conn: &mut PgConnection,
    id: SaleId,
) -> LedgerResult<Option<(StockKind, u32)>> {
    let row: Option<(String, i32)> =
        sqlx::query_as("SELECT stock_kind, total FROM sales WHERE id = $1 FOR NO KEY UPDATE")
            .bind(id.0)
            .fetch_optional(conn)
            .await
            .map_err(db_error)?;
    Ok(row.and_then(|(kind, total)| Some((StockKind::parse(&kind)?, total as u32))))
}

/// [`LedgerTx::add_units`].
pub(super) async fn add_units(conn: &mut PgConnection, id: SaleId, n: u32) -> LedgerResult<()> {
    sqlx::query(
        "INSERT INTO stock_units (sale_id, unit_id)
         SELECT $1, (top.n + g)::text FROM generate_series(1, $2) g,
           (SELECT coalesce(max(unit_id::int), 0) AS n FROM stock_units WHERE sale_id = $1) top",
    )
    .bind(id.0)
    .bind(n as i32)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::add_seats`].
pub(super) async fn add_seats(
    conn: &mut PgConnection,
    id: SaleId,
    seats: &[String],
) -> LedgerResult<()> {
    let existing: Option<String> = sqlx::query_scalar(
        "SELECT unit_id FROM stock_units WHERE sale_id = $1 AND unit_id = ANY($2) LIMIT 1",
    )
    .bind(id.0)
    .bind(seats)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    if let Some(seat) = existing {
        return Err(LedgerError::SeatExists(seat));
    }
    sqlx::query("INSERT INTO stock_units (sale_id, unit_id) SELECT $1, unnest($2::text[])")
        .bind(id.0)
        .bind(seats)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::withdraw_units`]: free units only (those no attempt holds), any of them.
pub(super) async fn withdraw_units(
    conn: &mut PgConnection,
    id: SaleId,
    n: u32,
) -> LedgerResult<u32> {
    let done = sqlx::query(
        "DELETE FROM stock_units WHERE sale_id = $1 AND unit_id IN (
           SELECT unit_id FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
           LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(id.0)
    .bind(n as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() as u32)
}

/// [`LedgerTx::withdraw_seats`].
pub(super) async fn withdraw_seats(
    conn: &mut PgConnection,
    id: SaleId,
    seats: &[String],
) -> LedgerResult<u32> {
    let done = sqlx::query(
        "DELETE FROM stock_units WHERE sale_id = $1 AND unit_id = ANY($2) AND attempt_id IS NULL",
    )
    .bind(id.0)
    .bind(seats)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() as u32)
}

/// [`LedgerTx::write_sale_total`].
pub(super) async fn write_total(
    conn: &mut PgConnection,
    id: SaleId,
    total: u32,
) -> LedgerResult<()> {
    sqlx::query("UPDATE sales SET total = $2 WHERE id = $1")
        .bind(id.0)
        .bind(total as i32)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`Ledger::sales_behind_store`].
pub(super) async fn behind_store(pool: &PgPool, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        pool,
        "SELECT id, settings_version FROM sales WHERE store_version < settings_version
         ORDER BY id LIMIT $1",
        limit,
    )
    .await
}

/// [`Ledger::sales_settings_to_check`].
pub(super) async fn settings_to_check(
    pool: &PgPool,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        pool,
        "SELECT id, settings_version FROM sales
         ORDER BY status = 'closed', created_at DESC, id DESC LIMIT $1",
        limit,
    )
    .await
}

/// The (sale, version) rows `sql` selects, its one parameter the most rows.
async fn sale_versions(pool: &PgPool, sql: &str, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(sql)
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`Ledger::sales_followed_within`].
pub(super) async fn followed_within(
    pool: &PgPool,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
        "SELECT id, store_version FROM sales
         WHERE store_followed_at > now() - make_interval(secs => $1 / 1000.0)
         ORDER BY store_followed_at DESC LIMIT $2",
    )
    .bind(within_ms as f64)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`Ledger::store_followed`].
pub(super) async fn store_followed(pool: &PgPool, id: SaleId, version: u64) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE sales SET store_version = GREATEST(store_version, $2), store_followed_at = now()
         WHERE id = $1",
    )
    .bind(id.0)
    .bind(version as i64)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(())
}
