//! The operators' tables: named admin keys (by the hash of their secret) and the admin audit
//! log, each entry written with its outbox event.

use async_trait::async_trait;
use sqlx::types::Json;
use sqlx::Row;

use super::{db_error, Conn, DbRow};
use crate::domain::{AdminAction, Role, SaleId};
use crate::ledger::sql_types::At;
use crate::ledger::transition::OperatorRows;

#[cfg(doc)]
use crate::ledger::transition::LedgerTx;
use crate::ledger::{AdminKeyRow, AuditQuery, LedgerError, LedgerResult};

macro_rules! key_columns {
    () => {
        "id, name, role, created_by, created_at, revoked_at"
    };
}

fn key_from_row(r: &DbRow) -> LedgerResult<AdminKeyRow> {
    Ok(AdminKeyRow {
        id: r.get("id"),
        name: r.get("name"),
        role: Role::parse(r.get("role"))
            .ok_or_else(|| LedgerError::Other("bad role in admin_keys row".into()))?,
        created_by: r.get("created_by"),
        created_at: r.get::<At, _>("created_at").0,
        revoked_at: r.get::<Option<At>, _>("revoked_at").map(|t| t.0),
    })
}

pub(super) async fn key(conn: &mut Conn, hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
    sqlx::query(concat!(
        "SELECT ",
        key_columns!(),
        " FROM admin_keys WHERE key_hash = $1"
    ))
    .bind(hash)
    .fetch_optional(conn)
    .await
    .map_err(db_error)?
    .as_ref()
    .map(key_from_row)
    .transpose()
}

pub(super) async fn keys(conn: &mut Conn) -> LedgerResult<Vec<AdminKeyRow>> {
    sqlx::query(concat!(
        "SELECT ",
        key_columns!(),
        " FROM admin_keys ORDER BY id"
    ))
    .fetch_all(conn)
    .await
    .map_err(db_error)?
    .iter()
    .map(key_from_row)
    .collect()
}

pub(super) async fn audit(conn: &mut Conn, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
    let rows = sqlx::query(
        "SELECT id, actor, action, target, sale_id, before, after, at FROM admin_audit
         WHERE ($1 IS NULL OR sale_id = $1) AND ($2 IS NULL OR id < $2)
         ORDER BY id DESC LIMIT $3",
    )
    .bind(query.sale.map(|s| s.0))
    .bind(query.before)
    .bind(i64::from(query.limit))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    let json = |r: &DbRow, column: &str| {
        r.try_get::<Option<Json<serde_json::Value>>, _>(column)
            .ok()
            .flatten()
            .map(|v| v.0)
    };
    Ok(rows
        .iter()
        .map(|r| AdminAction {
            id: r.get("id"),
            actor: r.get("actor"),
            action: r.get("action"),
            target: r.get("target"),
            sale: r.get::<Option<uuid::Uuid>, _>("sale_id").map(SaleId),
            before: json(r, "before"),
            after: json(r, "after"),
            at: r.get::<At, _>("at").0,
        })
        .collect())
}

#[async_trait]
impl OperatorRows for Conn {
    async fn insert_admin_action(&mut self, action: &AdminAction) -> LedgerResult<()> {
        let conn = self;
        sqlx::query(
            "INSERT INTO admin_audit (id, actor, action, target, sale_id, before, after, at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(action.id)
        .bind(&action.actor)
        .bind(&action.action)
        .bind(&action.target)
        .bind(action.sale.map(|s| s.0))
        .bind(action.before.as_ref().map(Json))
        .bind(action.after.as_ref().map(Json))
        .bind(At(action.at))
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn insert_admin_key(&mut self, key: &AdminKeyRow, key_hash: &str) -> LedgerResult<()> {
        let conn = self;
        let hash: &str = key_hash;
        let inserted = sqlx::query(
            "INSERT INTO admin_keys (id, name, role, key_hash, created_by, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
        )
        .bind(key.id)
        .bind(&key.name)
        .bind(key.role.as_str())
        .bind(hash)
        .bind(&key.created_by)
        .bind(At(key.created_at))
        .execute(conn)
        .await
        .map_err(db_error)?;
        match inserted.rows_affected() {
            0 => Err(LedgerError::NameTaken(key.name.clone())),
            _ => Ok(()),
        }
    }

    async fn lock_admin_key(&mut self, name: &str) -> LedgerResult<Option<AdminKeyRow>> {
        let conn = self;
        sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM admin_keys WHERE name = $1",
            row_lock!(" FOR UPDATE")
        ))
        .bind(name)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?
        .as_ref()
        .map(key_from_row)
        .transpose()
    }

    async fn write_key_revoked(&mut self, name: &str) -> LedgerResult<AdminKeyRow> {
        let conn = self;
        let row = sqlx::query(concat!(
            "UPDATE admin_keys SET revoked_at = ",
            now!(),
            " WHERE name = $1 RETURNING ",
            key_columns!()
        ))
        .bind(name)
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
        key_from_row(&row)
    }
}
