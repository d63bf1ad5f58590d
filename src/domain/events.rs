//! Domain events: what sluice tells the rest of the company. Each is written to the outbox in
//! the same ledger transaction as the change it reports, and relayed later.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempt::{AttemptState, Decision, ExpiryReason, Kept};
use super::ids::{AttemptId, SaleId};
use super::operator::AdminAction;
use super::sale::{Sale, SaleStatus};

/// Bumped when the envelope or a `data` shape changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

/// Who gives back the money of a `sluice.payment.refund_required` event (its `data.refund`), so
/// that the shop refunds what sluice does not, and nothing twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refunding {
    /// The provider took the refund before the ledger wrote it (an operator's refund through
    /// a provider sluice calls): the money is back; nothing is owed.
    Taken,
    /// sluice asks the provider for it right after the ledger writes it (a payment that came
    /// after its attempt expired, with `payments.refund_late_payments` on and a provider with
    /// an API); a refusal is logged and counted, and the shop then refunds it by hand.
    Asked,
    /// sluice moves no money (no provider API, or late refunds off): the shop gives it back.
    Owed,
}

impl Refunding {
    pub fn as_str(self) -> &'static str {
        match self {
            Refunding::Taken => "taken",
            Refunding::Asked => "asked",
            Refunding::Owed => "owed",
        }
    }
}

/// Every kind of event sluice emits; `openapi/asyncapi.yaml` documents each (a test checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    SaleOpened,
    SalePaused,
    SaleClosed,
    AttemptAdmitted,
    AttemptHeld,
    AttemptPaymentPending,
    AttemptConfirmed,
    AttemptExpired,
    RefundRequired,
    AdminAction,
}

impl EventType {
    pub const ALL: [EventType; 10] = [
        EventType::SaleOpened,
        EventType::SalePaused,
        EventType::SaleClosed,
        EventType::AttemptAdmitted,
        EventType::AttemptHeld,
        EventType::AttemptPaymentPending,
        EventType::AttemptConfirmed,
        EventType::AttemptExpired,
        EventType::RefundRequired,
        EventType::AdminAction,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::SaleOpened => "sluice.sale.opened",
            EventType::SalePaused => "sluice.sale.paused",
            EventType::SaleClosed => "sluice.sale.closed",
            EventType::AttemptAdmitted => "sluice.attempt.admitted",
            EventType::AttemptHeld => "sluice.attempt.held",
            EventType::AttemptPaymentPending => "sluice.attempt.payment_pending",
            EventType::AttemptConfirmed => "sluice.attempt.confirmed",
            EventType::AttemptExpired => "sluice.attempt.expired",
            EventType::RefundRequired => "sluice.payment.refund_required",
            EventType::AdminAction => "sluice.admin.action",
        }
    }

    /// The event announcing that an attempt entered `state` (none for QUEUED: waiting users
    /// live only in the queue store).
    pub fn entering(state: AttemptState) -> Option<EventType> {
        match state {
            AttemptState::Queued => None,
            AttemptState::Admitted => Some(EventType::AttemptAdmitted),
            AttemptState::Hold => Some(EventType::AttemptHeld),
            AttemptState::PaymentPending => Some(EventType::AttemptPaymentPending),
            AttemptState::Confirmed => Some(EventType::AttemptConfirmed),
            AttemptState::Expired { .. } => Some(EventType::AttemptExpired),
        }
    }

    /// The event announcing that a sale's status became `status`.
    pub fn sale_status(status: SaleStatus) -> EventType {
        match status {
            SaleStatus::Open => EventType::SaleOpened,
            SaleStatus::Paused => EventType::SalePaused,
            SaleStatus::Closed => EventType::SaleClosed,
        }
    }
}

impl Decision {
    /// The event the transition announces to the rest of the company (written to the outbox
    /// with it), if any: a transition the ledger keeps announces the state it enters.
    pub fn announces(&self) -> Option<EventType> {
        match self.kept {
            Kept::Ledger => EventType::entering(self.to),
            Kept::QueueStore | Kept::Nowhere => None,
        }
    }
}

/// The envelope every event travels in. `id` is unique: consumers de-duplicate on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainEvent {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
    pub sale_id: SaleId,
    pub attempt_id: Option<AttemptId>,
    pub occurred_at: DateTime<Utc>,
    pub schema_version: u32,
    pub data: serde_json::Value,
}

impl DomainEvent {
    pub fn new(
        kind: EventType,
        sale_id: SaleId,
        attempt_id: Option<AttemptId>,
        data: serde_json::Value,
    ) -> Self {
        DomainEvent {
            id: Uuid::now_v7(),
            kind: kind.as_str().to_owned(),
            sale_id,
            attempt_id,
            occurred_at: Utc::now(),
            schema_version: SCHEMA_VERSION,
            data,
        }
    }

    /// The event a decision announces (see [`Decision::announces`]), if any; `amount` is
    /// what the attempt's hold costs, when it has one and the sale is priced.
    pub fn for_decision(
        attempt: AttemptId,
        user: &str,
        decision: &Decision,
        amount: Option<&super::Money>,
    ) -> Option<Self> {
        let data = serde_json::json!({
            "user_id": user,
            "from": decision.from.name(),
            "to": decision.to.name(),
            "reason": decision.to.reason().map(ExpiryReason::as_str),
            "cause": decision.event.as_str(),
            "amount": amount.map(|m| m.amount),
            "currency": amount.map(|m| m.currency.code()),
        });
        Some(DomainEvent::new(
            decision.announces()?,
            attempt.sale,
            Some(attempt),
            data,
        ))
    }

    /// A new sale.
    pub fn sale_created(sale: &Sale) -> Self {
        let data = serde_json::json!({ "name": sale.name, "opens_at": sale.opens_at, "total": sale.stock.total() });
        DomainEvent::new(EventType::SaleOpened, sale.id, None, data)
    }

    /// A sale's status changed from `from` (its stored name) to `to`.
    pub fn sale_status(sale: SaleId, from: &str, to: SaleStatus) -> Self {
        DomainEvent::new(
            EventType::sale_status(to),
            sale,
            None,
            serde_json::json!({ "from": from }),
        )
    }

    /// An operator's action, as the admin audit log has it. An action on no sale (an admin
    /// key's) carries the nil sale id.
    pub fn admin_action(action: &AdminAction) -> Self {
        let mut event = DomainEvent::new(
            EventType::AdminAction,
            action.sale.unwrap_or(SaleId(Uuid::nil())),
            None,
            serde_json::json!({
                "actor": action.actor,
                "action": action.action,
                "target": action.target,
                "before": action.before,
                "after": action.after,
            }),
        );
        event.id = action.id;
        event.occurred_at = action.at;
        event
    }
}
