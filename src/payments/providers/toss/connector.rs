//! Toss Payments as sluice's [`Connector`]: nothing is called to start a payment; the buyer's
//! browser starts it in Toss's window under the id sluice gives it
//! ([`provider_payment_id`]), for the hold's amount, and comes back to sluice, which confirms
//! it (`service::toss`). sluice then looks it up by that order id.

use std::any::Any;

use async_trait::async_trait;

use super::TossPay;
use super::{Failure, Payment, Toss};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{
    nothing_started, order_name, paid, priced, provider_payment_id, Connector, Delivered, Found,
    Order, RefundTaken, Reported, Started, WebhookError,
};
use crate::payments::page_sources::{origin, PageSources};
use crate::payments::providers::pay::PayWith;

#[async_trait]
impl Connector for Toss {
    fn name(&self) -> &'static str {
        "toss"
    }

    async fn start(&self, order: &Order<'_>, _id: Option<&str>) -> Result<Started, ProviderError> {
        let amount = priced(order, "Toss Payments")?;
        let order_id = provider_payment_id(order.reference);
        Ok(Started {
            id: Some(order_id.clone()),
            pay: PayWith::Toss(TossPay {
                client_key: self.client_key().to_owned(),
                js_url: self.js_url().to_owned(),
                order_id,
                order_name: order_name(order.name),
                amount: amount.amount,
                currency: amount.currency.to_string(),
                success_url: self.return_url("success"),
                fail_url: self.return_url("fail"),
            }),
        })
    }

    async fn lookup(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        Ok(Some(match self.payment_of_order(id).await? {
            Some(payment) => found(&payment),
            None => Found::Open { last_failure: None },
        }))
    }

    /// A payment Toss approved is paid; a virtual account still waiting for its deposit is
    /// canceled there; anything else was never confirmed by sluice, and Toss lets an
    /// unconfirmed payment lapse by itself: none of it can be paid any more.
    async fn cancel(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        match self.payment_of_order(id).await? {
            Some(payment) if payment.status == "DONE" => Ok(Some(found(&payment))),
            Some(payment) if payment.status == "WAITING_FOR_DEPOSIT" => {
                let key = format!("deadline-{id}");
                let after = Toss::cancel(
                    self,
                    &payment.payment_key,
                    "payment deadline passed",
                    None,
                    &key,
                )
                .await?;
                Ok(Some(found(&after)))
            }
            _ => Ok(Some(Found::Canceled)),
        }
    }

    async fn refund(
        &self,
        id: Option<&str>,
        amount: u64,
        key: &str,
    ) -> Result<RefundTaken, ProviderError> {
        let order_id = id.ok_or_else(nothing_started)?;
        let payment = self.payment_of_order(order_id).await?.ok_or_else(|| {
            ProviderError::Refused(format!("Toss has no payment of order {order_id}"))
        })?;
        let after = Toss::cancel(self, &payment.payment_key, "refund", Some(amount), key).await?;
        Ok(RefundTaken {
            id: Some(after.last_transaction_key.unwrap_or(after.payment_key)),
        })
    }

    /// Its script's origin; where the script is Toss's own, Toss's other hosts its window uses.
    fn page_sources(&self) -> PageSources {
        let js = origin(self.js_url()).unwrap_or_default();
        let own = js == "https://js.tosspayments.com";
        PageSources::alike(
            js,
            if own {
                " https://*.tosspayments.com"
            } else {
                ""
            },
        )
    }

    async fn webhook(&self, delivered: &Delivered<'_>) -> Result<Reported, WebhookError> {
        self.reported(delivered).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A Toss payment as a [`Found`]: `DONE` is paid (its total, in won unless it says otherwise).
pub fn found(payment: &Payment) -> Found {
    match payment.status.as_str() {
        "DONE" => paid(
            payment.total_amount,
            payment.currency.as_deref().unwrap_or("KRW"),
        ),
        "CANCELED" | "PARTIAL_CANCELED" => Found::Canceled,
        _ => Found::Open {
            last_failure: payment.failure.as_ref().map(Failure::describe),
        },
    }
}
