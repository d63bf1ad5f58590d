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
    /// `not-in-phase`, `access-code`: when the next phase of the sale the user may join in
    /// starts (`detail` names it; the offer's `phases` has it).
    #[oai(skip_serializing_if_is_none)]
    pub next_phase_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The trace of the request, when traces are on: what an SRE looks the request up by.
    #[oai(skip_serializing_if_is_none)]
    pub trace_id: Option<String>,
}

impl poem_openapi::types::Example for Problem {
    fn example() -> Self {
        Problem {
            kind: "/problems/sold-out".into(),
            title: "Sold out".into(),
            status: 409,
            detail: "sold out: 0 left".into(),
            field: None,
            next_phase_at: None,
            trace_id: None,
        }
    }
}

/// Every error an operation can answer with.
#[derive(Debug, ApiResponse)]
pub enum ApiError {
    /// The request is malformed (not JSON, wrong types, bad path parameter).
    #[oai(status = 400, content_type = "application/problem+json")]
    BadRequest(Json<Box<Problem>>),
    /// Missing or invalid credentials, or a bad webhook signature.
    #[oai(status = 401, content_type = "application/problem+json")]
    Unauthorized(Json<Box<Problem>>),
    /// The credentials do not allow this (e.g. an admission token for another attempt).
    #[oai(status = 403, content_type = "application/problem+json")]
    Forbidden(Json<Box<Problem>>),
    /// No such resource for this caller.
    #[oai(status = 404, content_type = "application/problem+json")]
    NotFound(Json<Box<Problem>>),
    /// The request conflicts with the current state (invalid transition, sold out, closed).
    #[oai(status = 409, content_type = "application/problem+json")]
    Conflict(Json<Box<Problem>>),
    /// The attempt or its admission has expired.
    #[oai(status = 410, content_type = "application/problem+json")]
    Gone(Json<Box<Problem>>),
    /// The request body is larger than the limit.
    #[oai(status = 413, content_type = "application/problem+json")]
    PayloadTooLarge(Json<Box<Problem>>),
    /// The body's Content-Type is not one the operation takes (send `application/json`).
    #[oai(status = 415, content_type = "application/problem+json")]
    UnsupportedMediaType(Json<Box<Problem>>),
    /// The sale asks for proof of work on join (see `getOffer` for the difficulty and salt).
    #[oai(status = 428, content_type = "application/problem+json")]
    PreconditionRequired(Json<Box<Problem>>),
    /// The request is well-formed but a value is not acceptable.
    #[oai(status = 422, content_type = "application/problem+json")]
    Unprocessable(Json<Box<Problem>>),
    /// Too many requests; retry after the given seconds.
    #[oai(status = 429, content_type = "application/problem+json")]
    TooManyRequests(Json<Box<Problem>>, #[oai(header = "Retry-After")] u64),
    /// An internal error.
    #[oai(status = 500, content_type = "application/problem+json")]
    Internal(Json<Box<Problem>>),
    /// The payment provider refused the call; nothing changed.
    #[oai(status = 502, content_type = "application/problem+json")]
    BadGateway(Json<Box<Problem>>),
    /// A store sluice depends on is down; retry after the given seconds.
    #[oai(status = 503, content_type = "application/problem+json")]
    Unavailable(Json<Box<Problem>>, #[oai(header = "Retry-After")] u64),
}

/// One kind of problem: its stable `type` (`/problems/<slug>`), status and title, and when
/// sluice answers it. [`PROBLEMS`] lists them all; the errors table of `docs/integrating.md` is
/// generated from it (a test fails when the two differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemType {
    pub slug: &'static str,
    pub status: u16,
    pub title: &'static str,
    /// When it is answered, for the docs.
    pub when: &'static str,
}

impl ProblemType {
    /// The problem's `type` member.
    pub fn uri(&self) -> String {
        format!("/problems/{}", self.slug)
    }
}

macro_rules! problem_types {
    ($($name:ident = $status:literal $slug:literal $title:literal: $when:literal;)*) => {
        $(
            #[doc = $when]
            pub const $name: ProblemType = ProblemType {
                slug: $slug,
                status: $status,
                title: $title,
                when: $when,
            };
        )*
        /// Every kind of problem sluice answers, in the order of the docs.
        pub const PROBLEMS: &[ProblemType] = &[$($name),*];
    };
}

problem_types! {
    MALFORMED_REQUEST = 400 "malformed-request" "Malformed request":
        "The request is malformed: not JSON, wrong types, a bad path or query parameter.";
    UNAUTHORIZED = 401 "unauthorized" "Unauthorized":
        "Credentials are missing or not valid (a user token, an admin key).";
    BAD_SIGNATURE = 401 "bad-signature" "Webhook signature not valid":
        "A payment webhook's signature does not verify, or its timestamp is out of tolerance.";
    FORBIDDEN = 403 "forbidden" "Forbidden":
        "The credentials do not allow this route.";
    CHALLENGE_FAILED = 403 "challenge-failed" "Challenge not passed":
        "A gate's challenge (Turnstile, hCaptcha) was not passed, or its answer is missing.";
    ADMISSION_TOKEN_INVALID = 403 "admission-token-invalid" "Admission token not valid":
        "The admission token is not this attempt's, or not valid.";
    NOT_IN_PHASE = 403 "not-in-phase" "Not open to you yet":
        "The sale's phase running now lets in others (a member list, access codes): `next_phase_at` says when this user may join.";
    ACCESS_CODE = 403 "access-code" "Access code not accepted":
        "The access code is not one of this phase's, or other users used it up.";
    ROLE = 403 "role" "Role too low":
        "The admin key's role does not allow this operation.";
    NOT_FOUND = 404 "not-found" "Not found":
        "No such resource for this caller.";
    METHOD_NOT_ALLOWED = 405 "method-not-allowed" "Method not allowed":
        "The path does not take this method (`Allow` lists those it takes).";
    INVALID_TRANSITION = 409 "invalid-transition" "Not possible in the attempt's state":
        "The event does not apply to the attempt's state.";
    SOLD_OUT = 409 "sold-out" "Sold out":
        "Nothing left to hold.";
    SEAT_TAKEN = 409 "seat-taken" "Seat taken":
        "A seat asked for is held or sold.";
    NO_ADJACENT_SEATS = 409 "no-adjacent-seats" "No seats together":
        "Best available found no seats side by side as asked.";
    LIMIT_REACHED = 409 "limit-reached" "Per-user limit reached":
        "The user holds or bought as many units as the sale allows.";
    SALE_CLOSED = 409 "sale-closed" "Sale closed":
        "The sale takes no more joins, or is closed.";
    NOT_ADMITTED = 409 "not-admitted" "Not admitted":
        "The attempt is still waiting in the queue.";
    NOT_WAITING = 409 "not-waiting" "Not waiting":
        "The attempt no longer waits in the queue: its turn came, or it ended.";
    STOCK_IN_USE = 409 "stock-in-use" "Units not free":
        "Units or seats to withdraw are held or sold (nothing was withdrawn).";
    NAME_TAKEN = 409 "name-taken" "Name already used":
        "An admin key of that name exists already.";
    IDEMPOTENCY_KEY_IN_PROGRESS = 409 "idempotency-key-in-progress" "Request in progress":
        "The first request with this `Idempotency-Key` is still running: retry shortly.";
    ADMISSION_EXPIRED = 410 "admission-expired" "Admission expired":
        "The admission's time to hold ran out.";
    ATTEMPT_EXPIRED = 410 "attempt-expired" "Attempt expired":
        "The attempt has ended EXPIRED.";
    REJOIN = 410 "rejoin" "Join again":
        "The waiting room lost the attempt's place (the queue store was reset, or failed over before the join was kept): join again.";
    PAYLOAD_TOO_LARGE = 413 "payload-too-large" "Payload too large":
        "The body is larger than `http.body_limit_bytes` (or has no length).";
    UNSUPPORTED_MEDIA_TYPE = 415 "unsupported-media-type" "Unsupported media type":
        "The body is not `application/json`.";
    VALIDATION = 422 "validation" "Invalid value":
        "A value is not acceptable; `field` names it.";
    IDEMPOTENCY_KEY_REUSED = 422 "idempotency-key-reused" "Idempotency-Key reused with another request":
        "The `Idempotency-Key` was used before with another request.";
    PROOF_OF_WORK_REQUIRED = 428 "proof-of-work-required" "Proof of work required":
        "The sale asks for proof of work on join (`getOffer` has the difficulty and salt).";
    WAITING_ROOM = 429 "waiting-room" "In the waiting room":
        "A gate's site lets this visitor in only from its waiting room (`waiting_room`); a gate may answer it with 503.";
    RATE_LIMITED = 429 "rate-limited" "Too many requests":
        "Too many requests: retry after `Retry-After` seconds (the limit's wait, plus up to as much again, drawn for each answer).";
    INTERNAL = 500 "internal" "Internal error":
        "A fault of sluice's own (logged).";
    PROVIDER_REFUSED = 502 "provider-refused" "The payment provider refused":
        "The payment provider answered no (a refund it would not take, a payment it would not start); nothing changed.";
    UNAVAILABLE = 503 "unavailable" "Temporarily unavailable":
        "A store sluice depends on, or the payment provider, is down or overloaded: retry after `Retry-After` seconds (1 to 5, drawn for each answer), with jitter.";
}

/// The problem of kind `kind`, with what happened this time and the field at fault (boxed: an
/// error's result stays small).
fn problem(kind: ProblemType, detail: String, field: Option<&str>) -> Json<Box<Problem>> {
    Json(Box::new(Problem {
        kind: kind.uri(),
        title: kind.title.into(),
        status: kind.status,
        detail,
        field: field.map(str::to_owned),
        next_phase_at: None,
        trace_id: crate::telemetry::traces::current_trace_id(),
    }))
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let detail = e.to_string();
        match e {
            ServiceError::NotFound(_) | ServiceError::NoAttemptFile(_) => {
                ApiError::NotFound(problem(NOT_FOUND, detail, None))
            }
            ServiceError::Validation { field, .. } => {
                ApiError::Unprocessable(problem(VALIDATION, detail, Some(&field)))
            }
            ServiceError::IdempotencyKeyReused => ApiError::Unprocessable(problem(
                IDEMPOTENCY_KEY_REUSED,
                detail,
                Some("Idempotency-Key"),
            )),
            ServiceError::ProofOfWorkRequired { .. } => ApiError::PreconditionRequired(problem(
                PROOF_OF_WORK_REQUIRED,
                detail,
                Some("Sluice-Proof-Of-Work"),
            )),
            ServiceError::IdempotencyKeyInProgress => ApiError::Conflict(problem(
                IDEMPOTENCY_KEY_IN_PROGRESS,
                detail,
                Some("Idempotency-Key"),
            )),
            ServiceError::AdmissionTokenInvalid => {
                ApiError::Forbidden(problem(ADMISSION_TOKEN_INVALID, detail, None))
            }
            ServiceError::RoleTooLow { .. } => ApiError::Forbidden(problem(ROLE, detail, None)),
            ServiceError::ChallengeFailed(_) => {
                ApiError::Forbidden(problem(CHALLENGE_FAILED, detail, Some("challenge_answer")))
            }
            ServiceError::StockInUse { .. } => {
                ApiError::Conflict(problem(STOCK_IN_USE, detail, None))
            }
            ServiceError::NameTaken(_) => {
                ApiError::Conflict(problem(NAME_TAKEN, detail, Some("name")))
            }
            ServiceError::AdmissionExpired => {
                ApiError::Gone(problem(ADMISSION_EXPIRED, detail, None))
            }
            ServiceError::AttemptExpired(_) => {
                ApiError::Gone(problem(ATTEMPT_EXPIRED, detail, None))
            }
            ServiceError::InvalidTransition(_) => {
                ApiError::Conflict(problem(INVALID_TRANSITION, detail, None))
            }
            ServiceError::RejoinNeeded => ApiError::Gone(problem(REJOIN, detail, None)),
            ServiceError::SaleClosed => ApiError::Conflict(problem(SALE_CLOSED, detail, None)),
            ServiceError::SoldOut { .. } => ApiError::Conflict(problem(SOLD_OUT, detail, None)),
            ServiceError::SeatTaken(_) => ApiError::Conflict(problem(SEAT_TAKEN, detail, None)),
            ServiceError::NoAdjacent { .. } => {
                ApiError::Conflict(problem(NO_ADJACENT_SEATS, detail, None))
            }
            ServiceError::LimitReached { .. } => {
                ApiError::Conflict(problem(LIMIT_REACHED, detail, None))
            }
            ServiceError::NotAdmitted => ApiError::Conflict(problem(NOT_ADMITTED, detail, None)),
            ServiceError::NotWaiting => ApiError::Conflict(problem(NOT_WAITING, detail, None)),
            ServiceError::NotInPhase {
                code_refused, next, ..
            } => {
                let (kind, field) = if code_refused {
                    (ACCESS_CODE, Some("Sluice-Access-Code"))
                } else {
                    (NOT_IN_PHASE, None)
                };
                let mut body = problem(kind, detail, field);
                body.next_phase_at = next.map(|(_, at)| at);
                ApiError::Forbidden(body)
            }
            ServiceError::BadSignature(_) => {
                ApiError::Unauthorized(problem(BAD_SIGNATURE, detail, None))
            }
            ServiceError::RateLimited { retry_after_secs } => {
                ApiError::TooManyRequests(problem(RATE_LIMITED, detail, None), retry_after_secs)
            }
            ServiceError::Unavailable(_) => {
                ApiError::Unavailable(problem(UNAVAILABLE, detail, None), retry_after_secs())
            }
            ServiceError::ProviderRefused(_) => {
                ApiError::BadGateway(problem(PROVIDER_REFUSED, detail, None))
            }
            ServiceError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                ApiError::Internal(problem(INTERNAL, "internal error".into(), None))
            }
        }
    }
}

/// A problem+json response for an error raised outside the handlers.
pub fn problem_response(status: StatusCode, detail: String) -> poem::Response {
    let kind = match status.as_u16() {
        400 => MALFORMED_REQUEST,
        401 => UNAUTHORIZED,
        403 => FORBIDDEN,
        404 => NOT_FOUND,
        405 => METHOD_NOT_ALLOWED,
        411 | 413 => PAYLOAD_TOO_LARGE,
        415 => UNSUPPORTED_MEDIA_TYPE,
        422 => VALIDATION,
        429 => RATE_LIMITED,
        503 => UNAVAILABLE,
        _ if status.is_server_error() => INTERNAL,
        _ => MALFORMED_REQUEST,
    };
    let mut body = serde_json::json!({
        "type": kind.uri(),
        "title": kind.title,
        "status": status.as_u16(),
        "detail": detail,
    });
    if let Some(trace) = crate::telemetry::traces::current_trace_id() {
        body["trace_id"] = trace.into();
    }
    let mut resp = poem::Response::builder()
        .status(status)
        .content_type("application/problem+json")
        .body(body.to_string());
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
        resp.headers_mut().insert(
            "retry-after",
            poem::http::HeaderValue::from(retry_after_secs()),
        );
    }
    resp
}

/// The most seconds a 503 asks a client to wait.
pub const RETRY_AFTER_MAX_SECS: u64 = 5;

/// A 503's `Retry-After`: 1 to [`RETRY_AFTER_MAX_SECS`] seconds, drawn for each answer, so that
/// a crowd turned away together (an opening's burst past what the stores take) comes back
/// spread over seconds rather than in one wave that is turned away again.
pub fn retry_after_secs() -> u64 {
    use rand::Rng;
    rand::thread_rng().gen_range(1..=RETRY_AFTER_MAX_SECS)
}

/// A 429's `Retry-After` for a limiter that refills in `wait`: that wait in whole seconds (at
/// least 1), plus up to as much again, drawn for each answer, so that the clients one limit
/// turned away together (behind one address, or one user's tabs) do not all come back at once.
pub fn rate_limited_retry_after_secs(wait: std::time::Duration) -> u64 {
    use rand::Rng;
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    rand::thread_rng().gen_range(secs..=2 * secs)
}
