//! Venue layouts (`crate::ledger::LayoutLedger`): kept whole as JSON.

use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, Conn};
use crate::domain::venue::Layout;
use crate::ledger::sql_types::At;
use crate::ledger::{LayoutSummary, LedgerResult};

pub(super) async fn insert(conn: &mut Conn, id: Uuid, layout: &Layout) -> LedgerResult<()> {
    sqlx::query(concat!(
        "INSERT INTO layouts (id, name, body, seats, created_at) VALUES ($1, $2, $3, $4, ",
        now!(),
        ")"
    ))
    .bind(id)
    .bind(&layout.name)
    .bind(Json(layout))
    .bind(layout.seat_ids().len() as i32)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn load(conn: &mut Conn, id: Uuid) -> LedgerResult<Option<Layout>> {
    let row = sqlx::query("SELECT body FROM layouts WHERE id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| r.get::<Json<Layout>, _>("body").0))
}

pub(super) async fn list(conn: &mut Conn) -> LedgerResult<Vec<LayoutSummary>> {
    let rows =
        sqlx::query("SELECT id, name, seats, created_at FROM layouts ORDER BY created_at DESC, id")
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| LayoutSummary {
            id: r.get("id"),
            name: r.get("name"),
            seats: r.get::<i32, _>("seats") as u32,
            created_at: r.get::<At, _>("created_at").0,
        })
        .collect())
}
