//! Stripe as sluice's [`Connector`]: a payment is a PaymentIntent sluice creates, for the
//! hold's amount, with the attempt and the payment's reference as its metadata; the page pays
//! it in Stripe's Payment Element with the intent's client secret.

use std::any::Any;

use async_trait::async_trait;

use super::{Intent, PaymentError, Stripe};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{
    nothing_started, paid, Connector, Delivered, Found, Order, PayWith, RefundTaken, Reported,
    Started, WebhookError,
};

#[async_trait]
impl Connector for Stripe {
    fn name(&self) -> &'static str {
        "stripe"
    }

    async fn start(&self, order: &Order<'_>, id: Option<&str>) -> Result<Started, ProviderError> {
        let intent = match id {
            Some(id) => self.retrieve_intent(id).await?,
            None => {
                let amount = order.amount.ok_or_else(|| {
                    ProviderError::Refused("Stripe takes priced payments only".into())
                })?;
                let metadata = [
                    ("attempt_id", order.attempt.to_string()),
                    ("payment_reference", order.reference.to_string()),
                ];
                self.create_intent(
                    amount.amount,
                    amount.currency.code(),
                    &metadata,
                    &order.reference.simple().to_string(),
                )
                .await?
            }
        };
        let client_secret = intent.client_secret.clone().ok_or_else(|| {
            ProviderError::Unavailable("the intent came without its client secret".into())
        })?;
        Ok(Started {
            id: Some(intent.id),
            pay: PayWith::Stripe {
                client_secret,
                publishable_key: self.publishable_key().to_owned(),
                js_url: self.js_url().to_owned(),
            },
        })
    }

    async fn lookup(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        let intent = self.retrieve_intent(id).await?;
        Ok(Some(found(&intent)))
    }

    async fn cancel(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        match self.cancel_intent(id).await {
            Ok(intent) => Ok(Some(found(&intent))),
            // Stripe refuses to cancel an intent that succeeded (or is canceled): read it.
            Err(ProviderError::Refused(_)) => self.lookup(id).await,
            Err(e) => Err(e),
        }
    }

    async fn refund(
        &self,
        id: Option<&str>,
        amount: u64,
        key: &str,
    ) -> Result<RefundTaken, ProviderError> {
        let id = id.ok_or_else(nothing_started)?;
        let refund = Stripe::refund(self, id, amount, key).await?;
        match refund.status.as_str() {
            "failed" | "canceled" => Err(ProviderError::Refused(format!(
                "refund {} is {}",
                refund.id, refund.status
            ))),
            _ => Ok(RefundTaken {
                id: Some(refund.id),
            }),
        }
    }

    async fn webhook(&self, delivered: &Delivered<'_>) -> Result<Reported, WebhookError> {
        self.reported(delivered)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A PaymentIntent as a [`Found`].
pub fn found(intent: &Intent) -> Found {
    match intent.status.as_str() {
        "succeeded" => paid(intent.amount, &intent.currency),
        "canceled" => Found::Canceled,
        _ => Found::Open {
            last_failure: intent
                .last_payment_error
                .as_ref()
                .map(PaymentError::describe),
        },
    }
}
