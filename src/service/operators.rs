//! The operators: who an admin key is (the configured key, or a named key the ledger keeps),
//! what its role allows, the named keys' life (created, listed, revoked: at once, on every
//! replica, since each request asks the ledger), and the admin audit log (each action's entry is
//! written by the ledger in the action's own transaction).

use chrono::Utc;
use serde_json::{json, Value};
use uuid::Uuid;

use super::support::{cursor, page, Page};
use super::{App, ServiceError, ServiceResult};
use crate::auth::admin_key::{hash_secret, new_secret, SECRET_PREFIX};
use crate::domain::{AdminAction, Operator, Role, SaleId, Target};
use crate::ledger::{AdminKeyRow, Audit, AuditQuery};

/// The operator `presented` is the key of, if any: the configured key without a ledger call,
/// a named key if the ledger has it unrevoked.
pub async fn authenticate(app: &App, presented: &str) -> ServiceResult<Option<Operator>> {
    if app.admin_key.matches(presented) {
        return Ok(Some(Operator::configured()));
    }
    if !presented.starts_with(SECRET_PREFIX) {
        return Ok(None);
    }
    Ok(app
        .ledger
        .admin_key(&hash_secret(presented))
        .await?
        .filter(|key| key.revoked_at.is_none())
        .map(|key| Operator {
            name: key.name,
            role: key.role,
        }))
}

/// Refuses `operator` unless its role allows what `needed` may do.
pub fn require(operator: &Operator, needed: Role) -> ServiceResult<()> {
    if operator.role.allows(needed) {
        Ok(())
    } else {
        Err(ServiceError::RoleTooLow {
            key: operator.name.clone(),
            held: operator.role.as_str(),
            needed: needed.as_str(),
        })
    }
}

/// A named key's name: 1 to 64 of `A-Z a-z 0-9 . _ -`, and not the configured key's.
pub fn parse_key_name(name: &str) -> ServiceResult<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
        return Err(ServiceError::validation(
            "name",
            "1 to 64 letters, digits, '.', '_' or '-'",
        ));
    }
    if name == Operator::CONFIGURED {
        return Err(ServiceError::NameTaken(name.into()));
    }
    Ok(name.into())
}

/// What the audit log and the API show of a key (never its secret or its hash).
pub fn key_json(key: &AdminKeyRow) -> Value {
    json!({
        "name": key.name,
        "role": key.role.as_str(),
        "created_by": key.created_by,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    })
}

/// Creates a named key; its secret is in the answer and nowhere else.
pub async fn create_key(
    app: &App,
    actor: &Operator,
    name: &str,
    role: Role,
) -> ServiceResult<(AdminKeyRow, String)> {
    require(actor, Role::Admin)?;
    let name = parse_key_name(name)?;
    let secret = new_secret();
    let key = AdminKeyRow {
        id: Uuid::now_v7(),
        name,
        role,
        created_by: actor.name.clone(),
        created_at: Utc::now(),
        revoked_at: None,
    };
    let target = Target::AdminKey(key.name.clone());
    let entry = AdminAction::new(actor, "createAdminKey", &target, None, Some(key_json(&key)));
    app.ledger
        .create_admin_key(&key, &hash_secret(&secret), &entry)
        .await?;
    Ok((key, secret))
}

pub async fn keys(app: &App, actor: &Operator) -> ServiceResult<Vec<AdminKeyRow>> {
    require(actor, Role::Admin)?;
    Ok(app.ledger.admin_keys().await?)
}

/// Revokes a named key: refused from the next request on, on every replica. Revoking it again
/// changes nothing and is not logged again.
pub async fn revoke_key(app: &App, actor: &Operator, name: &str) -> ServiceResult<AdminKeyRow> {
    require(actor, Role::Admin)?;
    let audit = Audit {
        actor,
        action: "revokeAdminKey",
        show: &|key| Some(key_json(key)),
    };
    app.ledger
        .revoke_admin_key(name, &audit)
        .await?
        .ok_or(ServiceError::NotFound("admin key"))
}

/// The admin audit log, newest first; `sale` only if given.
pub async fn log(
    app: &App,
    sale: Option<SaleId>,
    after: Option<&str>,
    limit: u32,
) -> ServiceResult<Page<AdminAction>> {
    let query = AuditQuery {
        sale,
        before: cursor(after)?,
        limit: limit + 1,
    };
    let entries = app.ledger.admin_audit(&query).await?;
    Ok(page(entries, limit, |e| e.id.to_string()))
}
