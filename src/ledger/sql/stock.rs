//! A quantity sale's free units: one counter per sale (`quantity_stock`), taken and given back
//! by conditional updates. Taking costs one row's update whatever the sale has sold, and a
//! batch of holds or claims takes all its units with one read and one write of that row.
//! Named seats are rows of `stock_units` instead (`attempts.rs` claims them by id).

use async_trait::async_trait;

use super::{db_error, Conn};
use crate::domain::SaleId;
use crate::ledger::transition::StockRows;
use crate::ledger::{LedgerError, LedgerResult};

/// The sale's counter.
const FREE: &str = "SELECT free FROM quantity_stock WHERE sale_id = $1";

/// A new quantity sale's counter: all `n` free.
pub(super) async fn create(conn: &mut Conn, sale: SaleId, n: u32) -> LedgerResult<()> {
    sqlx::query("INSERT INTO quantity_stock (sale_id, free) VALUES ($1, $2)")
        .bind(sale.0)
        .bind(n as i32)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The sale's free units; `None` when it has no counter (named seats).
pub(super) async fn free(conn: &mut Conn, sale: SaleId) -> LedgerResult<Option<u32>> {
    let free: Option<i32> = sqlx::query_scalar(FREE)
        .bind(sale.0)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    Ok(free.map(|n| n.max(0) as u32))
}

/// Takes `n` free units, all or none: whether they were free.
pub(super) async fn take(conn: &mut Conn, sale: SaleId, n: u32) -> LedgerResult<bool> {
    let done =
        sqlx::query("UPDATE quantity_stock SET free = free - $2 WHERE sale_id = $1 AND free >= $2")
            .bind(sale.0)
            .bind(n as i32)
            .execute(conn)
            .await
            .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// The sale's free units, its counter locked until the transaction ends.
async fn lock(conn: &mut Conn, sale: SaleId) -> LedgerResult<i64> {
    let free: Option<i32> = sqlx::query_scalar(concat!(
        "SELECT free FROM quantity_stock WHERE sale_id = $1",
        row_lock!(" FOR UPDATE")
    ))
    .bind(sale.0)
    .fetch_optional(conn)
    .await
    .map_err(db_error)?;
    free.map(i64::from)
        .ok_or_else(|| LedgerError::Other("a quantity sale without a counter".into()))
}

/// Gives `n` units back.
pub(super) async fn give_back(conn: &mut Conn, sale: SaleId, n: u32) -> LedgerResult<()> {
    sqlx::query("UPDATE quantity_stock SET free = free + $2 WHERE sale_id = $1")
        .bind(sale.0)
        .bind(n as i32)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Withdraws up to `n` free units; how many it withdrew.
pub(super) async fn withdraw(conn: &mut Conn, sale: SaleId, n: u32) -> LedgerResult<u32> {
    let done = (lock(&mut *conn, sale).await?.max(0) as u32).min(n);
    if done > 0 {
        take(conn, sale, done).await?;
    }
    Ok(done)
}

#[async_trait]
impl StockRows for Conn {
    /// Takes each of `wants` (units, in order) that is free once the ones before it are taken:
    /// whether each was. One read of the counter, locked until the transaction ends, and one
    /// write, however many ask.
    async fn take_each(&mut self, sale: SaleId, wants: &[u32]) -> LedgerResult<Vec<bool>> {
        let conn = self;
        let mut left = lock(&mut *conn, sale).await?;
        let taken: Vec<bool> = wants
            .iter()
            .map(|&n| {
                let fits = i64::from(n) <= left;
                if fits {
                    left -= i64::from(n);
                }
                fits
            })
            .collect();
        let total: i64 = wants
            .iter()
            .zip(&taken)
            .filter(|(_, t)| **t)
            .map(|(n, _)| i64::from(*n))
            .sum();
        if total > 0 && !take(conn, sale, total as u32).await? {
            return Err(LedgerError::Other("the locked counter changed".into()));
        }
        Ok(taken)
    }

    async fn take_all(&mut self, sale: SaleId, n: u32) -> LedgerResult<bool> {
        take(self, sale, n).await
    }
}
