//! The payment provider's webhook: verify the signature over the raw body, then apply the event
//! once per provider event id. Succeeded → CONFIRMED; failed → EXPIRED with stock back; success
//! after expiry → `refund_required` (the attempt stays EXPIRED).

use super::transition::settle;
use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptState, Effect};
use crate::ledger::PaymentApplied;
use crate::payments::{PaymentWebhook, WebhookKind};

/// What a webhook did, as the provider is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookResult {
    /// The attempt moved: CONFIRMED, or EXPIRED with its stock back.
    Applied,
    /// This provider event id was processed before: nothing changed.
    Duplicate,
    /// A new event that changes nothing (a failure after a success, a second success).
    Ignored,
    /// Money arrived for an attempt that had expired: a refund is owed.
    RefundRequired,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookAck {
    pub result: WebhookResult,
    pub state: AttemptState,
}

pub async fn receive(app: &App, signature: &str, body: &[u8]) -> ServiceResult<WebhookAck> {
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = app.webhooks.verify(signature, body, now) {
        metrics::counter!("sluice_webhooks_total", "outcome" => "bad_signature").increment(1);
        return Err(ServiceError::BadSignature(e.to_string()));
    }
    let hook = PaymentWebhook::parse(body).map_err(|m| ServiceError::validation("body", m))?;
    let succeeded = hook.kind == WebhookKind::Succeeded;
    let outcome = app
        .ledger
        .payment_event(&hook.id, hook.payment_reference, succeeded)
        .await?;
    match outcome {
        PaymentApplied::Applied(applied) => {
            settle(app, &applied).await;
            metrics::counter!("sluice_webhooks_total", "outcome" => "applied").increment(1);
            let result = if succeeded { "succeeded" } else { "failed" };
            metrics::counter!("sluice_payments_total", "result" => result).increment(1);
            let result = if applied.decision().effects.contains(&Effect::RefundRequired) {
                WebhookResult::RefundRequired
            } else if applied.decision().changed {
                WebhookResult::Applied
            } else {
                WebhookResult::Ignored
            };
            Ok(WebhookAck {
                result,
                state: applied.record.state,
            })
        }
        PaymentApplied::Duplicate { record } => {
            metrics::counter!("sluice_webhooks_total", "outcome" => "duplicate").increment(1);
            Ok(WebhookAck {
                result: WebhookResult::Duplicate,
                state: record.state,
            })
        }
        PaymentApplied::UnknownReference => {
            metrics::counter!("sluice_webhooks_total", "outcome" => "unknown_reference")
                .increment(1);
            Err(ServiceError::NotFound("payment"))
        }
    }
}
