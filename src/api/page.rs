//! The waiting-room page at `/`: plain HTML, CSS and JavaScript compiled into the binary (no
//! build step, nothing to deploy beside sluice). The customer's site links to
//! `/?sale=<id>#token=<user JWT>`; the token stays in the fragment, so it never reaches a
//! server log. The page drives the public API like any other client.

use std::sync::Arc;

use poem::http::{header, Method, StatusCode};
use poem::web::Path;
use poem::{handler, Endpoint, IntoResponse, Request, Response};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/waiting-room.js");
const STYLE: &str = include_str!("page/waiting-room.css");

/// Only the page's own files, no inline code, no framing by other sites.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'";

fn file(body: &'static str, content_type: &str) -> Response {
    Response::builder()
        .content_type(content_type)
        .header(header::CONTENT_SECURITY_POLICY, POLICY)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
}

/// `GET /` is the page; everything else goes on to the routes.
pub async fn at_root<E: Endpoint>(ep: Arc<E>, req: Request) -> poem::Result<Response> {
    if req.uri().path() == "/" && req.method() == Method::GET {
        return Ok(file(INDEX, "text/html; charset=utf-8"));
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

#[handler]
pub fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "waiting-room.js" => file(SCRIPT, "text/javascript; charset=utf-8"),
        "waiting-room.css" => file(STYLE, "text/css; charset=utf-8"),
        _ => super::problem::problem_response(StatusCode::NOT_FOUND, "no such file".into()),
    }
}
