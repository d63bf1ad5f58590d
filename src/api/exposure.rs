//! The operational routes (`/metrics`, `/openapi.json`, `/docs`) as `http.metrics` and
//! `http.docs` expose them: to anyone, to holders of an admin key (any role), or to nobody (404, as a
//! route that does not exist).

use poem::endpoint::BoxEndpoint;
use poem::http::{header, StatusCode};
use poem::{Endpoint, EndpointExt, IntoResponse, Request, Response};

use super::problem::problem_response;
use crate::config::Exposure;
use crate::service::App;

/// `ep` behind `exposure`.
pub fn guard<E>(ep: E, exposure: Exposure) -> BoxEndpoint<'static, Response>
where
    E: Endpoint + 'static,
{
    ep.map_to_response()
        .around(move |ep, req: Request| async move {
            match exposure {
                Exposure::Open => {}
                Exposure::Off => {
                    return Ok(problem_response(StatusCode::NOT_FOUND, "not found".into()))
                }
                Exposure::Admin if carries_admin_key(&req).await => {}
                Exposure::Admin => {
                    return Ok(problem_response(
                        StatusCode::UNAUTHORIZED,
                        "this route needs the admin key (X-Admin-Key or Authorization: Bearer)"
                            .into(),
                    ))
                }
            }
            ep.call(req).await.map(IntoResponse::into_response)
        })
        .boxed()
}

/// An admin key of any role (a viewer's will do) as `X-Admin-Key`, or as a bearer token
/// (what Prometheus's scrape `authorization` sends).
async fn carries_admin_key(req: &Request) -> bool {
    let Some(app) = req.data::<App>() else {
        return false;
    };
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let bearer = header(header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    for key in [header("x-admin-key"), bearer].into_iter().flatten() {
        if let Ok(Some(_)) = crate::service::operators::authenticate(app, key).await {
            return true;
        }
    }
    false
}
