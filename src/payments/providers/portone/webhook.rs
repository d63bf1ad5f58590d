//! PortOne's webhooks, as PortOne V2 signs and sends them: Standard Webhooks headers over the
//! raw body, then `{"type": "Transaction.Paid", "data": {"paymentId": …, "storeId": …,
//! "transactionId": …}}`. The body names the payment only: sluice reads it from PortOne's API
//! and reports what that says, so its amount and currency are checked against the hold's. A
//! word is named `portone:<paymentId>:<status>`, so each is applied once.

use serde::Deserialize;

use super::connector::found;
use super::{is_payment_id, PortOne};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{Delivered, Reported, WebhookError};
use crate::payments::standard_webhooks::Delivery;

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

impl PortOne {
    /// What a delivered webhook reports, once its signature verifies: the payment it names,
    /// as PortOne's API answers it.
    pub(super) async fn reported(
        &self,
        delivered: &Delivered<'_>,
    ) -> Result<Reported, WebhookError> {
        let delivery = Delivery {
            id: delivered.header("webhook-id"),
            timestamp: delivered.header("webhook-timestamp"),
            signature: delivered.header("webhook-signature"),
        };
        self.verify(&delivery, delivered.body, delivered.now)
            .map_err(|e| WebhookError::BadSignature(e.to_string()))?;
        let hook: Webhook = delivered.json("a PortOne webhook")?;
        let (Some(id), true) = (&hook.data.payment_id, hook.kind.starts_with("Transaction."))
        else {
            return Ok(Reported::Ignored);
        };
        let store = hook.data.store_id.as_deref();
        if !is_payment_id(id) || store.is_some_and(|s| s != self.config().store_id) {
            return Ok(Reported::Ignored);
        }
        let payment = match self.payment(id).await {
            Ok(Some(payment)) => payment,
            Ok(None) | Err(ProviderError::Refused(_)) => return Ok(Reported::Ignored),
            Err(e) => return Err(WebhookError::Provider(e)),
        };
        Ok(Reported::Payment {
            event: format!("portone:{}:{}", payment.id, payment.status),
            found: found(&payment),
            id: id.clone(),
        })
    }
}
