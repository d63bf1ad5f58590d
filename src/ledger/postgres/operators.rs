//! The operators' tables on PostgreSQL: named admin keys (by the hash of their secret) and the
//! admin audit log, each entry written with its outbox event.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::db_error;
use crate::domain::{AdminAction, Role, SaleId};
#[cfg(doc)]
use crate::ledger::transition::LedgerTx;
use crate::ledger::{flows, AdminKeyRow, Audit, AuditQuery, LedgerError, LedgerResult};

const KEY_COLUMNS: &str = "id, name, role, created_by, created_at, revoked_at";

fn key_from_row(r: &PgRow) -> LedgerResult<AdminKeyRow> {
    Ok(AdminKeyRow {
        id: r.get("id"),
        name: r.get("name"),
        role: Role::parse(r.get("role"))
            .ok_or_else(|| LedgerError::Other("bad role in admin_keys row".into()))?,
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        revoked_at: r.get("revoked_at"),
    })
}

pub(super) async fn create_key(
    pool: &PgPool,
    key: &AdminKeyRow,
    hash: &str,
    entry: &AdminAction,
) -> LedgerResult<()> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    flows::create_admin_key(&mut *tx, key, hash, entry).await?;
    tx.commit().await.map_err(db_error)
}

/// [`LedgerTx::insert_admin_key`].
pub(super) async fn insert_key(
    conn: &mut PgConnection,
    key: &AdminKeyRow,
    hash: &str,
) -> LedgerResult<()> {
    let inserted = sqlx::query(
        "INSERT INTO admin_keys (id, name, role, key_hash, created_by, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
    )
    .bind(key.id)
    .bind(&key.name)
    .bind(key.role.as_str())
    .bind(hash)
    .bind(&key.created_by)
    .bind(key.created_at)
    .execute(conn)
    .await
    .map_err(db_error)?;
    match inserted.rows_affected() {
        0 => Err(LedgerError::NameTaken(key.name.clone())),
        _ => Ok(()),
    }
}

pub(super) async fn key(pool: &PgPool, hash: &str) -> LedgerResult<Option<AdminKeyRow>> {
    sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM admin_keys WHERE key_hash = $1"
    ))
    .bind(hash)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?
    .as_ref()
    .map(key_from_row)
    .transpose()
}

pub(super) async fn keys(pool: &PgPool) -> LedgerResult<Vec<AdminKeyRow>> {
    sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM admin_keys ORDER BY id"))
        .fetch_all(pool)
        .await
        .map_err(db_error)?
        .iter()
        .map(key_from_row)
        .collect()
}

pub(super) async fn revoke_key(
    pool: &PgPool,
    name: &str,
    audit: &Audit<'_, AdminKeyRow>,
) -> LedgerResult<Option<AdminKeyRow>> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let after = flows::revoke_admin_key(&mut *tx, name, audit).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(after)
}

/// [`LedgerTx::lock_admin_key`].
pub(super) async fn lock_key(
    conn: &mut PgConnection,
    name: &str,
) -> LedgerResult<Option<AdminKeyRow>> {
    sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM admin_keys WHERE name = $1 FOR UPDATE"
    ))
    .bind(name)
    .fetch_optional(conn)
    .await
    .map_err(db_error)?
    .as_ref()
    .map(key_from_row)
    .transpose()
}

/// [`LedgerTx::write_key_revoked`].
pub(super) async fn write_revoked(
    conn: &mut PgConnection,
    name: &str,
) -> LedgerResult<AdminKeyRow> {
    let row = sqlx::query(&format!(
        "UPDATE admin_keys SET revoked_at = now() WHERE name = $1 RETURNING {KEY_COLUMNS}"
    ))
    .bind(name)
    .fetch_one(conn)
    .await
    .map_err(db_error)?;
    key_from_row(&row)
}

/// [`LedgerTx::insert_admin_action`].
pub(super) async fn insert_action(
    conn: &mut PgConnection,
    action: &AdminAction,
) -> LedgerResult<()> {
    sqlx::query(
        "INSERT INTO admin_audit (id, actor, action, target, sale_id, before, after, at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(action.id)
    .bind(&action.actor)
    .bind(&action.action)
    .bind(&action.target)
    .bind(action.sale.map(|s| s.0))
    .bind(&action.before)
    .bind(&action.after)
    .bind(action.at)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn audit(pool: &PgPool, query: &AuditQuery) -> LedgerResult<Vec<AdminAction>> {
    let rows = sqlx::query(
        "SELECT id, actor, action, target, sale_id, before, after, at FROM admin_audit
         WHERE ($1::uuid IS NULL OR sale_id = $1) AND ($2::uuid IS NULL OR id < $2)
         ORDER BY id DESC LIMIT $3",
    )
    .bind(query.sale.map(|s| s.0))
    .bind(query.before)
    .bind(i64::from(query.limit))
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| AdminAction {
            id: r.get("id"),
            actor: r.get("actor"),
            action: r.get("action"),
            target: r.get("target"),
            sale: r.get::<Option<uuid::Uuid>, _>("sale_id").map(SaleId),
            before: r.get("before"),
            after: r.get("after"),
            at: r.get("at"),
        })
        .collect())
}
