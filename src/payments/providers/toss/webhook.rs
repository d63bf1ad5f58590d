//! Toss Payments' webhooks: `PAYMENT_STATUS_CHANGED` (its payment looked up by key) or
//! `DEPOSIT_CALLBACK` (a virtual account's deposit, its `secret` checked against the
//! payment's own). Toss does not sign its webhooks, so the body is never acted on: what the
//! lookup answers is reported. A word is named `toss:<paymentKey>:<status>`, the same whether
//! the confirm, a webhook or one of its resends brings it, so each is applied once.

use subtle::ConstantTimeEq;

use super::connector::found;
use super::{is_order_id, is_payment_key, Toss};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{Delivered, Reported, WebhookError};

impl Toss {
    /// What a delivered webhook reports: the payment it names, as Toss's API answers it.
    pub(super) async fn reported(
        &self,
        delivered: &Delivered<'_>,
    ) -> Result<Reported, WebhookError> {
        let hook: serde_json::Value = delivered.json("JSON")?;
        let payment = if hook["eventType"] == "PAYMENT_STATUS_CHANGED" {
            let key = hook["data"]["paymentKey"].as_str().unwrap_or_default();
            if !is_payment_key(key) {
                return Err(WebhookError::Invalid {
                    field: "data.paymentKey",
                    detail: "a Toss payment key is required".into(),
                });
            }
            match self.payment(key).await {
                Ok(payment) => payment,
                // No such payment at Toss: not one to act on.
                Err(ProviderError::Refused(_)) => return Ok(Reported::Ignored),
                Err(e) => return Err(WebhookError::Provider(e)),
            }
        } else if hook.get("secret").is_some() && hook.get("orderId").is_some() {
            let order_id = hook["orderId"].as_str().unwrap_or_default();
            if !is_order_id(order_id) {
                return Ok(Reported::Ignored);
            }
            let Some(payment) = self
                .payment_of_order(order_id)
                .await
                .map_err(WebhookError::Provider)?
            else {
                return Ok(Reported::Ignored);
            };
            let sent = hook["secret"].as_str().unwrap_or_default().as_bytes();
            let own = payment.secret.as_deref().unwrap_or_default().as_bytes();
            if own.is_empty() || !bool::from(sent.ct_eq(own)) {
                return Err(WebhookError::BadSignature(
                    "the deposit callback's secret is not its payment's".into(),
                ));
            }
            payment
        } else {
            return Ok(Reported::Ignored);
        };
        Ok(Reported::Payment {
            event: format!("toss:{}:{}", payment.payment_key, payment.status),
            found: found(&payment),
            id: payment.order_id,
        })
    }
}
