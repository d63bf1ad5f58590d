//! The seam between sluice and whoever takes the money (`payments.provider`): start a payment
//! for an attempt, say what the page needs to pay, look a payment up, cancel it, refund it.
//! The `sandbox` and `webhook` providers have no API sluice calls: their payments are reported
//! by `Sluice-Signature` webhooks, and a refund is a `refund_required` event for the shop.
//! Calls never run inside a ledger transaction, nor on join or status.

use std::time::Duration;

use uuid::Uuid;

use super::calls::ProviderError;
use super::stripe::Stripe;
use crate::config::{Config, ProviderName};
use crate::domain::{AttemptId, Money};

/// The provider of this deployment.
#[derive(Clone)]
pub enum Provider {
    Sandbox,
    Webhook,
    Stripe(Stripe),
}

/// A payment to start: the attempt's, for its hold's amount.
pub struct Order<'a> {
    pub attempt: AttemptId,
    /// The ledger's reference of the payment (one per attempt).
    pub reference: Uuid,
    /// The hold's amount (none when the sale is not priced: only providers that are not told
    /// the amount take such payments).
    pub amount: Option<&'a Money>,
}

/// What the page needs to pay.
#[derive(Debug, Clone, PartialEq)]
pub enum PayWith {
    /// The sandbox: post an outcome at its URL.
    Sandbox,
    /// The shop's own payment service: the reference is all it needs.
    Reference,
    /// Stripe's Payment Element, with the intent's client secret.
    Stripe {
        client_secret: String,
        publishable_key: String,
        js_url: String,
    },
}

/// A payment started at the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// The provider's id of the payment (none for providers sluice does not call).
    pub id: Option<String>,
    pub pay: PayWith,
}

/// What the provider says of a payment.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// Paid, this much.
    Paid(Money),
    /// Not paid yet; the last attempt's failure, if one failed.
    Open { last_failure: Option<String> },
    /// Canceled: it can no longer be paid.
    Canceled,
}

/// A refund the provider took.
#[derive(Debug, Clone, PartialEq)]
pub struct RefundTaken {
    /// The provider's id of the refund (none when the shop refunds: `sandbox`, `webhook`).
    pub id: Option<String>,
}

impl Provider {
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let timeout = Duration::from_millis(config.payments.call_timeout_ms);
        Ok(match config.payment_provider() {
            ProviderName::Sandbox => Provider::Sandbox,
            ProviderName::Webhook => Provider::Webhook,
            ProviderName::Stripe => Provider::Stripe(Stripe::new(
                config.payments.stripe.clone(),
                timeout,
                config.payments.tolerance_secs,
            )?),
        })
    }

    pub fn name(&self) -> ProviderName {
        match self {
            Provider::Sandbox => ProviderName::Sandbox,
            Provider::Webhook => ProviderName::Webhook,
            Provider::Stripe(_) => ProviderName::Stripe,
        }
    }

    /// Whether sluice calls the provider's API: it is told each payment's amount (so a sale
    /// needs a price), asked about payments, and refunds through it.
    pub fn has_api(&self) -> bool {
        match self {
            Provider::Sandbox | Provider::Webhook => false,
            Provider::Stripe(_) => true,
        }
    }

    /// Starts the payment of `order`, or finds the one started before (`id`): what the page
    /// needs to pay it.
    pub async fn start(
        &self,
        order: &Order<'_>,
        id: Option<&str>,
    ) -> Result<Started, ProviderError> {
        match self {
            Provider::Sandbox => Ok(Started {
                id: None,
                pay: PayWith::Sandbox,
            }),
            Provider::Webhook => Ok(Started {
                id: None,
                pay: PayWith::Reference,
            }),
            Provider::Stripe(stripe) => {
                let intent = match id {
                    Some(id) => stripe.retrieve_intent(id).await?,
                    None => {
                        let amount = order.amount.ok_or_else(|| {
                            ProviderError::Refused("Stripe takes priced payments only".into())
                        })?;
                        let metadata = [
                            ("attempt_id", order.attempt.to_string()),
                            ("payment_reference", order.reference.to_string()),
                        ];
                        stripe
                            .create_intent(
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
                        publishable_key: stripe.publishable_key().to_owned(),
                        js_url: stripe.js_url().to_owned(),
                    },
                })
            }
        }
    }

    /// What the provider says of its payment `id`; `None` for providers sluice does not call
    /// (their webhooks say it).
    pub async fn lookup(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        match self {
            Provider::Sandbox | Provider::Webhook => Ok(None),
            Provider::Stripe(stripe) => {
                let intent = stripe.retrieve_intent(id).await?;
                Ok(Some(found(&intent)))
            }
        }
    }

    /// Cancels the payment `id` so it can no longer be paid; what it is after (a payment that
    /// was paid meanwhile stays paid).
    pub async fn cancel(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        match self {
            Provider::Sandbox | Provider::Webhook => Ok(None),
            Provider::Stripe(stripe) => match stripe.cancel_intent(id).await {
                Ok(intent) => Ok(Some(found(&intent))),
                // Stripe refuses to cancel an intent that succeeded (or is canceled): read it.
                Err(ProviderError::Refused(_)) => self.lookup(id).await,
                Err(e) => Err(e),
            },
        }
    }

    /// Refunds `amount` of the payment `id`; `key` names the refund (one per attempt), so a
    /// retry is one refund.
    pub async fn refund(
        &self,
        id: Option<&str>,
        amount: u64,
        key: &str,
    ) -> Result<RefundTaken, ProviderError> {
        match (self, id) {
            (Provider::Sandbox | Provider::Webhook, _) => Ok(RefundTaken { id: None }),
            (Provider::Stripe(stripe), Some(id)) => {
                let refund = stripe.refund(id, amount, key).await?;
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
            (Provider::Stripe(_), None) => Err(ProviderError::Refused(
                "no Stripe payment was started for this attempt".into(),
            )),
        }
    }
}

/// A PaymentIntent as a [`Found`].
pub fn found(intent: &super::stripe::Intent) -> Found {
    match intent.status.as_str() {
        "succeeded" => {
            match crate::domain::Currency::parse(&intent.currency.to_ascii_uppercase()) {
                Ok(currency) => Found::Paid(Money {
                    amount: intent.amount,
                    currency,
                }),
                Err(_) => Found::Open { last_failure: None },
            }
        }
        "canceled" => Found::Canceled,
        _ => Found::Open {
            last_failure: intent
                .last_payment_error
                .as_ref()
                .map(super::stripe::PaymentError::describe),
        },
    }
}
