//! The HTTP API (poem + poem-openapi): one file per group of operations, thin handlers that
//! parse and delegate to [`crate::service`]. Every error has one shape, problem+json.

mod attempts;
mod event_stream;
mod offer;
mod ops;
mod page;
pub mod problem;
mod sales;
mod sandbox;
mod security;
pub mod types;
mod webhooks;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use poem::endpoint::BoxEndpoint;
use poem::http::{Method, StatusCode};
use poem::{get, Endpoint, EndpointExt, IntoResponse, Request, Response, Route};
use poem_openapi::{OpenApiService, OperationId, Tags};

use crate::domain::{AttemptId, SaleId};
use crate::service::limits::Limited;
use crate::service::{App, ServiceError};
use problem::{problem_response, ApiError};

#[derive(Tags)]
pub enum ApiTags {
    /// Admin: create and steer sales.
    Sales,
    /// Users: queue, status, hold, checkout.
    Attempts,
    /// The payment provider's callbacks.
    Payments,
    /// Health and keys.
    Operations,
    /// The sandbox payment provider (embedded default only).
    Sandbox,
}

/// A malformed id names nothing: 404, like an id that names nothing.
pub(crate) fn parse_sale_id(s: &str) -> Result<SaleId, ApiError> {
    SaleId::parse(s).map_err(|_| ServiceError::NotFound("sale").into())
}

pub(crate) fn parse_attempt_id(s: &str) -> Result<AttemptId, ApiError> {
    AttemptId::parse(s).map_err(|_| ServiceError::NotFound("attempt").into())
}

type Apis = (
    sales::SalesApi,
    attempts::AttemptsApi,
    offer::OfferApi,
    webhooks::WebhooksApi,
    ops::OpsApi,
    sandbox::SandboxApi,
);

pub fn openapi(app: &App) -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        (
            sales::SalesApi { app: app.clone() },
            attempts::AttemptsApi { app: app.clone() },
            offer::OfferApi { app: app.clone() },
            webhooks::WebhooksApi { app: app.clone() },
            ops::OpsApi { app: app.clone() },
            sandbox::SandboxApi { app: app.clone() },
        ),
        "sluice",
        env!("CARGO_PKG_VERSION"),
    )
    .description(
        "Waiting room and first-come-first-served reservations for flash sales and ticket \
         openings. Errors are application/problem+json (RFC 9457) with a stable `type`.",
    )
}

/// The whole HTTP surface: the API, its spec and docs, metrics.
pub fn routes(app: App) -> BoxEndpoint<'static, Response> {
    let api = openapi(&app);
    let spec = api.spec_endpoint();
    let docs = api.swagger_ui();
    let metrics = app.metrics.clone();
    let body_limit = app.config.http.body_limit_bytes;
    Route::new()
        .nest("/", api)
        .at("/waiting-room/:file", get(page::asset))
        .at("/openapi.json", spec)
        .nest("/docs", docs)
        .at(
            "/metrics",
            get(poem::endpoint::make_sync(move |_| {
                Response::builder()
                    .content_type("text/plain; version=0.0.4")
                    .body(metrics.render())
            })),
        )
        .data(app.clone())
        .around(move |ep, req| limit_body(ep, req, body_limit))
        .around(move |ep, req| limit_by_ip(ep, req, app.clone()))
        .around(measure)
        // The API is nested at "/", which takes the bare "/" too: the page is answered first.
        .around(page::at_root)
        .catch_all_error(|err: poem::Error| async move { as_problem(err) })
        .boxed()
}

/// Any error as problem+json: errors already in that shape pass through.
fn as_problem(err: poem::Error) -> Response {
    let status = err.status();
    let detail = err.to_string();
    let resp = err.into_response();
    let is_problem = resp
        .content_type()
        .is_some_and(|ct| ct.starts_with("application/problem+json"));
    if is_problem {
        resp
    } else {
        problem_response(status, detail)
    }
}

/// Refuses bodies over the limit with 413, whether or not they declare their length.
async fn limit_body<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    limit: usize,
) -> poem::Result<Response> {
    let declared = req
        .headers()
        .get(poem::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let too_large = || {
        let mut resp = problem_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes"),
        );
        // The unread body stays on the wire: the connection cannot be reused.
        resp.headers_mut().insert(
            poem::http::header::CONNECTION,
            poem::http::HeaderValue::from_static("close"),
        );
        poem::Error::from_response(resp)
    };
    match declared {
        Some(n) if n > limit => return Err(too_large()),
        Some(_) => {}
        None => {
            let body = req.take_body();
            let bytes = body
                .into_bytes_limit(limit)
                .await
                .map_err(|_| too_large())?;
            req.set_body(bytes);
        }
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

/// Per-IP limits on join and on status (poll, stream, offer), before any work is done.
async fn limit_by_ip<E: Endpoint>(ep: Arc<E>, req: Request, app: App) -> poem::Result<Response> {
    let path = req.uri().path();
    let kind = match *req.method() {
        Method::POST if path.starts_with("/v1/sales/") && path.ends_with("/attempts") => {
            Some(Limited::Join)
        }
        Method::GET if path.starts_with("/v1/attempts/") || path.ends_with("/offer") => {
            Some(Limited::Status)
        }
        _ => None,
    };
    if let (Some(kind), Some(ip)) = (kind, client_ip(&req, app.config.http.trust_forwarded_for)) {
        if let Err(wait) = app.limits.check_ip(kind, ip) {
            let retry_after_secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let error: ApiError = ServiceError::RateLimited { retry_after_secs }.into();
            return Ok(error.into_response());
        }
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

/// The client's address: the peer, or the first `X-Forwarded-For` entry behind a trusted proxy.
fn client_ip(req: &Request, trust_forwarded_for: bool) -> Option<IpAddr> {
    if trust_forwarded_for {
        let forwarded = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .and_then(|first| first.trim().parse().ok());
        if forwarded.is_some() {
            return forwarded;
        }
    }
    req.remote_addr().as_socket_addr().map(|a| a.ip())
}

/// Request count and latency by operation id (bounded label values, unlike raw paths), and
/// each request's log line. The counters are how requests are watched; the line is `debug`
/// (a waiting room's polls would flood an `info` log: with one line per request at the default
/// level, a loaded status endpoint answered a third less), `warn` when the server failed.
async fn measure<E: Endpoint>(ep: Arc<E>, req: Request) -> poem::Result<Response> {
    let method = req.method().clone();
    // Its path only: a query string is the client's, and may carry what a log must not.
    let uri = req.uri().clone();
    let started = Instant::now();
    let result = ep.call(req).await.map(IntoResponse::into_response);
    let elapsed = started.elapsed();
    let (status, operation) = match &result {
        Ok(resp) => (resp.status(), resp.data::<OperationId>().map(|o| o.0)),
        Err(err) => (err.status(), err.data::<OperationId>().map(|o| o.0)),
    };
    let operation = operation.unwrap_or("other");
    metrics::counter!("sluice_http_requests_total",
        "operation" => operation, "method" => method.to_string(), "status" => status.as_u16().to_string())
    .increment(1);
    metrics::histogram!("sluice_http_request_duration_seconds", "operation" => operation)
        .record(elapsed.as_secs_f64());
    let path = uri.path();
    let status = status.as_u16();
    let ms = elapsed.as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::warn!(%method, path, operation, status, ms, "request failed");
    } else {
        tracing::debug!(%method, path, operation, status, ms, "request");
    }
    result
}
