//! The routes a site's proxy calls: `/v1/gate/check`, the forward-auth question about one
//! request of the site, and `/v1/gates/{id}/session/renew`, where a session due for renewal
//! goes through on its way back.
//!
//! The check reads the original request as each proxy sends it: `X-Forwarded-Method`,
//! `-Proto`, `-Host`, `-Uri` (Caddy, Traefik), `X-Original-URI` / `X-Original-Method` (nginx,
//! as its configuration names them), or Envoy's `ext_authz` HTTP form (the original method,
//! and the original path after `/v1/gate/check`). It answers 2xx to let the request through
//! (with `X-Sluice-Visitor` and `X-Sluice-Session-End` for the origin), else a redirect to
//! the waiting page for a browser's page request, or the gate's 429/503 problem for anything
//! else. `X-Sluice-Proxy: nginx` (or `?proxy=nginx`) asks for nginx's contract: 401 for every refusal, with the address in
//! `X-Sluice-Location` (`auth_request` passes only 2xx, 401 and 403 on).

use poem::http::{header, HeaderMap, StatusCode};
use poem::web::{Data, Path, Query};
use poem::{handler, Request, Response};
use serde::Deserialize;

use crate::domain::gate::{host_of, Original};
use crate::service::gate::check::{check, Answer};
use crate::service::gate::visitors;
use crate::service::App;

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
}

/// The request the proxy asks about. `envoy_path` is what followed `/v1/gate/check` (Envoy's
/// form).
fn original(req: &Request, envoy_path: Option<String>) -> Original {
    let h = req.headers();
    let method = header(h, "x-forwarded-method")
        .or_else(|| header(h, "x-original-method"))
        .map(str::to_owned)
        .unwrap_or_else(|| req.method().as_str().to_owned());
    let uri = header(h, "x-forwarded-uri")
        .or_else(|| header(h, "x-original-uri"))
        .map(str::to_owned)
        .or_else(|| {
            envoy_path.map(|p| match req.uri().query() {
                Some(q) => format!("/{p}?{q}"),
                None => format!("/{p}"),
            })
        })
        .unwrap_or_else(|| "/".into());
    let authority = header(h, "x-forwarded-host")
        .or_else(|| header(h, "host"))
        .unwrap_or_default()
        .to_owned();
    // The proxy adds the address it saw last (of the last line, when there are several);
    // earlier ones are the client's own word.
    let forwarded = h.get_all("x-forwarded-for").iter().last();
    let address = forwarded
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .or_else(|| header(h, "x-real-ip"))
        .and_then(|v| v.trim().parse().ok())
        .or_else(|| req.remote_addr().as_socket_addr().map(|a| a.ip()));
    Original {
        method: method.to_ascii_uppercase(),
        proto: match header(h, "x-forwarded-proto") {
            Some("https") => "https".into(),
            _ => "http".into(),
        },
        host: host_of(&authority),
        authority,
        uri,
        user_agent: header(h, "user-agent").unwrap_or_default().to_owned(),
        accept: header(h, "accept").unwrap_or_default().to_owned(),
        address,
    }
}

#[derive(Deserialize)]
pub struct Flavour {
    proxy: Option<String>,
}

fn answer(app: &App, req: &Request, envoy_path: Option<String>, nginx: bool) -> Response {
    let original = original(req, envoy_path);
    let headers = req.headers();
    let cookies = header(headers, "cookie").unwrap_or_default();
    let named = |name: &str| header(headers, name).map(str::to_owned);
    let mut resp = match check(app, &original, cookies, named) {
        Answer::Pass {
            outcome,
            visitor,
            session_ends,
        } => {
            let mut r = Response::builder().status(StatusCode::OK);
            r = r.header("X-Sluice-Outcome", outcome);
            if let Some(v) = visitor {
                r = r.header("X-Sluice-Visitor", v);
            }
            if let Some(end) = session_ends {
                r = r.header("X-Sluice-Session-End", end.to_string());
            }
            r.finish()
        }
        Answer::Renew { location } if nginx => refused_for_nginx(&location, "renew"),
        Answer::Renew { location } => redirect(&location),
        Answer::Wait {
            outcome, location, ..
        } if nginx => refused_for_nginx(&location, outcome),
        Answer::Wait {
            location,
            page: true,
            ..
        } => redirect(&location),
        Answer::Wait {
            location, status, ..
        } => waiting_problem(&location, status),
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().expect("static"));
    resp
}

fn redirect(location: &str) -> Response {
    Response::builder()
        .status(StatusCode::FOUND)
        .header(header::LOCATION, location)
        .header("X-Sluice-Location", location)
        .finish()
}

fn refused_for_nginx(location: &str, outcome: &str) -> Response {
    Response::builder()
        .status(StatusCode::UNAUTHORIZED)
        .header("X-Sluice-Location", location)
        .header("X-Sluice-Outcome", outcome)
        .finish()
}

/// Seconds a refused request is asked to wait before it tries again.
const RETRY_AFTER_SECS: u64 = 10;

fn waiting_problem(location: &str, status: u16) -> Response {
    let kind = crate::api::problem::WAITING_ROOM;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let body = serde_json::json!({
        "type": kind.uri(),
        "title": kind.title,
        "status": status.as_u16(),
        "detail": "this site lets visitors in from its waiting room: open waiting_room, then retry",
        "waiting_room": location,
    });
    Response::builder()
        .status(status)
        .content_type("application/problem+json")
        .header(header::RETRY_AFTER, RETRY_AFTER_SECS)
        .header("X-Sluice-Location", location)
        .body(body.to_string())
}

/// `/v1/gate/check` (any method).
#[handler]
pub fn check_route(req: &Request, app: Data<&App>, Query(f): Query<Flavour>) -> Response {
    let nginx = f.proxy.as_deref() == Some("nginx")
        || header(req.headers(), "x-sluice-proxy") == Some("nginx");
    answer(&app, req, None, nginx)
}

/// `/v1/gate/check/<original path>` (Envoy's `ext_authz` HTTP service, with `path_prefix`).
#[handler]
pub fn check_envoy(req: &Request, app: Data<&App>, Path(rest): Path<String>) -> Response {
    answer(&app, req, Some(rest), false)
}

#[derive(Deserialize)]
pub struct Renewal {
    return_to: String,
}

/// `/v1/gates/{id}/session/renew?return_to=…`: renews the session and sends the visitor back
/// to the page they asked for; a session that has ended goes to the waiting page instead.
#[handler]
pub async fn renew_route(
    req: &Request,
    app: Data<&App>,
    Path(gate): Path<String>,
    Query(r): Query<Renewal>,
) -> Response {
    let Ok(gate) = uuid::Uuid::parse_str(&gate) else {
        return super::problem::problem_response(StatusCode::NOT_FOUND, "no such gate".into());
    };
    let cookies = header(req.headers(), "cookie").unwrap_or_default();
    let https = header(req.headers(), "x-forwarded-proto") == Some("https");
    let mut resp = match visitors::renew(&app, gate, cookies, &r.return_to).await {
        Ok(Ok(given)) => {
            let cookie = visitors::set_cookie(
                &given.gate,
                crate::auth::gate_cookies::SESSION_COOKIE,
                &given.cookie,
                given.max_age,
                https,
            );
            let mut r = redirect(&given.location);
            r.headers_mut().insert(
                header::SET_COOKIE,
                cookie.parse().expect("a cookie is a header value"),
            );
            r
        }
        Ok(Err(page)) => redirect(&page),
        Err(e) => {
            let e: super::problem::ApiError = e.into();
            poem::IntoResponse::into_response(e)
        }
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().expect("static"));
    resp
}
