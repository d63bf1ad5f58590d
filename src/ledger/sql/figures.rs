//! A sale's figures over time (`sale_figures`).

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{db_error, Conn, DbRow};
use crate::domain::SaleId;
use crate::ledger::sql_types::At;
use crate::ledger::{LedgerResult, SaleFigures};

pub(super) async fn record(conn: &mut Conn, f: &SaleFigures) -> LedgerResult<()> {
    sqlx::query(
        "INSERT INTO sale_figures (sale_id, at, waiting, active, admitted_total, holding_units,
            paying_units, sold_units, remaining, rate_per_minute, decision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING",
    )
    .bind(f.sale.0)
    .bind(At(f.at))
    .bind(f.waiting as i64)
    .bind(f.active as i64)
    .bind(f.admitted_total as i64)
    .bind(f.holding_units as i64)
    .bind(f.paying_units as i64)
    .bind(f.sold_units as i64)
    .bind(f.remaining as i64)
    .bind(f.rate_per_minute)
    .bind(&f.decision)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn since(
    conn: &mut Conn,
    sale: SaleId,
    since: DateTime<Utc>,
) -> LedgerResult<Vec<SaleFigures>> {
    let rows =
        sqlx::query("SELECT * FROM sale_figures WHERE sale_id = $1 AND at >= $2 ORDER BY at")
            .bind(sale.0)
            .bind(At(since))
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
    let n = |r: &DbRow, c: &str| r.get::<i64, _>(c).max(0) as u64;
    Ok(rows
        .iter()
        .map(|r| SaleFigures {
            sale,
            at: r.get::<At, _>("at").0,
            waiting: n(r, "waiting"),
            active: n(r, "active"),
            admitted_total: n(r, "admitted_total"),
            holding_units: n(r, "holding_units"),
            paying_units: n(r, "paying_units"),
            sold_units: n(r, "sold_units"),
            remaining: n(r, "remaining"),
            rate_per_minute: r.get("rate_per_minute"),
            decision: r.get("decision"),
        })
        .collect())
}

pub(super) async fn prune(conn: &mut Conn, before: DateTime<Utc>) -> LedgerResult<u64> {
    let done = sqlx::query("DELETE FROM sale_figures WHERE at < $1")
        .bind(At(before))
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected())
}
