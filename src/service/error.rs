//! What can go wrong in a use case, independent of HTTP. The API maps each variant to a status
//! and a stable problem `type`.

use crate::domain::{AttemptState, Rejected};
use crate::ledger::LedgerError;
use crate::queue::QueueError;
use crate::telemetry::warn_throttled;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Support asked for the file of an attempt the ledger does not hold: none that ever was,
    /// or one still waiting (its row is written at admission).
    #[error("no attempt {0} in this sale's ledger: an attempt still waiting in the queue has no file until it is admitted; find a waiting buyer by user_id (listAttempts)")]
    NoAttemptFile(crate::domain::AttemptId),
    #[error("{field}: {message}")]
    Validation {
        /// The request field at fault, as the client named it.
        field: std::borrow::Cow<'static, str>,
        message: String,
    },
    #[error("the admission token is not valid for this attempt")]
    AdmissionTokenInvalid,
    #[error("the attempt's admission has expired")]
    AdmissionExpired,
    #[error("{0}")]
    InvalidTransition(Rejected),
    #[error("the attempt has expired ({0})")]
    AttemptExpired(AttemptState),
    #[error("the waiting room was reset and this place in the queue is gone: join the sale again")]
    RejoinNeeded,
    #[error("the sale is closed")]
    SaleClosed,
    #[error("sold out: {remaining} left")]
    SoldOut { remaining: u32 },
    #[error("seat {0} is not available")]
    SeatTaken(String),
    /// Best available found no `count` seats side by side (of the category and section
    /// asked) that leave no single seat stranded; `free` seats are free in the whole sale.
    #[error("no {count} seats side by side are free as asked ({free} seats are free in the sale): ask for fewer, another category or section, or pick seats on the map")]
    NoAdjacent { count: u32, free: u32 },
    #[error("the per-user limit of this sale is reached ({already} already held or bought)")]
    LimitReached { already: u32 },
    #[error("the attempt is not admitted")]
    NotAdmitted,
    #[error("the attempt no longer waits in the queue")]
    NotWaiting,
    /// The phase running now does not let the user in (or the access code given is not one
    /// of its codes with a use left); `next` is the next phase that does, and its start.
    #[error("{}", not_in_phase(phase, *code_refused, next.as_ref()))]
    NotInPhase {
        phase: String,
        code_refused: bool,
        next: Option<(String, chrono::DateTime<chrono::Utc>)>,
    },
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    /// The sale asks joins for proof of work and this one has none (or not enough).
    #[error("this sale asks for proof of work: a nonce making SHA-256 of `{salt}:<sale id>:<user id>:<nonce>` start with {bits} zero bits, in the Sluice-Proof-Of-Work header")]
    ProofOfWorkRequired { bits: u8, salt: String },
    /// The same key's first request is still being processed (by this or another replica).
    #[error("a request with this Idempotency-Key is still being processed")]
    IdempotencyKeyInProgress,
    #[error("the webhook signature is not valid: {0}")]
    BadSignature(String),
    #[error("too many requests; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// The admin key's role does not allow the operation.
    #[error("this needs an admin key of role {needed} or above; this key ({key}) is a {held}")]
    RoleTooLow {
        key: String,
        held: &'static str,
        needed: &'static str,
    },
    #[error("the name {0} is already used")]
    NameTaken(String),
    /// A gate's challenge (Turnstile, hCaptcha) was not passed.
    #[error("{0}")]
    ChallengeFailed(String),
    /// Units to withdraw that are held, sold or unknown (a sale keeps at least one unit).
    #[error("only {free} of the {asked} units to withdraw are free; held and sold units stay, and a sale keeps at least one")]
    StockInUse { asked: u32, free: u32 },
    #[error("{0} is unavailable")]
    Unavailable(&'static str),
    /// The payment provider answered and refused (a refund it would not take, a payment it
    /// would not start): nothing changed here.
    #[error("the payment provider refused: {0}")]
    ProviderRefused(String),
    #[error("internal error: {0}")]
    Internal(String),
}

fn not_in_phase(
    phase: &str,
    code_refused: bool,
    next: Option<&(String, chrono::DateTime<chrono::Utc>)>,
) -> String {
    let now = if code_refused {
        format!("the access code is not one of {phase:?}'s with a use left")
    } else {
        format!("{phase:?} is not open to this user")
    };
    match next {
        Some((name, at)) => format!(
            "{now}; {name:?} lets them in from {}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        None => format!("{now}, nor is any later phase"),
    }
}

impl ServiceError {
    pub fn validation(
        field: impl Into<std::borrow::Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        ServiceError::Validation {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<QueueError> for ServiceError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Unavailable(detail) => {
                warn_throttled!(%detail, "queue store unavailable");
                ServiceError::Unavailable("the queue store")
            }
            QueueError::Protocol(detail) => ServiceError::Internal(detail),
        }
    }
}

impl From<LedgerError> for ServiceError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Unavailable(detail) => {
                warn_throttled!(%detail, "ledger unavailable");
                ServiceError::Unavailable("the ledger")
            }
            LedgerError::NotFound => ServiceError::NotFound("attempt"),
            LedgerError::Rejected(r) | LedgerError::RejectedAfterExpiry { rejected: r, .. } => {
                match r.state {
                    AttemptState::Expired { .. } => ServiceError::AttemptExpired(r.state),
                    AttemptState::Queued
                    | AttemptState::Admitted
                    | AttemptState::Hold
                    | AttemptState::PaymentPending
                    | AttemptState::Confirmed => ServiceError::InvalidTransition(r),
                }
            }
            LedgerError::SaleClosed => ServiceError::SaleClosed,
            LedgerError::SoldOut => ServiceError::SoldOut { remaining: 0 },
            LedgerError::SeatTaken(seat) => ServiceError::SeatTaken(seat),
            LedgerError::UnknownSeat(seat) => {
                ServiceError::validation("seat_ids", format!("seat {seat} does not exist"))
            }
            LedgerError::NameTaken(name) => ServiceError::NameTaken(name),
            LedgerError::Conflict(detail) => ServiceError::validation("sale_id", detail),
            full @ LedgerError::TooMany { field, .. } => {
                ServiceError::validation(field, full.to_string())
            }
            LedgerError::NotFree { asked, free } => ServiceError::StockInUse { asked, free },
            LedgerError::SeatExists(seat) => {
                ServiceError::validation("add_seats", format!("seat {seat} is already in the sale"))
            }
            LedgerError::Other(detail) => ServiceError::Internal(detail),
        }
    }
}
