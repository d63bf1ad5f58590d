//! Stripe's webhooks (`POST /v1/webhooks/stripe`), exactly as Stripe signs and sends them:
//! `Stripe-Signature` over the raw body, then the event about a PaymentIntent sluice started.
//! - `payment_intent.succeeded`: CONFIRMED, once per event id, when the intent's amount and
//!   currency are the hold's (after expiry: refunded, see [`super::payment::refund_late`]);
//! - `payment_intent.payment_failed`: the failure is recorded and the attempt stays payable
//!   (the buyer may try another card until the deadline);
//! - `payment_intent.canceled`: EXPIRED with the stock back;
//! - `charge.refunded`: the refund is recorded.
//!
//! An event about an object sluice did not start, or of another type, is answered 2xx and
//! changes nothing: Stripe retries every other answer for days.

use super::payment::{apply_found, count_webhook, ProviderAck};
use super::{App, ServiceError, ServiceResult};
use crate::payments::provider::found;
use crate::payments::stripe::{Event, Intent};
use crate::payments::{Found, Provider};

pub async fn receive(app: &App, signature: &str, body: &[u8]) -> ServiceResult<ProviderAck> {
    let Provider::Stripe(stripe) = &app.provider else {
        return Err(ServiceError::NotFound(
            "the Stripe webhook (payments.provider is not stripe)",
        ));
    };
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = stripe.verify(signature, body, now) {
        count_webhook("stripe", "bad_signature");
        return Err(ServiceError::BadSignature(e.to_string()));
    }
    let event: Event = serde_json::from_slice(body)
        .map_err(|e| ServiceError::validation("body", format!("not a Stripe event: {e}")))?;
    let ack = match event.kind.as_str() {
        "payment_intent.succeeded"
        | "payment_intent.payment_failed"
        | "payment_intent.canceled" => {
            let intent: Intent =
                serde_json::from_value(event.data.object.clone()).map_err(|e| {
                    ServiceError::validation("data.object", format!("not a PaymentIntent: {e}"))
                })?;
            on_intent(app, &event, &intent).await?
        }
        "charge.refunded" => on_refund(app, &event).await?,
        _ => ProviderAck::Ignored,
    };
    count_webhook("stripe", ack.outcome());
    Ok(ack)
}

async fn on_intent(app: &App, event: &Event, intent: &Intent) -> ServiceResult<ProviderAck> {
    let Some((attempt, reference)) = app
        .ledger
        .payment_by_provider_id("stripe", &intent.id)
        .await?
    else {
        return Ok(ProviderAck::Ignored);
    };
    // A failed try always says why; when Stripe does not, it still is one.
    let found = match found(intent) {
        Found::Open { last_failure } => Found::Open {
            last_failure: Some(last_failure.unwrap_or_else(|| "the payment failed".into())),
        },
        other => other,
    };
    apply_found(app, &event.id, found, attempt, reference).await
}

/// `charge.refunded`: the charge names its PaymentIntent; the refund is recorded on its
/// payment (the operator's refund, or one made at Stripe's dashboard).
async fn on_refund(app: &App, event: &Event) -> ServiceResult<ProviderAck> {
    let charge = &event.data.object;
    let Some(intent) = charge["payment_intent"].as_str() else {
        return Ok(ProviderAck::Ignored);
    };
    let Some((attempt, reference)) = app.ledger.payment_by_provider_id("stripe", intent).await?
    else {
        return Ok(ProviderAck::Ignored);
    };
    let refund = charge["refunds"]["data"][0]["id"]
        .as_str()
        .unwrap_or(event.id.as_str());
    app.ledger.set_provider_refund(attempt, refund).await?;
    app.ledger
        .note_payment(&event.id, reference, "refunded")
        .await?;
    tracing::info!(%attempt, refund, "Stripe reports a refund");
    Ok(ProviderAck::Recorded)
}
