//! The attempts API's JSON shapes (request and response bodies) and their conversions from
//! the service's types. Field docs become the OpenAPI schema descriptions.

use chrono::{DateTime, Utc};
use poem_openapi::{Enum, Object};
use serde::Serialize;

use crate::api::serialized::rfc3339;
use crate::payments::PayWith;

use crate::api::spec::example_time;
use crate::api::text::Text;
use crate::domain::{AttemptState, ExpiryReason};
use crate::ledger::{AttemptRecord, PaymentEventRow, TransitionRow};
use crate::service::support::{AttemptFile, AttemptList};
use crate::service::AttemptView;

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, Serialize)]
#[oai(rename_all = "SCREAMING_SNAKE_CASE")]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttemptStateName {
    Queued,
    Admitted,
    Hold,
    PaymentPending,
    Confirmed,
    Expired,
}

/// Why an attempt expired (present on EXPIRED attempts only).
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ExpiryReasonName {
    Left,
    Abandoned,
    AdmissionTimeout,
    HoldTimeout,
    Released,
    PaymentFailed,
    PaymentTimeout,
    SaleClosed,
    /// An operator refunded the purchase (it was CONFIRMED); the units went back on sale.
    Refunded,
}

impl From<AttemptState> for AttemptStateName {
    fn from(state: AttemptState) -> Self {
        match state {
            AttemptState::Queued => AttemptStateName::Queued,
            AttemptState::Admitted => AttemptStateName::Admitted,
            AttemptState::Hold => AttemptStateName::Hold,
            AttemptState::PaymentPending => AttemptStateName::PaymentPending,
            AttemptState::Confirmed => AttemptStateName::Confirmed,
            AttemptState::Expired { .. } => AttemptStateName::Expired,
        }
    }
}

impl From<ExpiryReason> for ExpiryReasonName {
    fn from(reason: ExpiryReason) -> Self {
        match reason {
            ExpiryReason::Left => ExpiryReasonName::Left,
            ExpiryReason::Abandoned => ExpiryReasonName::Abandoned,
            ExpiryReason::AdmissionTimeout => ExpiryReasonName::AdmissionTimeout,
            ExpiryReason::HoldTimeout => ExpiryReasonName::HoldTimeout,
            ExpiryReason::Released => ExpiryReasonName::Released,
            ExpiryReason::PaymentFailed => ExpiryReasonName::PaymentFailed,
            ExpiryReason::PaymentTimeout => ExpiryReasonName::PaymentTimeout,
            ExpiryReason::SaleClosed => ExpiryReasonName::SaleClosed,
            ExpiryReason::Refunded => ExpiryReasonName::Refunded,
        }
    }
}

/// What an attempt holds.
#[derive(Debug, Clone, Object, Serialize)]
pub struct HoldOut {
    pub quantity: u32,
    /// The seats held (empty for units of identical stock). Always present: the schema
    /// requires it, so a generated client reads it.
    pub seat_ids: Vec<String>,
    /// Check out before this, or the units go back (while HOLD).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub expires_at: Option<DateTime<Utc>>,
    /// What the hold costs, in `currency`'s smallest unit (KRW: won; USD: cents): the sum of
    /// its units' prices when it was taken, and what checkout charges. Absent when the sale
    /// is not priced.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<u64>,
    /// ISO 4217 code of `amount`.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// The payment the provider is expected to report on.
#[derive(Debug, Clone, Object, Serialize)]
pub struct PaymentOut {
    /// Pass it to the payment provider; its webhook names it.
    pub reference: String,
    /// Who takes the payment: `payments.provider` (`sandbox`, `webhook` for the shop's own
    /// payment service, or a provider's name).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What the page needs to pay, one object per provider (`provider` says which): in
    /// checkout's answer, and in every answer for a provider sluice does not call (the
    /// sandbox's URL, the shop's reference).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pay: Option<PayWith>,
    /// The provider's last failed try (a declined card): the buyer may try again until
    /// `expires_at`.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// The provider must report before this (while PAYMENT_PENDING).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// The status of an attempt.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(example)]
pub struct AttemptOut {
    pub attempt_id: String,
    pub sale_id: String,
    pub state: AttemptStateName,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<ExpiryReasonName>,
    /// 1-based place in the queue (QUEUED only).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// How many wait in the sale (QUEUED only).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// Estimated seconds until admission, from the measured admission rate.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_wait_secs: Option<u64>,
    /// QUEUED only, and only when true: nothing is left to hold and nothing is held or being
    /// paid for (which could come back), so the user's turn would find it sold out. Tell them
    /// now rather than at their turn; leaving (`DELETE /v1/attempts/{attempt_id}`) ends the
    /// wait.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sold_out: Option<bool>,
    /// Ask again after this many milliseconds (jittered; long when far, short when near).
    pub poll_after_ms: u64,
    /// While ADMITTED: an Ed25519 JWT proving admission; send it with the hold. Verifiable
    /// with `/.well-known/jwks.json`.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// While ADMITTED: hold before this.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub admission_expires_at: Option<DateTime<Utc>>,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldOut>,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payment: Option<PaymentOut>,
    /// QUEUED only: when `position` and `waiting` were exact (the replica's view of the queue
    /// is refreshed every `queue.line_refresh_ms`).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub as_of: Option<DateTime<Utc>>,
    /// QUEUED only: send it as `ticket` with the next status question (`getAttempt`,
    /// `streamAttempt`), so the answer needs no lookup in the queue store. Bound to this
    /// attempt and user; opaque.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_ticket: Option<String>,
}

impl poem_openapi::types::Example for AttemptOut {
    fn example() -> Self {
        AttemptOut {
            attempt_id: "0193a0c4e1b27c3d9f0a1b2c3d4e5f600193a0c4e1b27c3d9f0a1b2c3d4e5f61".into(),
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            state: AttemptStateName::Queued,
            reason: None,
            position: Some(1204),
            waiting: Some(48210),
            estimated_wait_secs: Some(121),
            sold_out: None,
            poll_after_ms: 12000,
            admission_token: None,
            admission_expires_at: None,
            hold: None,
            payment: None,
            as_of: Some(
                DateTime::parse_from_rfc3339("2026-12-02T10:00:00.250Z")
                    .expect("a literal time")
                    .with_timezone(&Utc),
            ),
            queue_ticket: Some(
                "1204.1764669600000000.q1Jm0XhT4vR6Yb8Zk2Wc3AVs9pLd7Fn5Ge1Hi3Jk4Mo".into(),
            ),
        }
    }
}

impl From<AttemptView> for AttemptOut {
    fn from(v: AttemptView) -> Self {
        let state = v.state.into();
        let reason = v.state.reason().map(Into::into);
        AttemptOut {
            attempt_id: v.attempt.to_string(),
            sale_id: v.attempt.sale.to_string(),
            state,
            reason,
            position: v.position,
            waiting: v.waiting,
            estimated_wait_secs: v.estimated_wait_secs,
            sold_out: v.sold_out.then_some(true),
            poll_after_ms: v.poll_after_ms,
            admission_token: v.admission_token,
            admission_expires_at: v.admission_expires_at,
            hold: v.hold.map(|h| HoldOut {
                quantity: h.quantity,
                seat_ids: h.seats,
                expires_at: v.hold_expires_at,
                amount: h.amount.as_ref().map(|m| m.amount),
                currency: h.amount.map(|m| m.currency.to_string()),
            }),
            payment: v.payment_reference.map(|r| PaymentOut {
                reference: r.to_string(),
                provider: v.provider.clone(),
                pay: v.pay,
                last_failure: v.payment_failure,
                expires_at: v.payment_expires_at,
            }),
            as_of: v.as_of,
            queue_ticket: v.queue_ticket,
        }
    }
}

/// What to hold: exactly one of `quantity`, `seat_ids` or `best_available`.
#[derive(Debug, Clone, Object, serde::Serialize)]
#[oai(example)]
pub struct HoldRequest {
    /// The `admission_token` of the attempt's status.
    #[oai(validator(min_length = 1, max_length = 4096))]
    pub admission_token: Text,
    /// Units to hold (1 to the sale's per-user limit, at most 1,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000"))
    )]
    pub quantity: Option<u32>,
    /// Seats to hold: 1 to 100 unique seat ids.
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub seat_ids: Option<Vec<Text>>,
    /// The best seats side by side that are free, picked and held in one step (a sale with a
    /// venue layout).
    #[oai(skip_serializing_if_is_none)]
    pub best_available: Option<BestAvailableIn>,
}

/// "2 seats together in R, as close to the stage as you can": the seats go to the row nearest
/// the stage with that many free side by side, never leaving a single seat alone between
/// taken ones (unless the layout allows it), and in it to the seats nearest the stage.
#[derive(Debug, Clone, Object, serde::Serialize)]
pub struct BestAvailableIn {
    /// How many seats, side by side.
    #[oai(validator(minimum(value = "1"), maximum(value = "20")))]
    pub count: u32,
    /// Only seats of this category (the layout's, as the offer lists them); none: any.
    #[oai(
        skip_serializing_if_is_none,
        validator(min_length = 1, max_length = 32)
    )]
    pub category: Option<Text>,
    /// Only seats of this section (its id in the layout); none: any.
    #[oai(
        skip_serializing_if_is_none,
        validator(min_length = 1, max_length = 16)
    )]
    pub section: Option<Text>,
}

impl poem_openapi::types::Example for HoldRequest {
    fn example() -> Self {
        HoldRequest {
            admission_token: "eyJhbGciOiJFZERTQSIsImtpZCI6ImFkbWlzc2lvbi0xIn0.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJl".into(),
            quantity: Some(2),
            seat_ids: None,
            best_available: None,
        }
    }
}

/// An attempt as the ledger has it (from ADMITTED on).
#[derive(Debug, Clone, Object)]
pub struct AttemptSummaryOut {
    pub attempt_id: String,
    pub user_id: String,
    pub state: AttemptStateName,
    #[oai(skip_serializing_if_is_none)]
    pub reason: Option<ExpiryReasonName>,
    /// Units the attempt holds, pays for or bought (0 before its hold).
    pub units: u32,
    /// The seats, in a seat sale.
    #[oai(skip_serializing_if_is_none)]
    pub seat_ids: Option<Vec<String>>,
    /// What its hold costs, in `currency`'s smallest unit (absent before its hold, or when
    /// the sale is not priced).
    #[oai(skip_serializing_if_is_none)]
    pub amount: Option<u64>,
    #[oai(skip_serializing_if_is_none)]
    pub currency: Option<String>,
    /// The reference the payment provider knows the payment by (from checkout on).
    #[oai(skip_serializing_if_is_none)]
    pub payment_reference: Option<String>,
    pub admission_expires_at: DateTime<Utc>,
    #[oai(skip_serializing_if_is_none)]
    pub hold_expires_at: Option<DateTime<Utc>>,
    #[oai(skip_serializing_if_is_none)]
    pub payment_expires_at: Option<DateTime<Utc>>,
}

impl From<AttemptRecord> for AttemptSummaryOut {
    fn from(r: AttemptRecord) -> Self {
        let seats = r
            .hold
            .as_ref()
            .map(|h| h.seats.clone())
            .filter(|s| !s.is_empty());
        let money = r.hold.as_ref().and_then(|h| h.amount.clone());
        AttemptSummaryOut {
            attempt_id: r.id.to_string(),
            user_id: r.user.as_str().to_owned(),
            state: r.state.into(),
            reason: r.state.reason().map(Into::into),
            units: r.hold.as_ref().map_or(0, |h| h.quantity),
            seat_ids: seats,
            amount: money.as_ref().map(|m| m.amount),
            currency: money.map(|m| m.currency.to_string()),
            payment_reference: r.payment_reference.map(|p| p.to_string()),
            admission_expires_at: r.admission_expires_at,
            hold_expires_at: r.hold_expires_at,
            payment_expires_at: r.payment_expires_at,
        }
    }
}

fn example_attempt() -> AttemptSummaryOut {
    AttemptSummaryOut {
        attempt_id: "0190a5c27d4e7c3a9b1f2e4d6a8c0b120190a5c3e1f07b2d8c4a6e2f1b3d5c70".into(),
        user_id: "user-8412".into(),
        state: AttemptStateName::Confirmed,
        reason: None,
        units: 2,
        seat_ids: None,
        amount: Some(198_000),
        currency: Some("KRW".into()),
        payment_reference: Some("5f0c2a4e-1b3d-4c6e-8a9b-7d2e4f6a8c0b".into()),
        admission_expires_at: example_time(),
        hold_expires_at: Some(example_time()),
        payment_expires_at: Some(example_time()),
    }
}

/// A page of a sale's attempts, newest first.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AttemptPage {
    pub attempts: Vec<AttemptSummaryOut>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
    /// With `user_id` (and no `state`), on the first page: the user's attempt still waiting in
    /// the queue and its place. Waiting attempts are in the queue only, not in `attempts`.
    #[oai(skip_serializing_if_is_none)]
    pub waiting: Option<WaitingOut>,
}

/// A buyer's attempt waiting in the queue, and its place.
#[derive(Debug, Clone, Object)]
pub struct WaitingOut {
    pub attempt_id: String,
    /// 1 = next to be admitted.
    pub position: u64,
    /// How many wait in the sale.
    pub waiting: u64,
}

impl From<AttemptList> for AttemptPage {
    fn from(list: AttemptList) -> Self {
        AttemptPage {
            attempts: list.page.items.into_iter().map(Into::into).collect(),
            next_cursor: list.page.next,
            waiting: list.waiting.map(|w| WaitingOut {
                attempt_id: w.attempt.to_string(),
                position: w.position,
                waiting: w.waiting,
            }),
        }
    }
}

impl poem_openapi::types::Example for AttemptPage {
    fn example() -> Self {
        AttemptPage {
            attempts: vec![example_attempt()],
            next_cursor: None,
            waiting: None,
        }
    }
}

/// One transition of the audit trail.
#[derive(Debug, Clone, Object)]
pub struct TransitionOut {
    pub from: AttemptStateName,
    pub to: AttemptStateName,
    #[oai(skip_serializing_if_is_none)]
    pub reason: Option<ExpiryReasonName>,
    /// The event that caused it (`admit`, `hold`, `checkout`, `payment_succeeded`, a timeout…).
    pub cause: String,
    /// The trace it was made in, when traces are on: where an SRE follows this step.
    #[oai(skip_serializing_if_is_none)]
    pub trace_id: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<TransitionRow> for TransitionOut {
    fn from(row: TransitionRow) -> Self {
        let state = |name: &str, reason: Option<&str>| {
            AttemptState::from_parts(name, reason).unwrap_or(AttemptState::Queued)
        };
        let to = state(&row.to, row.reason.as_deref());
        TransitionOut {
            from: state(&row.from, None).into(),
            to: to.into(),
            reason: to.reason().map(Into::into),
            cause: row.cause,
            trace_id: row.trace_id,
            at: row.at,
        }
    }
}

/// A payment provider's event, recorded once per provider event id.
#[derive(Debug, Clone, Object)]
pub struct PaymentEventOut {
    pub provider_event_id: String,
    /// `succeeded` or `failed` (the provider's final word), `failed_try` (a declined card;
    /// the buyer may try again), `refund_taken` or `refund_refused` (an operator's refund, as
    /// the provider answered it), `refunded` (the provider reports a refund, e.g. one made in
    /// its dashboard).
    pub kind: String,
    pub received_at: DateTime<Utc>,
}

impl From<PaymentEventRow> for PaymentEventOut {
    fn from(row: PaymentEventRow) -> Self {
        PaymentEventOut {
            provider_event_id: row.provider_event_id,
            kind: row.kind,
            received_at: row.received_at,
        }
    }
}

/// One attempt whole: how it stands, every transition with its cause and time, and what the
/// payment provider said.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AttemptFileOut {
    pub attempt: AttemptSummaryOut,
    pub trail: Vec<TransitionOut>,
    pub payment_events: Vec<PaymentEventOut>,
}

impl From<AttemptFile> for AttemptFileOut {
    fn from(file: AttemptFile) -> Self {
        AttemptFileOut {
            attempt: file.record.into(),
            trail: file.trail.into_iter().map(Into::into).collect(),
            payment_events: file.payment_events.into_iter().map(Into::into).collect(),
        }
    }
}

impl poem_openapi::types::Example for AttemptFileOut {
    fn example() -> Self {
        let step = |from, to, cause: &str| TransitionOut {
            from,
            to,
            reason: None,
            cause: cause.into(),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
            at: example_time(),
        };
        AttemptFileOut {
            attempt: example_attempt(),
            trail: vec![
                step(
                    AttemptStateName::Queued,
                    AttemptStateName::Admitted,
                    "admit",
                ),
                step(AttemptStateName::Admitted, AttemptStateName::Hold, "hold"),
                step(
                    AttemptStateName::Hold,
                    AttemptStateName::PaymentPending,
                    "checkout",
                ),
                step(
                    AttemptStateName::PaymentPending,
                    AttemptStateName::Confirmed,
                    "payment_succeeded",
                ),
            ],
            payment_events: vec![PaymentEventOut {
                provider_event_id: "evt_3Pq8".into(),
                kind: "succeeded".into(),
                received_at: example_time(),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::types::{Example, ToJSON};

    use super::*;

    /// Every state and reason, and an attempt with every field set and one with none.
    fn every_shape() -> Vec<AttemptOut> {
        let time = DateTime::parse_from_rfc3339("2026-12-02T10:00:00.123456789Z")
            .expect("a literal time")
            .with_timezone(&Utc);
        let full = AttemptOut {
            attempt_id: "a".repeat(64),
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            state: AttemptStateName::PaymentPending,
            reason: Some(ExpiryReasonName::PaymentTimeout),
            position: Some(7),
            waiting: Some(9),
            estimated_wait_secs: Some(3),
            sold_out: Some(true),
            poll_after_ms: 1500,
            admission_token: Some("token \"quoted\" \u{e9}".into()),
            admission_expires_at: Some(time),
            hold: Some(HoldOut {
                quantity: 2,
                seat_ids: vec!["A-1".into(), "A-2".into()],
                expires_at: Some(time),
                amount: Some(198_000),
                currency: Some("KRW".into()),
            }),
            payment: Some(PaymentOut {
                reference: "ref".into(),
                provider: Some("sandbox".into()),
                pay: Some(PayWith::Sandbox(
                    crate::payments::providers::pay::SandboxPay {
                        url: "/sandbox/ref".into(),
                    },
                )),
                last_failure: None,
                expires_at: Some(time),
            }),
            as_of: Some(time),
            queue_ticket: Some("1.2.x".into()),
        };
        let bare = AttemptOut {
            reason: None,
            position: None,
            waiting: None,
            estimated_wait_secs: None,
            sold_out: None,
            admission_token: None,
            admission_expires_at: None,
            hold: Some(HoldOut {
                quantity: 1,
                seat_ids: vec![],
                expires_at: None,
                amount: None,
                currency: None,
            }),
            payment: Some(PaymentOut {
                reference: "ref".into(),
                provider: None,
                pay: None,
                last_failure: None,
                expires_at: None,
            }),
            as_of: None,
            queue_ticket: None,
            ..full.clone()
        };
        let states = [
            AttemptStateName::Queued,
            AttemptStateName::Admitted,
            AttemptStateName::Hold,
            AttemptStateName::PaymentPending,
            AttemptStateName::Confirmed,
            AttemptStateName::Expired,
        ];
        let reasons = [
            ExpiryReasonName::Left,
            ExpiryReasonName::Abandoned,
            ExpiryReasonName::AdmissionTimeout,
            ExpiryReasonName::HoldTimeout,
            ExpiryReasonName::Released,
            ExpiryReasonName::PaymentFailed,
            ExpiryReasonName::PaymentTimeout,
            ExpiryReasonName::SaleClosed,
            ExpiryReasonName::Refunded,
        ];
        let mut all = vec![AttemptOut::example(), full.clone(), bare];
        all.extend(states.map(|state| AttemptOut {
            state,
            ..full.clone()
        }));
        all.extend(reasons.map(|reason| AttemptOut {
            reason: Some(reason),
            ..full.clone()
        }));
        all
    }

    /// The status answer is written by serde (`Serialized`), the schema and the other answers by
    /// poem-openapi: both must write the same JSON.
    #[test]
    fn serde_writes_an_attempt_as_the_schema_does() {
        for out in every_shape() {
            let by_serde = serde_json::to_value(&out).expect("serializes");
            assert_eq!(Some(by_serde), out.to_json(), "{out:?}");
        }
    }
}
