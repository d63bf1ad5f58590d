//! A webhook of the deployment's payment provider (`POST /v1/webhooks/{provider}`): the
//! provider's module verifies it and says what it reports (`Connector::webhook`); here that
//! is applied to the payment sluice knows by the provider's id, once per word. Everything
//! sluice does not act on is answered 200 too, since providers send anything else again.

use super::checkout::provider_error;
use super::payment::{apply_found, count_webhook, ProviderAck};
use super::{App, ServiceError, ServiceResult};
use crate::payments::connector::{Delivered, Reported, WebhookError};

/// Receives a webhook posted for `provider` with `headers` and its raw `body`.
pub async fn receive(
    app: &App,
    provider: &str,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> ServiceResult<ProviderAck> {
    let connector = &app.provider;
    let name = connector.name();
    if provider != name {
        return Err(ServiceError::NotFound(
            "a provider's webhook (payments.provider names another, or none by that name)",
        ));
    }
    let delivered = Delivered {
        headers,
        body,
        now: chrono::Utc::now().timestamp(),
    };
    let reported = match connector.webhook(&delivered).await {
        Ok(reported) => reported,
        Err(WebhookError::NoWebhook) => {
            return Err(ServiceError::NotFound(
                "a provider's webhook (this provider reports at /v1/webhooks/payments)",
            ))
        }
        Err(WebhookError::BadSignature(detail)) => {
            count_webhook(name, "bad_signature");
            return Err(ServiceError::BadSignature(detail));
        }
        Err(WebhookError::Invalid { field, detail }) => {
            return Err(ServiceError::validation(field, detail))
        }
        // Not read: answered 503, and the provider sends the webhook again.
        Err(WebhookError::Provider(e)) => return Err(provider_error(e)),
    };
    let ack = apply(app, name, reported).await?;
    count_webhook(name, ack.outcome());
    Ok(ack)
}

/// Applies what the webhook reports to the payment of `provider`'s id it names.
async fn apply(app: &App, provider: &str, reported: Reported) -> ServiceResult<ProviderAck> {
    let (id, event) = match &reported {
        Reported::Ignored => return Ok(ProviderAck::Ignored),
        Reported::Payment { id, event, .. } | Reported::Refunded { id, event, .. } => (id, event),
    };
    let Some((attempt, reference)) = app.ledger.payment_by_provider_id(provider, id).await? else {
        return Ok(ProviderAck::Ignored);
    };
    match &reported {
        Reported::Payment { found, .. } => {
            apply_found(app, event, found.clone(), attempt, reference).await
        }
        // A refund is recorded on its payment (the operator's, or one made at the provider).
        Reported::Refunded { refund, .. } => {
            app.ledger.set_provider_refund(attempt, refund).await?;
            app.ledger
                .note_payment(event, reference, "refunded")
                .await?;
            tracing::info!(%attempt, refund, provider, "the provider reports a refund");
            Ok(ProviderAck::Recorded)
        }
        Reported::Ignored => Ok(ProviderAck::Ignored),
    }
}
