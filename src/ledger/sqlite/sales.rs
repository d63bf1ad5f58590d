//! Sales on SQLite.

use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row, SqliteConnection};

use super::{db_error, from_ms, SqliteLedger, NOW_MS};
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
    ledger: &SqliteLedger,
    sale: &Sale,
    entry: Option<&AdminAction>,
) -> LedgerResult<()> {
    let mut tx = ledger.write().await?;
    flows::create_sale(&mut *tx, sale, entry).await?;
    tx.commit().await.map_err(db_error)
}

/// [`Ledger::change_sale`]'s transaction.
pub(super) async fn change(
    ledger: &SqliteLedger,
    id: SaleId,
    change: SaleChange<'_>,
    audit: Option<&Audit<'_, SaleRecord>>,
) -> LedgerResult<SaleRecord> {
    let mut tx = ledger.write().await?;
    let after = flows::change_sale(&mut *tx, id, change, audit).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(after)
}

/// The sale's row ([`LedgerTx::insert_sale`]).
pub(super) async fn insert(conn: &mut SqliteConnection, sale: &Sale) -> LedgerResult<()> {
    sqlx::query(
        "INSERT INTO sales (id, name, opens_at, closes_at, stock_kind, total, per_user_limit,
            admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute, max_active, adaptive_min_rate,
            adaptive_max_rate, status, created_at, opening, lottery_seed)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(sale.id.0)
    .bind(&sale.name)
    .bind(sale.opens_at.timestamp_millis())
    .bind(sale.closes_at.map(|t| t.timestamp_millis()))
    .bind(sale.stock.kind().as_str())
    .bind(sale.stock.total() as i64)
    .bind(sale.per_user_limit as i64)
    .bind(sale.ttls.admission_secs as i64)
    .bind(sale.ttls.hold_secs as i64)
    .bind(sale.ttls.payment_secs as i64)
    .bind(sale.admission.rate_per_minute as i64)
    .bind(sale.admission.max_active as i64)
    .bind(sale.admission.stored_bounds().0)
    .bind(sale.admission.stored_bounds().1)
    .bind(sale.status.as_str())
    .bind(sale.created_at.timestamp_millis())
    .bind(sale.opening.as_str())
    .bind(sale.opening.seed().unwrap_or_default())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The sale's units ([`LedgerTx::insert_units`]): seats from a JSON array, a quantity from a
/// recursive series.
pub(super) async fn insert_units(conn: &mut SqliteConnection, sale: &Sale) -> LedgerResult<()> {
    let units = match &sale.stock {
        Stock::Seats(seats) => sqlx::query(
            "INSERT INTO stock_units (sale_id, unit_id) SELECT ?, value FROM json_each(?)",
        )
        .bind(sale.id.0)
        .bind(serde_json::to_string(seats).unwrap_or_default()),
        Stock::Quantity(n) => sqlx::query(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
             INSERT INTO stock_units (sale_id, unit_id) SELECT ?, CAST(n AS TEXT) FROM g",
        )
        .bind(*n as i64)
        .bind(sale.id.0),
    };
    units.execute(conn).await.map_err(db_error)?;
    Ok(())
}

fn sale_from_row(row: &SqliteRow, seats: Option<Vec<String>>) -> LedgerResult<Sale> {
    let bad = |what: &str| LedgerError::Other(format!("bad {what} in sales row"));
    let kind = StockKind::parse(row.get("stock_kind")).ok_or_else(|| bad("stock_kind"))?;
    let total: i64 = row.get("total");
    let stock = match kind {
        StockKind::Quantity => Stock::Quantity(total as u32),
        StockKind::Seats => Stock::Seats(seats.unwrap_or_default()),
    };
    let int = |name: &str| row.get::<i64, _>(name) as u32;
    Ok(Sale {
        id: SaleId(row.get("id")),
        name: row.get("name"),
        opens_at: from_ms(row.get("opens_at")),
        closes_at: row.get::<Option<i64>, _>("closes_at").map(from_ms),
        stock,
        per_user_limit: int("per_user_limit"),
        ttls: Ttls {
            admission_secs: int("admission_ttl_secs"),
            hold_secs: int("hold_ttl_secs"),
            payment_secs: int("payment_ttl_secs"),
        },
        admission: admission_from_row(row),
        proof_of_work: ProofOfWork {
            bits: row.get::<i64, _>("pow_bits") as u8,
            salt: row.get("pow_salt"),
        },
        opening: Opening::from_stored(row.get("opening"), row.get("lottery_seed")),
        status: SaleStatus::parse(row.get("status")).ok_or_else(|| bad("status"))?,
        created_at: from_ms(row.get("created_at")),
    })
}

/// The sale with its free units counted: a scan of the sale's free units, so not for every
/// second (see [`settings`]).
pub(super) async fn load(
    conn: &mut SqliteConnection,
    id: SaleId,
) -> LedgerResult<Option<SaleRecord>> {
    let Some(sale) = settings(&mut *conn, id).await? else {
        return Ok(None);
    };
    let (remaining, settings_version): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM stock_units WHERE sale_id = ?1 AND attempt_id IS NULL),
                settings_version
         FROM sales WHERE id = ?1",
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
pub(super) async fn settings(
    conn: &mut SqliteConnection,
    id: SaleId,
) -> LedgerResult<Option<Sale>> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM sales WHERE id = ?"))
        .bind(id.0)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    let seats = if row.get::<&str, _>("stock_kind") == "seats" {
        Some(
            sqlx::query_scalar(
                "SELECT unit_id FROM stock_units WHERE sale_id = ? ORDER BY unit_id",
            )
            .bind(id.0)
            .fetch_all(conn)
            .await
            .map_err(db_error)?,
        )
    } else {
        None
    };
    sale_from_row(&row, seats).map(Some)
}

/// The write transaction holds the database: the row is this transaction's.
pub(super) async fn lock_status(
    conn: &mut SqliteConnection,
    id: SaleId,
) -> LedgerResult<Option<String>> {
    sqlx::query_scalar("SELECT status FROM sales WHERE id = ?")
        .bind(id.0)
        .fetch_optional(conn)
        .await
        .map_err(db_error)
}

pub(super) async fn write_status(
    conn: &mut SqliteConnection,
    id: SaleId,
    status: SaleStatus,
) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE sales SET status = ?, settings_version = settings_version + 1 WHERE id = ?",
    )
    .bind(status.as_str())
    .bind(id.0)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::write_admission`].
pub(super) async fn write_admission(
    conn: &mut SqliteConnection,
    id: SaleId,
    admission: Admission,
) -> LedgerResult<()> {
    let (min, max) = admission.stored_bounds();
    sqlx::query(
        "UPDATE sales SET rate_per_minute = ?, max_active = ?, adaptive_min_rate = ?,
            adaptive_max_rate = ?, settings_version = settings_version + 1
         WHERE id = ?",
    )
    .bind(admission.rate_per_minute as i64)
    .bind(admission.max_active as i64)
    .bind(min)
    .bind(max)
    .bind(id.0)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn admitting(pool: &SqlitePool) -> LedgerResult<Vec<AdmissionPlan>> {
    let rows = sqlx::query(&format!(
        "SELECT id, rate_per_minute, max_active, adaptive_min_rate, adaptive_max_rate,
                admission_ttl_secs, opening, lottery_seed, closes_at FROM sales
         WHERE status = 'open' AND opens_at <= {NOW_MS}"
    ))
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| AdmissionPlan {
            sale: SaleId(r.get("id")),
            admission: admission_from_row(r),
            admission_ttl_secs: r.get::<i64, _>("admission_ttl_secs") as u32,
            opening: Opening::from_stored(r.get("opening"), r.get("lottery_seed")),
            closes_at: r.get::<Option<i64>, _>("closes_at").map(from_ms),
        })
        .collect())
}

pub(super) async fn stats(pool: &SqlitePool, id: SaleId) -> LedgerResult<LedgerStats> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    let sale = load(&mut conn, id).await?.ok_or(LedgerError::NotFound)?;
    drop(conn);
    let rows = sqlx::query_as(
        "SELECT state, reason, count(*) FROM attempts WHERE sale_id = ? GROUP BY state, reason",
    )
    .bind(id.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let units = sqlx::query_as(
        "SELECT a.state, SUM(h.quantity) FROM holds h JOIN attempts a ON a.id = h.attempt_id \
         WHERE h.sale_id = ? AND h.status <> 'returned' GROUP BY a.state",
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

pub(super) async fn free_stock(pool: &SqlitePool, id: SaleId) -> LedgerResult<Stock> {
    let kind: Option<String> = sqlx::query_scalar("SELECT stock_kind FROM sales WHERE id = ?")
        .bind(id.0)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let kind = kind.ok_or(LedgerError::NotFound)?;
    let free: Vec<String> = sqlx::query_scalar(
        "SELECT unit_id FROM stock_units WHERE sale_id = ? AND attempt_id IS NULL ORDER BY unit_id",
    )
    .bind(id.0)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    let kind = StockKind::parse(&kind)
        .ok_or_else(|| LedgerError::Other("bad stock_kind in sales row".into()))?;
    Ok(Stock::from_free_units(kind, free))
}

fn admission_from_row(row: &SqliteRow) -> Admission {
    Admission::from_stored(
        row.get("rate_per_minute"),
        row.get("max_active"),
        row.get("adaptive_min_rate"),
        row.get("adaptive_max_rate"),
    )
}

/// [`LedgerTx::write_proof_of_work`].
pub(super) async fn write_proof_of_work(
    conn: &mut SqliteConnection,
    id: SaleId,
    pow: &ProofOfWork,
) -> LedgerResult<()> {
    sqlx::query("UPDATE sales SET pow_bits = ?, pow_salt = ? WHERE id = ?")
        .bind(i64::from(pow.bits))
        .bind(&pow.salt)
        .bind(id.0)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::write_details`].
pub(super) async fn write_details(
    conn: &mut SqliteConnection,
    id: SaleId,
    name: Option<&str>,
    closes_at: Option<DateTime<Utc>>,
) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE sales SET name = coalesce(?2, name), closes_at = coalesce(?3, closes_at),
            settings_version = settings_version + 1
         WHERE id = ?1",
    )
    .bind(id.0)
    .bind(name)
    .bind(closes_at.map(|t| t.timestamp_millis()))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::lock_sale_stock`]: the write transaction holds the database.
pub(super) async fn lock_stock(
    conn: &mut SqliteConnection,
    id: SaleId,
) -> LedgerResult<Option<(StockKind, u32)>> {
    let row: Option<(String, i64)> =
        sqlx::query_as("SELECT stock_kind, total FROM sales WHERE id = ?")
            .bind(id.0)
            .fetch_optional(conn)
            .await
            .map_err(db_error)?;
    Ok(row.and_then(|(kind, total)| Some((StockKind::parse(&kind)?, total as u32))))
}

/// [`LedgerTx::add_units`].
pub(super) async fn add_units(conn: &mut SqliteConnection, id: SaleId, n: u32) -> LedgerResult<()> {
    sqlx::query(
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?2)
         INSERT INTO stock_units (sale_id, unit_id)
         SELECT ?1, CAST(top.n + g.n AS TEXT) FROM g,
           (SELECT coalesce(max(CAST(unit_id AS INTEGER)), 0) AS n FROM stock_units
            WHERE sale_id = ?1) top",
    )
    .bind(id.0)
    .bind(n as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::add_seats`].
pub(super) async fn add_seats(
    conn: &mut SqliteConnection,
    id: SaleId,
    seats: &[String],
) -> LedgerResult<()> {
    let list = serde_json::to_string(seats).unwrap_or_default();
    let existing: Option<String> = sqlx::query_scalar(
        "SELECT unit_id FROM stock_units
         WHERE sale_id = ?1 AND unit_id IN (SELECT value FROM json_each(?2)) LIMIT 1",
    )
    .bind(id.0)
    .bind(&list)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    if let Some(seat) = existing {
        return Err(LedgerError::SeatExists(seat));
    }
    sqlx::query("INSERT INTO stock_units (sale_id, unit_id) SELECT ?1, value FROM json_each(?2)")
        .bind(id.0)
        .bind(&list)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`LedgerTx::withdraw_units`]: free units only (those no attempt holds), any of them.
pub(super) async fn withdraw_units(
    conn: &mut SqliteConnection,
    id: SaleId,
    n: u32,
) -> LedgerResult<u32> {
    let done = sqlx::query(
        "DELETE FROM stock_units WHERE sale_id = ?1 AND unit_id IN (
           SELECT unit_id FROM stock_units WHERE sale_id = ?1 AND attempt_id IS NULL LIMIT ?2)",
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
    conn: &mut SqliteConnection,
    id: SaleId,
    seats: &[String],
) -> LedgerResult<u32> {
    let done = sqlx::query(
        "DELETE FROM stock_units WHERE sale_id = ?1 AND attempt_id IS NULL
           AND unit_id IN (SELECT value FROM json_each(?2))",
    )
    .bind(id.0)
    .bind(serde_json::to_string(seats).unwrap_or_default())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() as u32)
}

/// [`LedgerTx::write_sale_total`].
pub(super) async fn write_total(
    conn: &mut SqliteConnection,
    id: SaleId,
    total: u32,
) -> LedgerResult<()> {
    sqlx::query("UPDATE sales SET total = ?2 WHERE id = ?1")
        .bind(id.0)
        .bind(total as i64)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// [`Ledger::sales_behind_store`].
pub(super) async fn behind_store(
    pool: &SqlitePool,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        pool,
        "SELECT id, settings_version FROM sales WHERE store_version < settings_version
         ORDER BY id LIMIT ?",
        limit,
    )
    .await
}

/// [`Ledger::sales_settings_to_check`].
pub(super) async fn settings_to_check(
    pool: &SqlitePool,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    sale_versions(
        pool,
        "SELECT id, settings_version FROM sales
         ORDER BY status = 'closed', created_at DESC, id DESC LIMIT ?",
        limit,
    )
    .await
}

/// The (sale, version) rows `sql` selects, its one parameter the most rows.
async fn sale_versions(
    pool: &SqlitePool,
    sql: &str,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(sql)
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`Ledger::sales_followed_within`].
pub(super) async fn followed_within(
    pool: &SqlitePool,
    within_ms: u64,
    limit: u32,
) -> LedgerResult<Vec<(SaleId, u64)>> {
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(&format!(
        "SELECT id, store_version FROM sales WHERE store_followed_at > {NOW_MS} - ?
         ORDER BY store_followed_at DESC LIMIT ?"
    ))
    .bind(within_ms as i64)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(crate::ledger::sale_versions_from(rows))
}

/// [`Ledger::store_followed`].
pub(super) async fn store_followed(
    ledger: &SqliteLedger,
    id: SaleId,
    version: u64,
) -> LedgerResult<()> {
    let mut tx = ledger.write().await?;
    sqlx::query(&format!(
        "UPDATE sales SET store_version = max(store_version, ?2), store_followed_at = {NOW_MS}
         WHERE id = ?1"
    ))
    .bind(id.0)
    .bind(version as i64)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(())
}
