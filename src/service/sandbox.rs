//! The sandbox payment provider of the embedded default, so frontends can build the whole flow
//! without a real provider: `POST /sandbox/payments/{reference}` with `approve` or `decline`
//! (and an optional delay) makes the sandbox sign a webhook with the configured secret, exactly
//! as a provider would, and deliver it to the webhook handler.

use std::time::Duration;

use uuid::Uuid;

use super::{payment, App, ServiceError, ServiceResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Approve,
    Decline,
}

/// Schedules the provider's webhook for `reference` after `delay`; returns the event id.
pub fn pay(app: &App, reference: Uuid, outcome: Outcome, delay: Duration) -> ServiceResult<String> {
    if !app.config.sandbox_enabled() {
        return Err(ServiceError::NotFound("sandbox"));
    }
    let event_id = format!("evt_sandbox_{}", Uuid::new_v4().simple());
    let kind = match outcome {
        Outcome::Approve => "payment.succeeded",
        Outcome::Decline => "payment.failed",
    };
    let body = serde_json::json!({ "id": event_id, "type": kind, "payment_reference": reference })
        .to_string();
    let app = app.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let signature = app
            .webhooks
            .sign(chrono::Utc::now().timestamp(), body.as_bytes());
        if let Err(e) = payment::receive(&app, &signature, body.as_bytes()).await {
            tracing::warn!(%reference, error = %e, "sandbox webhook refused");
        }
    });
    Ok(event_id)
}
