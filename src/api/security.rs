//! The two ways in: a user's bearer JWT, and the admin key.

use poem::Request;
use poem_openapi::auth::{ApiKey, Bearer};
use poem_openapi::SecurityScheme;

use super::problem::problem_response;
use crate::domain::UserId;
use crate::service::App;

/// A user of the customer's identity provider (`Authorization: Bearer <JWT>`, `sub` = user id).
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "JWT", checker = "check_user")]
pub struct UserAuth(pub UserId);

async fn check_user(req: &Request, bearer: Bearer) -> poem::Result<UserId> {
    let app = req.data::<App>().expect("App is attached to every route");
    app.users.verify(&bearer.token).map_err(|e| {
        poem::Error::from_response(problem_response(
            poem::http::StatusCode::UNAUTHORIZED,
            e.to_string(),
        ))
    })
}

/// An operator (`X-Admin-Key` header).
#[derive(SecurityScheme)]
#[oai(
    ty = "api_key",
    key_name = "X-Admin-Key",
    key_in = "header",
    checker = "check_admin"
)]
pub struct AdminAuth(());

async fn check_admin(req: &Request, key: ApiKey) -> poem::Result<()> {
    let app = req.data::<App>().expect("App is attached to every route");
    if app.admin_key.matches(&key.key) {
        Ok(())
    } else {
        Err(poem::Error::from_response(problem_response(
            poem::http::StatusCode::UNAUTHORIZED,
            "the admin key is not valid".into(),
        )))
    }
}
