//! Stripe's webhooks, exactly as Stripe signs and sends them: `Stripe-Signature` over the raw
//! body, then the event about a PaymentIntent sluice started.
//! - `payment_intent.succeeded`, `…payment_failed`, `…canceled`: the intent as the event
//!   carries it (a failed try always says why; when Stripe does not, it still is one);
//! - `charge.refunded`: the charge names its PaymentIntent and the refund.
//!
//! Any other event is reported as ignored (and answered 2xx: Stripe retries every other answer
//! for days).

use super::connector::found;
use super::{Event, Intent, Stripe};
use crate::payments::connector::{Delivered, Found, Reported, WebhookError};

impl Stripe {
    /// What a delivered webhook reports, once its signature verifies.
    pub(super) fn reported(&self, delivered: &Delivered<'_>) -> Result<Reported, WebhookError> {
        let signature = delivered.header("Stripe-Signature");
        self.verify(signature, delivered.body, delivered.now)
            .map_err(|e| WebhookError::BadSignature(e.to_string()))?;
        let event: Event = delivered.json("a Stripe event")?;
        Ok(match event.kind.as_str() {
            "payment_intent.succeeded"
            | "payment_intent.payment_failed"
            | "payment_intent.canceled" => {
                let intent: Intent =
                    serde_json::from_value(event.data.object.clone()).map_err(|e| {
                        WebhookError::Invalid {
                            field: "data.object",
                            detail: format!("not a PaymentIntent: {e}"),
                        }
                    })?;
                let found = match found(&intent) {
                    Found::Open { last_failure } => Found::Open {
                        last_failure: Some(
                            last_failure.unwrap_or_else(|| "the payment failed".into()),
                        ),
                    },
                    other => other,
                };
                Reported::Payment {
                    id: intent.id,
                    event: event.id,
                    found,
                }
            }
            "charge.refunded" => {
                let charge = &event.data.object;
                let Some(intent) = charge["payment_intent"].as_str() else {
                    return Ok(Reported::Ignored);
                };
                let refund = charge["refunds"]["data"][0]["id"]
                    .as_str()
                    .unwrap_or(event.id.as_str());
                Reported::Refunded {
                    id: intent.to_owned(),
                    refund: refund.to_owned(),
                    event: event.id.clone(),
                }
            }
            _ => Reported::Ignored,
        })
    }
}
