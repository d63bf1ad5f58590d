//! The two ways in: a user's bearer JWT, and an admin key (whose role each operation checks).

use poem::Request;
use poem_openapi::auth::{ApiKey, Bearer};
use poem_openapi::SecurityScheme;

use poem::IntoResponse;

use super::problem::{problem_response, ApiError};
use crate::auth::user_token::UserTokenError;
use crate::domain::{Operator, Role, UserId};
use crate::service::{self, App};

/// A user of the customer's identity provider (`Authorization: Bearer <JWT>`, `sub` = user id).
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "JWT", checker = "check_user")]
pub struct UserAuth(pub UserId);

async fn check_user(req: &Request, bearer: Bearer) -> poem::Result<UserId> {
    let app = req.data::<App>().expect("App is attached to every route");
    // A gate's visitor, who has no account: a token the gate signed (`service::gate`).
    if crate::auth::gate_cookies::GateSigner::is_visitor_token(&bearer.token) {
        let now = chrono::Utc::now().timestamp();
        return match app.gates.signer.token_visitor(&bearer.token, now) {
            Some((gate, visitor)) => Ok(crate::auth::gate_cookies::visitor_user(gate, &visitor)),
            None => Err(poem::Error::from_response(problem_response(
                poem::http::StatusCode::UNAUTHORIZED,
                "the visitor token is not valid or has expired".into(),
            ))),
        };
    }
    let mut verified = app.users.verify(&bearer.token);
    // A key the provider's keys in memory lack (a rotation): fetched again (rate-limited).
    if let Err(UserTokenError::UnknownKey(issuer)) = verified {
        if let Some(jwks) = app.users.jwks_of(issuer) {
            if jwks.refetch_for_unknown_kid().await {
                verified = app.users.verify(&bearer.token);
            }
        }
    }
    // A visitor's user id is the gate's to give.
    if let Ok(user) = &verified {
        if crate::auth::gate_cookies::is_visitor_user(user) {
            return Err(poem::Error::from_response(problem_response(
                poem::http::StatusCode::UNAUTHORIZED,
                "the token's sub starts with visitor-, which names a gate's visitors".into(),
            )));
        }
    }
    verified.map_err(|e| {
        poem::Error::from_response(problem_response(
            poem::http::StatusCode::UNAUTHORIZED,
            e.to_string(),
        ))
    })
}

/// An operator (`X-Admin-Key` header): the configured key, or a named key with a role.
#[derive(SecurityScheme)]
#[oai(
    ty = "api_key",
    key_name = "X-Admin-Key",
    key_in = "header",
    checker = "check_admin"
)]
pub struct AdminAuth(pub Operator);

impl AdminAuth {
    /// The operator, if its role allows what `needed` may do (else 403).
    pub fn allows(&self, needed: Role) -> Result<&Operator, ApiError> {
        service::operators::require(&self.0, needed)?;
        Ok(&self.0)
    }
}

async fn check_admin(req: &Request, key: ApiKey) -> poem::Result<Operator> {
    let app = req.data::<App>().expect("App is attached to every route");
    match service::operators::authenticate(app, &key.key).await {
        Ok(Some(operator)) => Ok(operator),
        Ok(None) => Err(poem::Error::from_response(problem_response(
            poem::http::StatusCode::UNAUTHORIZED,
            "the admin key is not valid (unknown or revoked)".into(),
        ))),
        Err(e) => Err(poem::Error::from_response(
            ApiError::from(e).into_response(),
        )),
    }
}
