//! A sale's phases, member lists and access codes (`crate::ledger::PhaseLedger`).

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, sales, Conn, SqlLedger};
use crate::domain::phase::{Audience, Phase};
use crate::domain::{AdminAction, Admission, SaleId, UserId};
use crate::ledger::sql_types::{At, TextList};
use crate::ledger::{
    flows, AccessCode, LedgerError, LedgerResult, PhaseCounts, PhaseLedger, Redeemed,
};

async fn replace(conn: &mut Conn, sale: SaleId, phases: &[Phase]) -> LedgerResult<()> {
    sqlx::query("DELETE FROM sale_phases WHERE sale_id = $1")
        .bind(sale.0)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    for (position, p) in phases.iter().enumerate() {
        sqlx::query(
            "INSERT INTO sale_phases (sale_id, position, name, starts_at, audience,
                rate_per_minute, max_active, per_user_limit, first_serial, lottery_seed,
                joins_from, applied)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(sale.0)
        .bind(position as i32)
        .bind(&p.name)
        .bind(At(p.starts_at))
        .bind(p.audience.as_str())
        .bind(p.admission.rate_per_minute as i32)
        .bind(p.admission.max_active as i32)
        .bind(p.per_user_limit as i32)
        .bind(p.first_serial.map(|s| s as i64))
        .bind(&p.lottery_seed)
        .bind(At::of(p.joins_from))
        .bind(p.applied)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    // The lists stay with their positions: each phase counts what its position's list holds.
    sqlx::query(
        "UPDATE sale_phases SET members = (SELECT count(*) FROM phase_members m
            WHERE m.sale_id = sale_phases.sale_id AND m.position = sale_phases.position)
         WHERE sale_id = $1",
    )
    .bind(sale.0)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Marks the phase started (its first serial written unless its pre-queue wrote it); true
/// when this call did.
async fn mark_begun(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    first_serial: u64,
) -> LedgerResult<bool> {
    let done = sqlx::query(
        "UPDATE sale_phases SET first_serial = coalesce(first_serial, $3), applied = true
         WHERE sale_id = $1 AND position = $2 AND NOT applied",
    )
    .bind(sale.0)
    .bind(position as i32)
    .bind(first_serial as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// Opens a lottery phase's pre-queue: its first serial written; true when this call did.
async fn open_prequeue(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    first_serial: u64,
) -> LedgerResult<bool> {
    let done = sqlx::query(
        "UPDATE sale_phases SET first_serial = $3
         WHERE sale_id = $1 AND position = $2 AND first_serial IS NULL",
    )
    .bind(sale.0)
    .bind(position as i32)
    .bind(first_serial as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// Every written first serial of the sale's phases past 1 set to 1 (see
/// `PhaseLedger::renumber_phases`); how many changed.
async fn renumber(conn: &mut Conn, sale: SaleId) -> LedgerResult<u64> {
    let done = sqlx::query(
        "UPDATE sale_phases SET first_serial = 1 WHERE sale_id = $1 AND first_serial > 1",
    )
    .bind(sale.0)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}

async fn write_per_user_limit(conn: &mut Conn, sale: SaleId, limit: u32) -> LedgerResult<()> {
    sqlx::query(
        "UPDATE sales SET per_user_limit = $2, settings_version = settings_version + 1
         WHERE id = $1",
    )
    .bind(sale.0)
    .bind(limit as i32)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

async fn add_members(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    users: &[String],
) -> LedgerResult<u64> {
    let added = sqlx::query(concat!(
        "INSERT INTO phase_members (sale_id, position, user_id) SELECT $1, $2, value FROM ",
        each_text!("$3"),
        " WHERE true ON CONFLICT (sale_id, position, user_id) DO NOTHING"
    ))
    .bind(sale.0)
    .bind(position as i32)
    .bind(TextList(users))
    .execute(&mut *conn)
    .await
    .map_err(db_error)?
    .rows_affected();
    sqlx::query(
        "UPDATE sale_phases SET members = members + $3 WHERE sale_id = $1 AND position = $2",
    )
    .bind(sale.0)
    .bind(position as i32)
    .bind(added as i64)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(added)
}

async fn count_members(conn: &mut Conn, sale: SaleId, position: u32) -> LedgerResult<u64> {
    count_in(conn, "phase_members", sale, position).await
}

async fn count_codes(conn: &mut Conn, sale: SaleId, position: u32) -> LedgerResult<u64> {
    count_in(conn, "access_codes", sale, position).await
}

/// The rows of `table` (one of this ledger's, never a caller's word) in the phase.
async fn count_in(
    conn: &mut Conn,
    table: &'static str,
    sale: SaleId,
    position: u32,
) -> LedgerResult<u64> {
    let statement = format!("SELECT count(*) FROM {table} WHERE sale_id = $1 AND position = $2");
    let total: i64 = sqlx::query_scalar(&statement)
        .bind(sale.0)
        .bind(position as i32)
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
    Ok(total as u64)
}

/// Whether `table` (one of this ledger's, never a caller's word) has a row of the user in
/// the phase.
async fn user_in(
    conn: &mut Conn,
    table: &'static str,
    sale: SaleId,
    position: u32,
    user: &UserId,
) -> LedgerResult<bool> {
    let statement = format!(
        "SELECT 1 FROM {table} WHERE sale_id = $1 AND position = $2 AND user_id = $3 LIMIT 1"
    );
    let found: Option<i32> = sqlx::query_scalar(&statement)
        .bind(sale.0)
        .bind(position as i32)
        .bind(user.as_str())
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    Ok(found.is_some())
}

async fn add_codes(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    codes: &[String],
    max_uses: u32,
) -> LedgerResult<()> {
    sqlx::query(concat!(
        "INSERT INTO access_codes (sale_id, code, position, max_uses, used)
         SELECT $1, value, $2, $3, 0 FROM ",
        each_text!("$4")
    ))
    .bind(sale.0)
    .bind(position as i32)
    .bind(max_uses as i32)
    .bind(TextList(codes))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Whether the user redeemed one of the phase's codes before.
async fn redeemed_before(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    user: &UserId,
) -> LedgerResult<bool> {
    user_in(conn, "code_redemptions", sale, position, user).await
}

/// Takes a use of `code` for `user`, in the caller's write transaction: the use counted only
/// if one is left, then the redemption written.
async fn take_use(
    conn: &mut Conn,
    sale: SaleId,
    position: u32,
    user: &UserId,
    code: &str,
) -> LedgerResult<Redeemed> {
    let taken = sqlx::query(
        "UPDATE access_codes SET used = used + 1
         WHERE sale_id = $1 AND code = $2 AND position = $3 AND used < max_uses",
    )
    .bind(sale.0)
    .bind(code)
    .bind(position as i32)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    if taken.rows_affected() == 0 {
        return Ok(Redeemed::No);
    }
    sqlx::query(concat!(
        "INSERT INTO code_redemptions (sale_id, code, user_id, position, redeemed_at)
         VALUES ($1, $2, $3, $4, ",
        now!(),
        ")"
    ))
    .bind(sale.0)
    .bind(code)
    .bind(user.as_str())
    .bind(position as i32)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(Redeemed::Yes)
}

#[async_trait]
impl PhaseLedger for SqlLedger {
    async fn phases(&self, sale: SaleId) -> LedgerResult<Vec<crate::domain::phase::Phase>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT name, starts_at, audience, rate_per_minute, max_active, per_user_limit,
                    first_serial, lottery_seed, joins_from, applied, members
             FROM sale_phases WHERE sale_id = $1 ORDER BY position",
        )
        .bind(sale.0)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                let int = |name: &str| r.get::<i32, _>(name) as u32;
                let bad = || LedgerError::Other("bad row in sale_phases".into());
                Ok(Phase {
                    name: r.get("name"),
                    starts_at: r.get::<At, _>("starts_at").0,
                    audience: Audience::parse(r.get("audience")).ok_or_else(bad)?,
                    admission: Admission::parse(int("rate_per_minute"), int("max_active"), None)
                        .map_err(|_| bad())?,
                    per_user_limit: int("per_user_limit"),
                    lottery_seed: r.get("lottery_seed"),
                    joins_from: r.get::<Option<At>, _>("joins_from").map(|t| t.0),
                    first_serial: r.get::<Option<i64>, _>("first_serial").map(|s| s as u64),
                    applied: r.get("applied"),
                    members: r.get::<i64, _>("members").max(0) as u64,
                })
            })
            .collect()
    }

    async fn set_phases(
        &self,
        sale: SaleId,
        list: &[crate::domain::phase::Phase],
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            replace(&mut *tx, sale, list).await?;
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn begin_phase(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
        admission: &crate::domain::Admission,
        per_user_limit: u32,
    ) -> LedgerResult<bool> {
        in_write!(self, |tx| async {
            if !mark_begun(&mut *tx, sale, position, first_serial).await? {
                return Ok::<_, LedgerError>(false);
            }
            sales::write_admission(&mut *tx, sale, *admission).await?;
            write_per_user_limit(&mut *tx, sale, per_user_limit).await?;
            Ok(true)
        })
        .await
    }

    async fn open_prequeue(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
    ) -> LedgerResult<bool> {
        in_write!(self, |tx| open_prequeue(tx, sale, position, first_serial)).await
    }

    async fn renumber_phases(&self, sale: SaleId) -> LedgerResult<u64> {
        in_write!(self, |tx| renumber(tx, sale)).await
    }

    async fn add_members(
        &self,
        sale: SaleId,
        position: u32,
        users: &[String],
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<(u64, u64)> {
        in_write!(self, |tx| async {
            let mut added = 0;
            // In chunks: one statement binds a chunk as one list.
            for chunk in users.chunks(50_000) {
                added += add_members(&mut *tx, sale, position, chunk).await?;
            }
            let total = count_members(&mut *tx, sale, position).await?;
            if total > max {
                return Err(LedgerError::TooMany {
                    field: "user_ids",
                    what: "user ids on a list",
                    max,
                    would: total,
                });
            }
            flows::record_admin_action(&mut *tx, entry).await?;
            Ok::<_, LedgerError>((added, total))
        })
        .await
    }

    async fn members(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<String>> {
        let conn = &mut *self.conn().await?;
        sqlx::query_scalar(
            "SELECT user_id FROM phase_members
             WHERE sale_id = $1 AND position = $2 AND user_id > $3
             ORDER BY user_id LIMIT $4",
        )
        .bind(sale.0)
        .bind(position as i32)
        .bind(after.unwrap_or(""))
        .bind(limit as i64)
        .fetch_all(conn)
        .await
        .map_err(db_error)
    }

    async fn is_member(&self, sale: SaleId, position: u32, user: &UserId) -> LedgerResult<bool> {
        let conn = &mut *self.conn().await?;
        user_in(conn, "phase_members", sale, position, user).await
    }

    async fn sales_with_lists(&self) -> LedgerResult<Vec<SaleId>> {
        let conn = &mut *self.conn().await?;
        let ids: Vec<Uuid> = sqlx::query_scalar(
            "SELECT DISTINCT p.sale_id FROM sale_phases p JOIN sales s ON s.id = p.sale_id
             WHERE p.audience = 'list' AND s.status <> 'closed'",
        )
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Ok(ids.into_iter().map(SaleId).collect())
    }

    async fn add_codes(
        &self,
        sale: SaleId,
        position: u32,
        codes: &[String],
        max_uses: u32,
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            add_codes(&mut *tx, sale, position, codes, max_uses).await?;
            let total = count_codes(&mut *tx, sale, position).await?;
            if total > max {
                return Err(LedgerError::TooMany {
                    field: "count",
                    what: "access codes",
                    max,
                    would: total,
                });
            }
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn codes(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<crate::ledger::AccessCode>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT code, max_uses, used FROM access_codes
             WHERE sale_id = $1 AND position = $2 AND code > $3
             ORDER BY code LIMIT $4",
        )
        .bind(sale.0)
        .bind(position as i32)
        .bind(after.unwrap_or(""))
        .bind(limit as i64)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| AccessCode {
                code: r.get("code"),
                max_uses: r.get::<i32, _>("max_uses") as u32,
                used: r.get::<i32, _>("used") as u32,
            })
            .collect())
    }

    async fn redeem(
        &self,
        sale: SaleId,
        position: u32,
        user: &UserId,
        code: Option<&str>,
    ) -> LedgerResult<crate::ledger::Redeemed> {
        use crate::ledger::Redeemed;
        // A user who redeemed before joins again without a write.
        if redeemed_before(&mut *self.conn().await?, sale, position, user).await? {
            return Ok(Redeemed::Yes);
        }
        let Some(code) = code else {
            return Ok(Redeemed::No);
        };
        in_write!(self, |tx| async {
            if redeemed_before(&mut *tx, sale, position, user).await? {
                return Ok::<_, LedgerError>(Redeemed::Yes);
            }
            take_use(&mut *tx, sale, position, user, code).await
        })
        .await
    }

    async fn phase_counts(
        &self,
        sale: SaleId,
        ranges: &[Option<(u64, u64)>],
    ) -> LedgerResult<Vec<crate::ledger::PhaseCounts>> {
        let conn = &mut *self.conn().await?;
        let mut out = Vec::with_capacity(ranges.len());
        for (position, range) in ranges.iter().enumerate() {
            let mut counts = PhaseCounts::default();
            if let Some((from, to)) = range {
                let row = sqlx::query(
                    "SELECT count(*) AS admitted,
                            CAST(coalesce(sum(CASE WHEN state = 'CONFIRMED' THEN 1 ELSE 0 END), 0)
                                 AS BIGINT) AS bought
                     FROM attempts WHERE sale_id = $1 AND seq >= $2 AND seq < $3",
                )
                .bind(sale.0)
                .bind(*from as i64)
                .bind(*to as i64)
                .fetch_one(&mut *conn)
                .await
                .map_err(db_error)?;
                counts.admitted = row.get::<i64, _>("admitted") as u64;
                counts.bought = row.get::<i64, _>("bought") as u64;
            }
            let row = sqlx::query(
                "SELECT (SELECT count(*) FROM phase_members WHERE sale_id = $1 AND position = $2)
                            AS members,
                        (SELECT count(*) FROM access_codes WHERE sale_id = $1 AND position = $2)
                            AS codes,
                        (SELECT count(*) FROM code_redemptions WHERE sale_id = $1 AND position = $2)
                            AS redeemed",
            )
            .bind(sale.0)
            .bind(position as i32)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_error)?;
            counts.members = row.get::<i64, _>("members") as u64;
            counts.codes = row.get::<i64, _>("codes") as u64;
            counts.redeemed = row.get::<i64, _>("redeemed") as u64;
            out.push(counts);
        }
        Ok(out)
    }
}
