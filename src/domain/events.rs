//! Domain events: what sluice tells the rest of the company. Each is written to the outbox in
//! the same ledger transaction as the change it reports, and relayed later.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempt::{AttemptState, ExpiryReason};
use super::ids::{AttemptId, SaleId};

/// Bumped when the envelope or a `data` shape changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

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
        kind: &str,
        sale_id: SaleId,
        attempt_id: Option<AttemptId>,
        data: serde_json::Value,
    ) -> Self {
        DomainEvent {
            id: Uuid::now_v7(),
            kind: kind.to_owned(),
            sale_id,
            attempt_id,
            occurred_at: Utc::now(),
            schema_version: SCHEMA_VERSION,
            data,
        }
    }

    /// The event announcing that an attempt entered `to`.
    pub fn for_transition(
        attempt: AttemptId,
        user: &str,
        from: AttemptState,
        to: AttemptState,
        cause: &str,
    ) -> Self {
        let kind = match to {
            AttemptState::Queued { .. } => "sluice.attempt.queued",
            AttemptState::Admitted { .. } => "sluice.attempt.admitted",
            AttemptState::Hold { .. } => "sluice.attempt.held",
            AttemptState::PaymentPending { .. } => "sluice.attempt.payment_pending",
            AttemptState::Confirmed { .. } => "sluice.attempt.confirmed",
            AttemptState::Expired { .. } => "sluice.attempt.expired",
        };
        let data = serde_json::json!({
            "user_id": user,
            "from": from.name(),
            "to": to.name(),
            "reason": to.reason().map(ExpiryReason::as_str),
            "cause": cause,
        });
        DomainEvent::new(kind, attempt.sale, Some(attempt), data)
    }
}
