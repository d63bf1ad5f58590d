//! The operators' own routes: who a key is, the named admin keys (created, listed and revoked
//! by `admin` keys), and the admin audit log (read by every role).

use crate::api::text::Text;
use chrono::{DateTime, Utc};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::types::Example;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::problem::ApiError;
use super::security::AdminAuth;
use super::spec::example_time;
use super::{parse_sale_id, ApiTags};
use crate::domain::{AdminAction, Operator, Role};
use crate::ledger::AdminKeyRow;
use crate::service::support::Page;
use crate::service::{self, App};

pub struct OperatorsApi {
    pub app: App,
}

/// What an admin key may do; each role may do what the ones before it may.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum RoleName {
    /// Reads: sales, figures, attempts, the audit log, metrics and docs.
    Viewer,
    /// Runs sales: creates them, turns the knobs, changes stock, refunds.
    Operator,
    /// Manages the admin keys.
    Admin,
}

impl From<RoleName> for Role {
    fn from(role: RoleName) -> Self {
        match role {
            RoleName::Viewer => Role::Viewer,
            RoleName::Operator => Role::Operator,
            RoleName::Admin => Role::Admin,
        }
    }
}

impl From<Role> for RoleName {
    fn from(role: Role) -> Self {
        match role {
            Role::Viewer => RoleName::Viewer,
            Role::Operator => RoleName::Operator,
            Role::Admin => RoleName::Admin,
        }
    }
}

/// The key a request was sent with.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct OperatorOut {
    /// The key's name (`configured` for `auth.admin_key`).
    pub name: String,
    pub role: RoleName,
}

impl From<&Operator> for OperatorOut {
    fn from(operator: &Operator) -> Self {
        OperatorOut {
            name: operator.name.clone(),
            role: operator.role.into(),
        }
    }
}

/// A new named admin key.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct CreateAdminKey {
    /// Unique among the keys, revoked ones included; the audit log names its actions by it.
    #[oai(validator(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$"))]
    pub name: String,
    pub role: RoleName,
}

/// A named admin key (never its secret).
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AdminKeyOut {
    pub name: String,
    pub role: RoleName,
    /// The name of the key that created it.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// When it was revoked; absent while it works.
    #[oai(skip_serializing_if_is_none)]
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Example for AdminKeyOut {
    fn example() -> Self {
        AdminKeyOut {
            name: "support-desk".into(),
            role: RoleName::Viewer,
            created_by: "configured".into(),
            created_at: example_time(),
            revoked_at: None,
        }
    }
}

impl From<AdminKeyRow> for AdminKeyOut {
    fn from(key: AdminKeyRow) -> Self {
        AdminKeyOut {
            name: key.name,
            role: key.role.into(),
            created_by: key.created_by,
            created_at: key.created_at,
            revoked_at: key.revoked_at,
        }
    }
}

/// A key just created, with its secret: shown this once, kept by sluice only as a hash.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct CreatedAdminKey {
    /// Send it as `X-Admin-Key`.
    pub secret: String,
    pub key: AdminKeyOut,
}

/// Every named admin key, oldest first, revoked ones too.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AdminKeyList {
    pub keys: Vec<AdminKeyOut>,
}

/// One entry of the admin audit log.
#[derive(Debug, Clone, Object)]
pub struct AdminActionOut {
    /// The entry's id, and its event's (`sluice.admin.action`).
    pub id: String,
    /// The key's name.
    pub actor: String,
    /// The operation, by its id in this API.
    pub action: String,
    /// `sale:<id>`, `attempt:<id>` or `admin_key:<name>`.
    pub target: String,
    /// The target's sale, if it belongs to one.
    #[oai(skip_serializing_if_is_none)]
    pub sale_id: Option<String>,
    /// The target before the action; absent when the action created it.
    #[oai(skip_serializing_if_is_none)]
    pub before: Option<serde_json::Value>,
    /// The target as the action left it.
    #[oai(skip_serializing_if_is_none)]
    pub after: Option<serde_json::Value>,
    pub at: DateTime<Utc>,
}

impl From<AdminAction> for AdminActionOut {
    fn from(a: AdminAction) -> Self {
        AdminActionOut {
            id: a.id.to_string(),
            actor: a.actor,
            action: a.action,
            target: a.target,
            sale_id: a.sale.map(|s| s.to_string()),
            before: a.before,
            after: a.after,
            at: a.at,
        }
    }
}

/// A page of the admin audit log, newest first.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AdminActionPage {
    pub actions: Vec<AdminActionOut>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

impl From<Page<AdminAction>> for AdminActionPage {
    fn from(page: Page<AdminAction>) -> Self {
        AdminActionPage {
            actions: page.items.into_iter().map(Into::into).collect(),
            next_cursor: page.next,
        }
    }
}

#[derive(ApiResponse)]
pub enum SelfResponse {
    #[oai(status = 200)]
    Ok(Json<OperatorOut>),
}

#[derive(ApiResponse)]
pub enum KeyCreated {
    /// The key, with its secret (shown this once).
    #[oai(status = 201)]
    Created(Json<CreatedAdminKey>),
}

#[derive(ApiResponse)]
pub enum KeyListResponse {
    #[oai(status = 200)]
    Ok(Json<AdminKeyList>),
}

#[derive(ApiResponse)]
pub enum KeyResponse {
    #[oai(status = 200)]
    Ok(Json<AdminKeyOut>),
}

#[derive(ApiResponse)]
pub enum ActionPageResponse {
    #[oai(status = 200)]
    Ok(Json<AdminActionPage>),
}

#[OpenApi(prefix_path = "/v1/admin", tag = "ApiTags::Operators")]
impl OperatorsApi {
    /// Who this key is
    ///
    /// The key's name and role (what a console shows, and which controls it offers).
    #[oai(path = "/self", method = "get", operation_id = "getAdminSelf")]
    async fn me(&self, auth: AdminAuth) -> Result<SelfResponse, ApiError> {
        Ok(SelfResponse::Ok(Json((&auth.0).into())))
    }

    /// Create an admin key
    ///
    /// A named key with a role (`admin` keys only). The answer holds its secret, once; sluice
    /// keeps only its hash. It works at once, on every replica.
    #[oai(path = "/keys", method = "post", operation_id = "createAdminKey")]
    async fn create_key(
        &self,
        auth: AdminAuth,
        body: Json<CreateAdminKey>,
    ) -> Result<KeyCreated, ApiError> {
        let (key, secret) =
            service::operators::create_key(&self.app, &auth.0, &body.name, body.role.into())
                .await?;
        Ok(KeyCreated::Created(Json(CreatedAdminKey {
            secret,
            key: key.into(),
        })))
    }

    /// List admin keys
    ///
    /// Every named key, revoked ones too (`admin` keys only). The configured key
    /// (`auth.admin_key`) is not listed: it acts as `configured`, an `admin` key.
    #[oai(path = "/keys", method = "get", operation_id = "listAdminKeys")]
    async fn keys(&self, auth: AdminAuth) -> Result<KeyListResponse, ApiError> {
        let keys = service::operators::keys(&self.app, &auth.0).await?;
        Ok(KeyListResponse::Ok(Json(AdminKeyList {
            keys: keys.into_iter().map(Into::into).collect(),
        })))
    }

    /// Revoke an admin key
    ///
    /// The key is refused from the next request on, on every replica (`admin` keys only).
    /// Revoking it again changes nothing.
    #[oai(
        path = "/keys/:name",
        method = "delete",
        operation_id = "revokeAdminKey"
    )]
    async fn revoke_key(&self, auth: AdminAuth, name: Path<Text>) -> Result<KeyResponse, ApiError> {
        let key = service::operators::revoke_key(&self.app, &auth.0, &name).await?;
        Ok(KeyResponse::Ok(Json(key.into())))
    }

    /// List admin actions
    ///
    /// The admin audit log, newest first: who did what to what, the target before and after.
    /// `sale_id` keeps a sale's entries (its attempts' too). Pass `next_cursor` as `cursor`
    /// for the next page.
    #[oai(path = "/actions", method = "get", operation_id = "listAdminActions")]
    async fn actions(
        &self,
        _auth: AdminAuth,
        sale_id: Query<Option<Text>>,
        cursor: Query<Option<Text>>,
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))] limit: Query<Option<u32>>,
    ) -> Result<ActionPageResponse, ApiError> {
        let sale = sale_id.0.as_deref().map(parse_sale_id).transpose()?;
        let page = service::operators::log(
            &self.app,
            sale,
            cursor.0.as_deref(),
            limit.0.unwrap_or(crate::api::DEFAULT_PAGE),
        )
        .await?;
        Ok(ActionPageResponse::Ok(Json(page.into())))
    }
}

impl Example for OperatorOut {
    fn example() -> Self {
        OperatorOut {
            name: "support-desk".into(),
            role: RoleName::Viewer,
        }
    }
}

impl Example for CreateAdminKey {
    fn example() -> Self {
        CreateAdminKey {
            name: "support-desk".into(),
            role: RoleName::Viewer,
        }
    }
}

impl Example for CreatedAdminKey {
    fn example() -> Self {
        CreatedAdminKey {
            secret: "sluice_ak_3q2-7wE9xL0cV5bN8mK1pR4tY6uI0oA2sD4fG6hJ8kL".into(),
            key: AdminKeyOut::example(),
        }
    }
}

impl Example for AdminKeyList {
    fn example() -> Self {
        AdminKeyList {
            keys: vec![AdminKeyOut::example()],
        }
    }
}

impl Example for AdminActionPage {
    fn example() -> Self {
        AdminActionPage {
            actions: vec![AdminActionOut {
                id: "01934f2e-7c1a-7b3e-9d2f-5a6b7c8d9e0f".into(),
                actor: "night-shift".into(),
                action: "pauseSale".into(),
                target: "sale:0193a5b0-1c2d-7e3f-8a9b-0c1d2e3f4a5b".into(),
                sale_id: Some("0193a5b0-1c2d-7e3f-8a9b-0c1d2e3f4a5b".into()),
                before: Some(serde_json::json!({ "status": "open" })),
                after: Some(serde_json::json!({ "status": "paused" })),
                at: example_time(),
            }],
            next_cursor: None,
        }
    }
}
