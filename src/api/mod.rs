//! The HTTP API (poem + poem-openapi): one module per group of operations, its request and
//! response types beside its handlers (`sales/types.rs`, `attempts/types.rs`; the small
//! groups keep theirs in their one file), thin handlers that parse and delegate to
//! [`crate::service`]. Every error has one shape, problem+json.

mod attempts;
mod console;
mod cors;
mod event_stream;
mod exposure;
mod gate_check;
mod gates;
mod layouts;
mod notifications;
mod offer;
mod operators;
mod ops;
mod page;
pub mod problem;
mod request_metrics;
mod sales;
mod sandbox;
mod seat_map;
mod security;
mod serialized;
pub mod spec;
pub mod text;
mod toss;
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
use crate::service::{App, IdempotencyKey, ServiceError};
use crate::telemetry::warn_throttled;
use problem::{problem_response, ApiError};

#[derive(Tags)]
pub enum ApiTags {
    /// Admin: create and steer sales.
    Sales,
    /// Admin: find sales, a buyer's attempts and an attempt's whole story.
    Support,
    /// Admin: who a key is, the named admin keys, the admin audit log.
    Operators,
    /// Users: queue, status, hold, checkout.
    Attempts,
    /// The payment provider's callbacks.
    Payments,
    /// Health and keys.
    Operations,
    /// The sandbox payment provider (embedded default only).
    Sandbox,
    /// Admin and visitors: gates, a waiting room in front of a site through its own proxy.
    Gates,
}

/// The page size of a list when `limit` is not given.
pub(crate) const DEFAULT_PAGE: u32 = 50;

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
    toss::TossApi,
    ops::OpsApi,
    sandbox::SandboxApi,
    operators::OperatorsApi,
    notifications::NotificationsApi,
    sales::phases::PhasesApi,
    (layouts::LayoutsApi, layouts::AdminLayoutsApi),
    seat_map::SeatMapApi,
    gates::GatesApi,
);

pub fn openapi(app: &App) -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        (
            sales::SalesApi { app: app.clone() },
            attempts::AttemptsApi { app: app.clone() },
            offer::OfferApi { app: app.clone() },
            webhooks::WebhooksApi { app: app.clone() },
            toss::TossApi { app: app.clone() },
            ops::OpsApi { app: app.clone() },
            sandbox::SandboxApi { app: app.clone() },
            operators::OperatorsApi { app: app.clone() },
            notifications::NotificationsApi { app: app.clone() },
            sales::phases::PhasesApi { app: app.clone() },
            (
                layouts::LayoutsApi { app: app.clone() },
                layouts::AdminLayoutsApi { app: app.clone() },
            ),
            seat_map::SeatMapApi { app: app.clone() },
            gates::GatesApi { app: app.clone() },
        ),
        "sluice",
        env!("CARGO_PKG_VERSION"),
    )
    .description(
        "Waiting room and first-come-first-served reservations for flash sales and ticket \
         openings. Errors are application/problem+json (RFC 9457) with a stable `type`.",
    )
    .license(
        poem_openapi::LicenseObject::new("Apache-2.0")
            .url("https://www.apache.org/licenses/LICENSE-2.0"),
    )
    .server(
        poem_openapi::ServerObject::new("/").description("the sluice that serves this document"),
    )
}

/// The spec as served and committed: each operation's errors cut to those it can answer.
pub fn document(app: &App) -> String {
    spec::cut_errors(&openapi(app).spec())
}

/// The whole HTTP surface: the API, its spec and docs, metrics.
pub fn routes(app: App) -> BoxEndpoint<'static, Response> {
    let api = openapi(&app);
    let raw = api.spec();
    let document = spec::cut_errors(&raw);
    let docs_html = api.swagger_ui_html().replace(&raw, &document);
    let allowed = Arc::new(spec::methods_by_path(&document));
    let spec = poem::endpoint::make_sync(move |_| {
        Response::builder()
            .content_type("application/json")
            .body(document.clone())
    });
    let docs = Route::new().at(
        "/",
        poem::endpoint::make_sync(move |_| poem::web::Html(docs_html.clone())),
    );
    let metrics = app.metrics.clone();
    let body_limit = app.config.http.body_limit_bytes;
    let queue_budget = app.config.queue_timeout();
    let app_http = app.config.http.clone();
    // The page loads the payment provider's and the gates' challenges' scripts and frames.
    let sources = app
        .provider
        .page_sources()
        .and(&crate::gate::challenge::Verifier::page_sources(
            &app.config.gate,
        ));
    let page_config = Arc::new((app.config.page.clone(), sources));
    let (docs_exposure, metrics_exposure) = (app_http.docs, app_http.metrics);
    let routes = Route::new()
        .nest("/", api)
        .at("/waiting-room/:file", get(page::asset))
        .at("/v1/gate/check", gate_check::check_route)
        .at("/v1/gate/check/*rest", gate_check::check_envoy)
        .at(
            "/v1/gates/:gate_id/session/renew",
            get(gate_check::renew_route),
        )
        .at("/admin", get(console::index))
        .at("/admin/:file", get(console::asset))
        .at("/openapi.json", exposure::guard(spec, docs_exposure))
        .nest("/docs", exposure::guard(docs, docs_exposure))
        .at(
            "/metrics",
            exposure::guard(
                get(poem::endpoint::make_sync(move |_| {
                    Response::builder()
                        .content_type("text/plain; version=0.0.4")
                        .body(metrics.render())
                })),
                metrics_exposure,
            ),
        )
        .data(app.clone())
        .around(move |ep, req| limit_body(ep, req, body_limit))
        .around(refuse_unreadable_idempotency_key)
        .around(move |ep, req| limit_by_ip(ep, req, app.clone()))
        .around(measure)
        .around(move |ep, req| {
            crate::queue::budget::within(queue_budget, async move { ep.call(req).await })
        })
        // The API is nested at "/", which takes the bare "/" too: the page is answered first.
        .around(move |ep, req| page::at_root(ep, req, page_config.clone()))
        .catch_all_error(|err: poem::Error| async move { as_problem(err) })
        .around(traced)
        .around(move |ep, req| allow_on_405(ep, req, allowed.clone()));
    cors::with_cors(routes, &app_http)
}

/// Any error as problem+json: errors already in that shape pass through. A body field that
/// breaks a bound the spec states (poem-openapi's validators refuse it while parsing) is a
/// value out of range, 422 with the field named, as the domain's own checks answer.
fn as_problem(err: poem::Error) -> Response {
    let status = err.status();
    let detail = err.to_string();
    let resp = err.into_response();
    let is_problem = resp
        .content_type()
        .is_some_and(|ct| ct.starts_with("application/problem+json"));
    if is_problem {
        return resp;
    }
    match failed_bound(&detail) {
        Some(field) if status == StatusCode::BAD_REQUEST => {
            let error: ApiError = ServiceError::validation(field.to_owned(), detail.clone()).into();
            error.into_response()
        }
        _ => problem_response(status, detail),
    }
}

/// The field a poem-openapi validator refused: "... field `quantity` verification failed ...".
fn failed_bound(detail: &str) -> Option<&str> {
    let (before, _) = detail.split_once("` verification failed")?;
    before.rsplit_once("field `").map(|(_, field)| field)
}

/// Refuses bodies over the limit with 413, whether or not they declare their length.
/// The body an operator's upload of a phase's member list (a million user ids) or of a
/// venue's layout (100,000 seats) may have.
const MEMBER_LIST_LIMIT: usize = 40 * 1024 * 1024;

async fn limit_body<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    limit: usize,
) -> poem::Result<Response> {
    // A member list (addPhaseMembers) and a venue's layout (createLayout) are large; only a
    // request with an admin key is let send one (the key itself is checked by the operation).
    let path = req.uri().path();
    let large = path.ends_with("/members") || path.trim_end_matches('/') == "/v1/layouts";
    let limit = if req.method() == poem::http::Method::POST
        && large
        && req.headers().contains_key("x-admin-key")
    {
        limit.max(MEMBER_LIST_LIMIT)
    } else {
        limit
    };
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

/// A 405 says which methods the path answers (`Allow`, RFC 9110).
async fn allow_on_405<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    allowed: Arc<spec::MethodsByPath>,
) -> poem::Result<Response> {
    let path = req.uri().path().to_owned();
    let mut resp = ep.call(req).await.map(IntoResponse::into_response)?;
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
        if let Some(methods) = spec::allowed_methods(&allowed, &path) {
            if let Ok(value) = poem::http::HeaderValue::from_str(&methods) {
                resp.headers_mut().insert(poem::http::header::ALLOW, value);
            }
        }
    }
    if resp.status() == StatusCode::BAD_REQUEST {
        resp = name_the_path_parameter(resp, &allowed, &path).await;
    }
    Ok(resp)
}

/// A path parameter that does not parse is named in poem-openapi's error by its position
/// (`param0`); the problem names it as the spec does, in `detail` and `field`.
async fn name_the_path_parameter(
    resp: Response,
    paths: &spec::MethodsByPath,
    path: &str,
) -> Response {
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = body.into_bytes().await else {
        return Response::from_parts(parts, poem::Body::empty());
    };
    let renamed = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|mut problem| {
            let detail = problem["detail"].as_str()?.to_owned();
            let at = detail.find("path `param")? + "path `param".len();
            let end = at + detail[at..].find('`')?;
            let name = spec::parameter_name(paths, path, detail[at..end].parse().ok()?)?;
            problem["detail"] =
                format!("{}{name}{}", &detail[..at - "param".len()], &detail[end..]).into();
            problem["field"] = name.into();
            serde_json::to_vec(&problem).ok()
        });
    Response::from_parts(
        parts,
        poem::Body::from(renamed.unwrap_or_else(|| bytes.to_vec())),
    )
}

/// The operations that take an `Idempotency-Key`: createSale, holdStock, checkout.
fn takes_idempotency_key(req: &Request) -> bool {
    let path = req.uri().path();
    *req.method() == Method::POST
        && (path == "/v1/sales"
            || path == "/v1/sales/"
            || (path.starts_with("/v1/attempts/")
                && (path.ends_with("/hold") || path.ends_with("/checkout"))))
}

/// An `Idempotency-Key` that is not printable ASCII (`clé`) is refused with 422, as one with a
/// space is: poem reads a header that is not visible ASCII as absent, which would run the
/// request without its key.
async fn refuse_unreadable_idempotency_key<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
) -> poem::Result<Response> {
    if let Some(key) = req
        .headers()
        .get("idempotency-key")
        .filter(|_| takes_idempotency_key(&req))
    {
        if let Err(e) = IdempotencyKey::parse(&String::from_utf8_lossy(key.as_bytes())) {
            let error: ApiError = e.into();
            return Ok(error.into_response());
        }
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

/// Per-IP limits on join and on status (poll, stream, offer), before any work is done. A
/// refusal comes before the route, so it names the operation itself, for the request metrics
/// (`sluice_http_requests_total{operation}`) to count it where an SRE looks for it.
async fn limit_by_ip<E: Endpoint>(ep: Arc<E>, req: Request, app: App) -> poem::Result<Response> {
    let path = req.uri().path();
    let limited = match *req.method() {
        Method::POST if path.starts_with("/v1/sales/") && path.ends_with("/attempts") => {
            Some((Limited::Join, "joinSale"))
        }
        Method::GET if path.starts_with("/v1/attempts/") && path.ends_with("/events") => {
            Some((Limited::Status, "streamAttempt"))
        }
        Method::GET if path.starts_with("/v1/attempts/") => Some((Limited::Status, "getAttempt")),
        Method::GET if path.starts_with("/v1/public/") && path.ends_with("/offer") => {
            Some((Limited::Status, "getPublicOffer"))
        }
        Method::GET if path.ends_with("/offer") => Some((Limited::Status, "getOffer")),
        // Entering a gate asks its challenge's provider: as limited as a join.
        Method::POST if path.starts_with("/v1/gates/") && path.ends_with("/visitors") => {
            Some((Limited::Join, "enterGate"))
        }
        _ => None,
    };
    let ip = client_ip(&req, app.config.http.trust_forwarded_for);
    if let (Some((kind, operation)), Some(ip)) = (limited, ip) {
        if let Err(wait) = app.limits.check_ip(kind, ip) {
            let retry_after_secs = problem::rate_limited_retry_after_secs(wait);
            let error: ApiError = ServiceError::RateLimited { retry_after_secs }.into();
            let mut resp = error.into_response();
            resp.set_data(OperationId(operation));
            return Ok(resp);
        }
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

/// The client's address: the peer, or the first `X-Forwarded-For` entry behind a trusted proxy.
pub(crate) fn client_ip(req: &Request, trust_forwarded_for: bool) -> Option<IpAddr> {
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
/// (a waiting room's polls would flood an `info` log, and writing it would slow the answers),
/// `warn` when the server failed: each time for an error of its own (500), at most once a
/// second while a store it needs is away (503: then every request fails alike).
/// The request as a span of the trace (when traces are on): its caller's trace, if it came
/// with a `traceparent`, is its parent; named by the operation once the answer says which.
async fn traced<E: Endpoint>(ep: Arc<E>, req: Request) -> poem::Result<Response> {
    use tracing::Instrument;
    let span = crate::telemetry::traces::request_span(req.headers(), || {
        tracing::info_span!(
            "http.request",
            otel.name = %req.method(),
            otel.kind = "server",
            http.request.method = %req.method(),
            url.path = req.uri().path(),
            http.route = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        )
    });
    if span.is_none() {
        return ep.call(req).await.map(IntoResponse::into_response);
    }
    // Every log line of the request names its trace (the span's fields are printed with it).
    crate::telemetry::traces::name_ids(&span);
    let result = ep
        .call(req)
        .instrument(span.clone())
        .await
        .map(IntoResponse::into_response);
    if let Ok(resp) = &result {
        span.record(
            "http.response.status_code",
            i64::from(resp.status().as_u16()),
        );
        if let Some(operation) = resp.data::<OperationId>() {
            span.record("otel.name", operation.0);
            span.record("http.route", operation.0);
        }
    }
    result
}

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
    request_metrics::record(operation, &method, status, elapsed.as_secs_f64());
    let path = uri.path();
    let status = status.as_u16();
    let ms = elapsed.as_secs_f64() * 1000.0;
    if status == 503 {
        warn_throttled!(%method, path, operation, status, ms, "request failed");
    } else if status >= 500 {
        tracing::warn!(%method, path, operation, status, ms, "request failed");
    } else {
        tracing::debug!(%method, path, operation, status, ms, "request");
    }
    result
}
