//! The seam between sluice and whoever takes the money (`payments.provider`): start a payment
//! for an attempt, say what the page needs to pay, look a payment up, cancel it, refund it.
//! The `sandbox` and `webhook` providers have no API sluice calls: their payments are reported
//! by `Sluice-Signature` webhooks, and a refund is a `refund_required` event for the shop.
//! Stripe's payment is started at Stripe (a PaymentIntent); Toss's and PortOne's are started by
//! the buyer's browser under an id sluice gives it ([`provider_payment_id`]), which sluice then
//! looks them up by. Calls never run inside a ledger transaction, nor on join or status.

use std::time::Duration;

use uuid::Uuid;

use super::calls::ProviderError;
use super::portone::PortOne;
use super::stripe::Stripe;
use super::toss::Toss;
use crate::config::{Config, ProviderName};
use crate::domain::{AttemptId, Money};

/// The provider of this deployment.
#[derive(Clone)]
pub enum Provider {
    Sandbox,
    Webhook,
    Stripe(Stripe),
    Toss(Toss),
    PortOne(PortOne),
}

/// A payment to start: the attempt's, for its hold's amount.
pub struct Order<'a> {
    pub attempt: AttemptId,
    /// The ledger's reference of the payment (one per attempt).
    pub reference: Uuid,
    /// The hold's amount (none when the sale is not priced: only providers that are not told
    /// the amount take such payments).
    pub amount: Option<&'a Money>,
    /// What the provider's window shows the buyer: the sale's name.
    pub name: &'a str,
}

/// The id under which the buyer's browser starts the payment of `reference` at Toss (its
/// `orderId`) or PortOne (its `paymentId`): `sluice-` and the reference's 32 hex digits, within
/// both providers' rules (6-64 characters of `[A-Za-z0-9_-]`).
pub fn provider_payment_id(reference: Uuid) -> String {
    format!("sluice-{}", reference.simple())
}

/// The longest order name Toss's window takes (`orderName`, 100 characters); PortOne's is held
/// to the same.
const ORDER_NAME_CHARS: usize = 100;

/// `name` cut to what the provider's window shows (whole characters, never a split one).
pub fn order_name(name: &str) -> String {
    name.chars().take(ORDER_NAME_CHARS).collect()
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
    /// Toss's payment window: `TossPayments(client_key).payment(…).requestPayment(…)` with the
    /// order; the buyer comes back to sluice, which confirms.
    Toss {
        client_key: String,
        js_url: String,
        order_id: String,
        order_name: String,
        amount: Money,
        /// Where Toss sends the buyer back: sluice's success route (it confirms) and fail
        /// route (it records why), absolute when `http.public_url` is set, else paths.
        success_url: String,
        fail_url: String,
    },
    /// PortOne's window: `PortOne.requestPayment(…)` into the store, through the channel.
    PortOne {
        store_id: String,
        channel_key: String,
        js_url: String,
        payment_id: String,
        order_name: String,
        amount: Money,
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
            ProviderName::Toss => Provider::Toss(Toss::new(
                config.payments.toss.clone(),
                timeout,
                &config.http.public_url,
            )?),
            ProviderName::PortOne => Provider::PortOne(PortOne::new(
                config.payments.portone.clone(),
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
            Provider::Toss(_) => ProviderName::Toss,
            Provider::PortOne(_) => ProviderName::PortOne,
        }
    }

    /// Whether sluice calls the provider's API: it is told each payment's amount (so a sale
    /// needs a price), asked about payments, and refunds through it.
    pub fn has_api(&self) -> bool {
        match self {
            Provider::Sandbox | Provider::Webhook => false,
            Provider::Stripe(_) | Provider::Toss(_) | Provider::PortOne(_) => true,
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
            // Nothing to call: the buyer's browser starts the payment under sluice's id.
            Provider::Toss(toss) => {
                let amount = priced(order, "Toss Payments")?;
                let order_id = provider_payment_id(order.reference);
                Ok(Started {
                    id: Some(order_id.clone()),
                    pay: PayWith::Toss {
                        client_key: toss.client_key().to_owned(),
                        js_url: toss.js_url().to_owned(),
                        order_id,
                        order_name: order_name(order.name),
                        amount: amount.clone(),
                        success_url: toss.return_url("success"),
                        fail_url: toss.return_url("fail"),
                    },
                })
            }
            Provider::PortOne(portone) => {
                let amount = priced(order, "PortOne")?;
                let payment_id = provider_payment_id(order.reference);
                let config = portone.config();
                Ok(Started {
                    id: Some(payment_id.clone()),
                    pay: PayWith::PortOne {
                        store_id: config.store_id.clone(),
                        channel_key: config.channel_key.clone(),
                        js_url: config.js_url.clone(),
                        payment_id,
                        order_name: order_name(order.name),
                        amount: amount.clone(),
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
            Provider::Toss(toss) => Ok(Some(match toss.payment_of_order(id).await? {
                Some(payment) => found_at_toss(&payment),
                None => Found::Open { last_failure: None },
            })),
            Provider::PortOne(portone) => Ok(Some(match portone.payment(id).await? {
                Some(payment) => found_at_portone(&payment),
                None => Found::Open { last_failure: None },
            })),
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
            // A payment Toss approved is paid; a virtual account still waiting for its deposit
            // is canceled there; anything else was never confirmed by sluice, and Toss lets an
            // unconfirmed payment lapse by itself: none of it can be paid any more.
            Provider::Toss(toss) => match toss.payment_of_order(id).await? {
                Some(payment) if payment.status == "DONE" => Ok(Some(found_at_toss(&payment))),
                Some(payment) if payment.status == "WAITING_FOR_DEPOSIT" => {
                    let key = format!("deadline-{id}");
                    let after = toss
                        .cancel(&payment.payment_key, "payment deadline passed", None, &key)
                        .await?;
                    Ok(Some(found_at_toss(&after)))
                }
                _ => Ok(Some(Found::Canceled)),
            },
            // PortOne has nothing to cancel before a payment is paid: sluice stops honouring it
            // (a payment that is paid afterwards is refunded as late).
            Provider::PortOne(portone) => match portone.payment(id).await? {
                Some(payment) if payment.status == "PAID" => Ok(Some(found_at_portone(&payment))),
                _ => Ok(Some(Found::Canceled)),
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
            (Provider::Toss(toss), Some(order_id)) => {
                let payment = toss.payment_of_order(order_id).await?.ok_or_else(|| {
                    ProviderError::Refused(format!("Toss has no payment of order {order_id}"))
                })?;
                let after = toss
                    .cancel(&payment.payment_key, "refund", Some(amount), key)
                    .await?;
                Ok(RefundTaken {
                    id: Some(after.last_transaction_key.unwrap_or(after.payment_key)),
                })
            }
            (Provider::PortOne(portone), Some(payment_id)) => {
                match portone.cancel(payment_id, amount, "refund").await {
                    Ok(cancellation) if cancellation.status == "FAILED" => {
                        Err(ProviderError::Refused(format!(
                            "PortOne's cancellation {} failed",
                            cancellation.id
                        )))
                    }
                    Ok(cancellation) => Ok(RefundTaken {
                        id: Some(cancellation.id),
                    }),
                    // A cancel whose answer was lost and that is sent again.
                    Err(ProviderError::Refused(detail))
                        if detail.starts_with("PAYMENT_ALREADY_CANCELLED") =>
                    {
                        Ok(RefundTaken {
                            id: Some(format!("{payment_id}-cancelled")),
                        })
                    }
                    Err(e) => Err(e),
                }
            }
            (Provider::Stripe(_) | Provider::Toss(_) | Provider::PortOne(_), None) => {
                Err(ProviderError::Refused(
                    "no payment was started at the provider for this attempt".into(),
                ))
            }
        }
    }
}

/// The hold's amount, which a provider with an API must be told.
fn priced<'a>(order: &Order<'a>, provider: &str) -> Result<&'a Money, ProviderError> {
    order
        .amount
        .ok_or_else(|| ProviderError::Refused(format!("{provider} takes priced payments only")))
}

/// A Toss payment as a [`Found`]: `DONE` is paid (its total, in won unless it says otherwise).
pub fn found_at_toss(payment: &super::toss::Payment) -> Found {
    match payment.status.as_str() {
        "DONE" => paid(
            payment.total_amount,
            payment.currency.as_deref().unwrap_or("KRW"),
        ),
        "CANCELED" | "PARTIAL_CANCELED" => Found::Canceled,
        _ => Found::Open {
            last_failure: payment.failure.as_ref().map(super::toss::Failure::describe),
        },
    }
}

/// A PortOne payment as a [`Found`].
pub fn found_at_portone(payment: &super::portone::Payment) -> Found {
    match (payment.status.as_str(), &payment.amount) {
        ("PAID", Some(amount)) => paid(amount.total, payment.currency.as_deref().unwrap_or("KRW")),
        ("CANCELLED" | "PARTIAL_CANCELLED", _) => Found::Canceled,
        _ => Found::Open {
            last_failure: payment
                .failure
                .as_ref()
                .map(super::portone::Failure::describe),
        },
    }
}

/// Paid `amount` minor units of `currency` (an unknown currency is not a payment sluice took).
fn paid(amount: u64, currency: &str) -> Found {
    match crate::domain::Currency::parse(&currency.to_ascii_uppercase()) {
        Ok(currency) => Found::Paid(Money { amount, currency }),
        Err(_) => Found::Open { last_failure: None },
    }
}

/// A PaymentIntent as a [`Found`].
pub fn found(intent: &super::stripe::Intent) -> Found {
    match intent.status.as_str() {
        "succeeded" => paid(intent.amount, &intent.currency),
        "canceled" => Found::Canceled,
        _ => Found::Open {
            last_failure: intent
                .last_payment_error
                .as_ref()
                .map(super::stripe::PaymentError::describe),
        },
    }
}
