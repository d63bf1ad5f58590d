//! Errors as `application/problem+json` (RFC 9457), one stable `type` per kind of error.
//! [`ApiError`] is the typed response of every operation's error side; [`problem_response`]
//! gives the same shape to errors raised outside the handlers (auth, parsing, unknown routes).

use poem::http::StatusCode;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object};

use crate::service::ServiceError;

/// A problem detail.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct Problem {
    /// A stable identifier of the kind of problem, e.g. `/problems/sold-out`.
    #[oai(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What happened this time.
    pub detail: String,
    /// The request field at fault, for validation problems.
    #[oai(skip_serializing_if_is_none)]
    pub field: Option<String>,
}

impl poem_openapi::types::Example for Problem {
    fn example() -> Self {
        Problem {
            kind: "/problems/sold-out".into(),
            title: "Sold out".into(),
            status: 409,
            detail: "sold out: 0 left".into(),
            field: None,
        }
    }
}

/// Every error an operation can answer with.
#[derive(Debug, ApiResponse)]
pub enum ApiError {
    /// The request is malformed (not JSON, wrong types, bad path parameter).
    #[oai(status = 400, content_type = "application/problem+json")]
    BadRequest(Json<Problem>),
    /// Missing or invalid credentials, or a bad webhook signature.
    #[oai(status = 401, content_type = "application/problem+json")]
    Unauthorized(Json<Problem>),
    /// The credentials do not allow this (e.g. an admission token for another attempt).
    #[oai(status = 403, content_type = "application/problem+json")]
    Forbidden(Json<Problem>),
    /// No such resource for this caller.
    #[oai(status = 404, content_type = "application/problem+json")]
    NotFound(Json<Problem>),
    /// The request conflicts with the current state (invalid transition, sold out, closed).
    #[oai(status = 409, content_type = "application/problem+json")]
    Conflict(Json<Problem>),
    /// The attempt or its admission has expired.
    #[oai(status = 410, content_type = "application/problem+json")]
    Gone(Json<Problem>),
    /// The request body is larger than the limit.
    #[oai(status = 413, content_type = "application/problem+json")]
    PayloadTooLarge(Json<Problem>),
    /// The body's Content-Type is not one the operation takes (send `application/json`).
    #[oai(status = 415, content_type = "application/problem+json")]
    UnsupportedMediaType(Json<Problem>),
    /// The sale asks for proof of work on join (see `getOffer` for the difficulty and salt).
    #[oai(status = 428, content_type = "application/problem+json")]
    PreconditionRequired(Json<Problem>),
    /// The request is well-formed but a value is not acceptable.
    #[oai(status = 422, content_type = "application/problem+json")]
    Unprocessable(Json<Problem>),
    /// Too many requests; retry after the given seconds.
    #[oai(status = 429, content_type = "application/problem+json")]
    TooManyRequests(Json<Problem>, #[oai(header = "Retry-After")] u64),
    /// An internal error.
    #[oai(status = 500, content_type = "application/problem+json")]
    Internal(Json<Problem>),
    /// A store sluice depends on is down; retry after the given seconds.
    #[oai(status = 503, content_type = "application/problem+json")]
    Unavailable(Json<Problem>, #[oai(header = "Retry-After")] u64),
}

fn problem(
    status: u16,
    slug: &str,
    title: &str,
    detail: String,
    field: Option<&str>,
) -> Json<Problem> {
    Json(Problem {
        kind: format!("/problems/{slug}"),
        title: title.into(),
        status,
        detail,
        field: field.map(str::to_owned),
    })
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let detail = e.to_string();
        match e {
            ServiceError::NotFound(_) | ServiceError::NoAttemptFile(_) => {
                ApiError::NotFound(problem(404, "not-found", "Not found", detail, None))
            }
            ServiceError::Validation { field, .. } => ApiError::Unprocessable(problem(
                422,
                "validation",
                "Invalid value",
                detail,
                Some(&field),
            )),
            ServiceError::IdempotencyKeyReused => ApiError::Unprocessable(problem(
                422,
                "idempotency-key-reused",
                "Idempotency-Key reused with another request",
                detail,
                Some("Idempotency-Key"),
            )),
            ServiceError::ProofOfWorkRequired { .. } => ApiError::PreconditionRequired(problem(
                428,
                "proof-of-work-required",
                "Proof of work required",
                detail,
                Some("Sluice-Proof-Of-Work"),
            )),
            ServiceError::IdempotencyKeyInProgress => ApiError::Conflict(problem(
                409,
                "idempotency-key-in-progress",
                "Request in progress",
                detail,
                Some("Idempotency-Key"),
            )),
            ServiceError::AdmissionTokenInvalid => ApiError::Forbidden(problem(
                403,
                "admission-token-invalid",
                "Admission token not valid",
                detail,
                None,
            )),
            ServiceError::RoleTooLow { .. } => {
                ApiError::Forbidden(problem(403, "role", "Role too low", detail, None))
            }
            ServiceError::StockInUse { .. } => {
                ApiError::Conflict(problem(409, "stock-in-use", "Units not free", detail, None))
            }
            ServiceError::NameTaken(_) => ApiError::Conflict(problem(
                409,
                "name-taken",
                "Name already used",
                detail,
                Some("name"),
            )),
            ServiceError::AdmissionExpired => ApiError::Gone(problem(
                410,
                "admission-expired",
                "Admission expired",
                detail,
                None,
            )),
            ServiceError::AttemptExpired(_) => ApiError::Gone(problem(
                410,
                "attempt-expired",
                "Attempt expired",
                detail,
                None,
            )),
            ServiceError::InvalidTransition(_) => ApiError::Conflict(problem(
                409,
                "invalid-transition",
                "Not possible in the attempt's state",
                detail,
                None,
            )),
            ServiceError::RejoinNeeded => {
                ApiError::Gone(problem(410, "rejoin", "Join again", detail, None))
            }
            ServiceError::SaleClosed => {
                ApiError::Conflict(problem(409, "sale-closed", "Sale closed", detail, None))
            }
            ServiceError::SoldOut { .. } => {
                ApiError::Conflict(problem(409, "sold-out", "Sold out", detail, None))
            }
            ServiceError::SeatTaken(_) => {
                ApiError::Conflict(problem(409, "seat-taken", "Seat taken", detail, None))
            }
            ServiceError::LimitReached { .. } => ApiError::Conflict(problem(
                409,
                "limit-reached",
                "Per-user limit reached",
                detail,
                None,
            )),
            ServiceError::NotAdmitted => {
                ApiError::Conflict(problem(409, "not-admitted", "Not admitted", detail, None))
            }
            ServiceError::BadSignature(_) => ApiError::Unauthorized(problem(
                401,
                "bad-signature",
                "Webhook signature not valid",
                detail,
                None,
            )),
            ServiceError::RateLimited { retry_after_secs } => ApiError::TooManyRequests(
                problem(429, "rate-limited", "Too many requests", detail, None),
                retry_after_secs,
            ),
            ServiceError::Unavailable(_) => ApiError::Unavailable(
                problem(503, "unavailable", "Temporarily unavailable", detail, None),
                1,
            ),
            ServiceError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                ApiError::Internal(problem(
                    500,
                    "internal",
                    "Internal error",
                    "internal error".into(),
                    None,
                ))
            }
        }
    }
}

/// A problem+json response for an error raised outside the handlers.
pub fn problem_response(status: StatusCode, detail: String) -> poem::Response {
    let (slug, title) = match status.as_u16() {
        400 => ("malformed-request", "Malformed request"),
        401 => ("unauthorized", "Unauthorized"),
        403 => ("forbidden", "Forbidden"),
        404 => ("not-found", "Not found"),
        405 => ("method-not-allowed", "Method not allowed"),
        411 | 413 => ("payload-too-large", "Payload too large"),
        415 => ("unsupported-media-type", "Unsupported media type"),
        422 => ("validation", "Invalid value"),
        429 => ("rate-limited", "Too many requests"),
        503 => ("unavailable", "Temporarily unavailable"),
        _ if status.is_server_error() => ("internal", "Internal error"),
        _ => ("malformed-request", "Malformed request"),
    };
    let body = serde_json::json!({
        "type": format!("/problems/{slug}"),
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    let mut resp = poem::Response::builder()
        .status(status)
        .content_type("application/problem+json")
        .body(body.to_string());
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
        resp.headers_mut()
            .insert("retry-after", poem::http::HeaderValue::from_static("1"));
    }
    resp
}
