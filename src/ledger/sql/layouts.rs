//! Venue layouts (`crate::ledger::LayoutLedger`): kept whole as JSON.

use async_trait::async_trait;
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use super::{db_error, Conn, SqlLedger};
use crate::domain::venue::Layout;
use crate::domain::AdminAction;
use crate::ledger::sql_types::At;
use crate::ledger::{flows, LayoutLedger, LayoutSummary, LedgerError, LedgerResult};

async fn insert(conn: &mut Conn, id: Uuid, layout: &Layout) -> LedgerResult<()> {
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

#[async_trait]
impl LayoutLedger for SqlLedger {
    async fn create_layout(
        &self,
        id: Uuid,
        layout: &crate::domain::venue::Layout,
        entry: &AdminAction,
    ) -> LedgerResult<()> {
        in_write!(self, |tx| async {
            insert(&mut *tx, id, layout).await?;
            flows::record_admin_action(&mut *tx, entry).await
        })
        .await
    }

    async fn layout(&self, id: Uuid) -> LedgerResult<Option<crate::domain::venue::Layout>> {
        let conn = &mut *self.conn().await?;
        let row = sqlx::query("SELECT body FROM layouts WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await
            .map_err(db_error)?;
        Ok(row.map(|r| r.get::<Json<Layout>, _>("body").0))
    }

    async fn layouts(&self) -> LedgerResult<Vec<LayoutSummary>> {
        let conn = &mut *self.conn().await?;
        let rows = sqlx::query(
            "SELECT id, name, seats, created_at FROM layouts ORDER BY created_at DESC, id",
        )
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
}
