//! PortOne (V2) as sluice's [`Connector`]: nothing is called to start a payment; the buyer's
//! browser starts it in PortOne's window (`PortOne.requestPayment`) under the id sluice gives
//! it ([`provider_payment_id`]), for the hold's amount, and sluice looks it up by that id.

use std::any::Any;

use async_trait::async_trait;

use super::PortOnePay;
use super::{Failure, Payment, PortOne};
use crate::payments::calls::ProviderError;
use crate::payments::connector::{
    nothing_started, order_name, paid, priced, provider_payment_id, Connector, Delivered, Found,
    Order, RefundTaken, Reported, Started, WebhookError,
};
use crate::payments::page_sources::{origin, PageSources};
use crate::payments::providers::pay::PayWith;

#[async_trait]
impl Connector for PortOne {
    fn name(&self) -> &'static str {
        "portone"
    }

    async fn start(&self, order: &Order<'_>, _id: Option<&str>) -> Result<Started, ProviderError> {
        let amount = priced(order, "PortOne")?;
        let payment_id = provider_payment_id(order.reference);
        let config = self.config();
        Ok(Started {
            id: Some(payment_id.clone()),
            pay: PayWith::PortOne(PortOnePay {
                store_id: config.store_id.clone(),
                channel_key: config.channel_key.clone(),
                js_url: config.js_url.clone(),
                payment_id,
                order_name: order_name(order.name),
                amount: amount.amount,
                currency: amount.currency.to_string(),
            }),
        })
    }

    async fn lookup(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        Ok(Some(match self.payment(id).await? {
            Some(payment) => found(&payment),
            None => Found::Open { last_failure: None },
        }))
    }

    /// PortOne has nothing to cancel before a payment is paid: sluice stops honouring it (a
    /// payment that is paid afterwards is refunded as late).
    async fn cancel(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        match self.payment(id).await? {
            Some(payment) if payment.status == "PAID" => Ok(Some(found(&payment))),
            _ => Ok(Some(Found::Canceled)),
        }
    }

    async fn refund(
        &self,
        id: Option<&str>,
        amount: u64,
        _key: &str,
    ) -> Result<RefundTaken, ProviderError> {
        let payment_id = id.ok_or_else(nothing_started)?;
        match PortOne::cancel(self, payment_id, amount, "refund").await {
            Ok(cancellation) if cancellation.status == "FAILED" => Err(ProviderError::Refused(
                format!("PortOne's cancellation {} failed", cancellation.id),
            )),
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

    /// Its script's origin (where the script is PortOne's own, PortOne's other hosts), and the
    /// payment gateways' windows it is told of (`frame_origins`), as frames only.
    fn page_sources(&self) -> PageSources {
        let config = self.config();
        let js = origin(&config.js_url).unwrap_or_default();
        let own = js == "https://cdn.portone.io";
        let mut sources = PageSources::alike(js, if own { " https://*.portone.io" } else { "" });
        for framed in &config.frame_origins {
            sources.frame.push(' ');
            sources.frame.push_str(framed);
        }
        sources
    }

    async fn webhook(&self, delivered: &Delivered<'_>) -> Result<Reported, WebhookError> {
        self.reported(delivered).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A PortOne payment as a [`Found`].
pub fn found(payment: &Payment) -> Found {
    match (payment.status.as_str(), &payment.amount) {
        ("PAID", Some(amount)) => paid(amount.total, payment.currency.as_deref().unwrap_or("KRW")),
        ("CANCELLED" | "PARTIAL_CANCELLED", _) => Found::Canceled,
        _ => Found::Open {
            last_failure: payment.failure.as_ref().map(Failure::describe),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_page_lets_in_the_pg_windows_it_is_told_of_as_frames_only() {
        let mut config = super::super::PortOneSettings::default();
        config.webhook_secret = "whsec_c2x1aWNlLXRlc3Qtc2VjcmV0".into();
        config.frame_origins = vec![
            "https://stdpay.inicis.com".into(),
            "https://*.nicepay.co.kr".into(),
        ];
        let portone = PortOne::new(config, Duration::from_secs(5), 300).unwrap();
        let sources = portone.page_sources();
        assert_eq!(
            sources.frame,
            " https://cdn.portone.io https://*.portone.io https://stdpay.inicis.com \
             https://*.nicepay.co.kr"
        );
        assert_eq!(
            sources.script,
            " https://cdn.portone.io https://*.portone.io"
        );
    }
}
