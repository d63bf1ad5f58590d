//! Stripe as sluice's [`Connector`]: a payment is a PaymentIntent sluice creates, for the
//! hold's amount, with the attempt and the payment's reference as its metadata; the page pays
//! it in Stripe's Payment Element with the intent's client secret.

use std::any::Any;

use async_trait::async_trait;

use super::StripePay;
use super::{Intent, PaymentError, Stripe};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{
    nothing_started, paid, Connector, Delivered, Found, Order, RefundTaken, Reported, Started,
    WebhookError,
};
use crate::payments::page_sources::{origin, PageSources};
use crate::payments::providers::pay::PayWith;

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
            pay: PayWith::Stripe(StripePay {
                client_secret,
                publishable_key: self.publishable_key().to_owned(),
                js_url: self.js_url().to_owned(),
            }),
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

    /// Its script's origin, and for Stripe's own Stripe.js its 3-D Secure frames; its API.
    fn page_sources(&self) -> PageSources {
        let js = origin(&self.config.js_url).unwrap_or_default();
        let api = origin(&self.config.api_base).unwrap_or_default();
        let hooks = if js == "https://js.stripe.com" {
            " https://hooks.stripe.com"
        } else {
            ""
        };
        PageSources {
            script: format!(" {js}"),
            frame: format!(" {js}{hooks}"),
            connect: format!(" {js} {api}"),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_page_may_load_stripe_js_its_3ds_frames_and_the_api() {
        let config = super::super::StripeSettings::default();
        let stripe = Stripe::new(config, Duration::from_secs(5), 300).unwrap();
        let sources = stripe.page_sources();
        assert_eq!(sources.script, " https://js.stripe.com");
        assert_eq!(
            sources.frame,
            " https://js.stripe.com https://hooks.stripe.com"
        );
        assert_eq!(
            sources.connect,
            " https://js.stripe.com https://api.stripe.com"
        );
    }
}
