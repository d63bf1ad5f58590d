//! PortOne's webhooks (`POST /v1/webhooks/portone`), as PortOne V2 signs and sends them:
//! Standard Webhooks headers over the raw body, then `{"type": "Transaction.Paid", "data":
//! {"paymentId": …, "storeId": …, "transactionId": …}}`. The body names the payment only:
//! sluice reads it from PortOne's API and acts on what it says ([`apply_found`]), so its amount
//! and currency are checked against the hold's. Each word is applied once
//! (`portone:<paymentId>:<status>`); everything sluice does not act on is answered 200 too.

use serde::Deserialize;

use super::payment::{apply_found, count_webhook, ProviderAck};
use super::{App, ServiceError, ServiceResult};
use crate::payments::portone::is_payment_id;
use crate::payments::provider::found_at_portone;
use crate::payments::standard_webhooks::Delivery;
use crate::payments::{Provider, ProviderError};

#[derive(Deserialize)]
struct Webhook {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Data,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    payment_id: Option<String>,
    store_id: Option<String>,
}

pub async fn receive(
    app: &App,
    delivery: &Delivery<'_>,
    body: &[u8],
) -> ServiceResult<ProviderAck> {
    let Provider::PortOne(portone) = &app.provider else {
        return Err(ServiceError::NotFound(
            "the PortOne webhook (payments.provider is not portone)",
        ));
    };
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = portone.verify(delivery, body, now) {
        count_webhook("portone", "bad_signature");
        return Err(ServiceError::BadSignature(e.to_string()));
    }
    let hook: Webhook = serde_json::from_slice(body)
        .map_err(|e| ServiceError::validation("body", format!("not a PortOne webhook: {e}")))?;
    let ack = on_webhook(app, portone, &hook).await?;
    count_webhook("portone", ack.outcome());
    Ok(ack)
}

async fn on_webhook(
    app: &App,
    portone: &crate::payments::portone::PortOne,
    hook: &Webhook,
) -> ServiceResult<ProviderAck> {
    let (Some(id), true) = (&hook.data.payment_id, hook.kind.starts_with("Transaction.")) else {
        return Ok(ProviderAck::Ignored);
    };
    let store = hook.data.store_id.as_deref();
    if !is_payment_id(id) || store.is_some_and(|s| s != portone.config().store_id) {
        return Ok(ProviderAck::Ignored);
    }
    let Some((attempt, reference)) = app.ledger.payment_by_provider_id("portone", id).await? else {
        return Ok(ProviderAck::Ignored);
    };
    let payment = match portone.payment(id).await {
        Ok(Some(payment)) => payment,
        Ok(None) | Err(ProviderError::Refused(_)) => return Ok(ProviderAck::Ignored),
        // Not read: answered 503, and PortOne sends the webhook again.
        Err(e) => return Err(super::checkout::provider_error(e)),
    };
    let event = format!("portone:{}:{}", payment.id, payment.status);
    apply_found(app, &event, found_at_portone(&payment), attempt, reference).await
}
