//! CORS for a shop's pages on other origins (`http.cors_allowed_origins`; none by default):
//! poem's `Cors` answers their preflights and marks their answers, exposing the headers a
//! client reads (`Retry-After`, `Location`, `ETag`).
//!
//! A request from an origin that is not listed is served as if it carried no `Origin`: no
//! `Access-Control-*` header, so the browser keeps the answer from the page (poem's `Cors`
//! would answer it 403, which would also refuse the waiting-room page's own POSTs, since a
//! browser sends `Origin` on a same-origin POST too).

use std::sync::Arc;

use poem::http::{header, HeaderValue, Method};
use poem::middleware::Cors;
use poem::{Endpoint, EndpointExt, IntoResponse, Request, Response};

use crate::config::HttpConfig;

/// The request headers a browser client sends.
const ALLOWED_HEADERS: [&str; 6] = [
    "authorization",
    "content-type",
    "idempotency-key",
    "sluice-proof-of-work",
    "last-event-id",
    "if-none-match",
];
/// The response headers a browser client reads beyond the safelisted ones.
const EXPOSED_HEADERS: [&str; 3] = ["retry-after", "location", "etag"];

/// Which origins may call from a browser.
#[derive(Clone, Debug)]
enum Allowed {
    Any,
    Listed(Arc<Vec<HeaderValue>>),
}

impl Allowed {
    fn allows(&self, origin: &HeaderValue) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Listed(origins) => origins.contains(origin),
        }
    }
}

/// `ep` with CORS as configured; `ep` itself when no origin is listed.
pub fn with_cors<E>(ep: E, http: &HttpConfig) -> poem::endpoint::BoxEndpoint<'static, Response>
where
    E: Endpoint + 'static,
{
    if http.cors_allowed_origins.is_empty() {
        return ep.map_to_response().boxed();
    }
    let any = http.cors_allowed_origins.iter().any(|o| o == "*");
    let mut cors = Cors::new()
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers(ALLOWED_HEADERS)
        .expose_headers(EXPOSED_HEADERS)
        .allow_credentials(http.cors_allow_credentials)
        .max_age(http.cors_max_age_secs.0 as i32);
    let allowed = if any {
        Allowed::Any
    } else {
        let origins: Vec<HeaderValue> = http
            .cors_allowed_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        cors = cors.allow_origins(origins.clone());
        Allowed::Listed(Arc::new(origins))
    };
    ep.with(cors)
        .around(move |ep, req| unlisted_origin_is_no_origin(ep, req, allowed.clone()))
        .boxed()
}

async fn unlisted_origin_is_no_origin<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    allowed: Allowed,
) -> poem::Result<Response> {
    let unlisted = req
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|origin| !allowed.allows(origin));
    if unlisted {
        req.headers_mut().remove(header::ORIGIN);
    }
    ep.call(req).await.map(IntoResponse::into_response)
}
