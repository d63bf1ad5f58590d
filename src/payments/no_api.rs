//! The providers sluice does not call (`sandbox`, `webhook`): their payments are reported by
//! `Sluice-Signature` webhooks (`webhook.rs`), and a refund is a `refund_required` event for
//! the shop. The sandbox's page posts an outcome at sluice's sandbox route
//! (`service/sandbox.rs`); the shop's own payment service needs only the payment's reference.

use std::any::Any;

use async_trait::async_trait;
use uuid::Uuid;

use super::calls::ProviderError;
use super::connector::{Connector, Found, Order, RefundTaken, Started};
use super::providers::pay::{PayWith, SandboxPay, ShopPay};

/// A provider without an API.
pub enum NoApi {
    /// The built-in test provider: the page pays at sluice's sandbox route.
    Sandbox,
    /// The shop's own payment service, which reports by signed webhook.
    Shop,
}

/// The path a buyer "pays" a payment `reference` at in the sandbox.
pub fn sandbox_path(reference: Uuid) -> String {
    format!("/sandbox/payments/{reference}")
}

impl NoApi {
    /// What the page pays `reference` with.
    fn pay(&self, reference: Uuid) -> PayWith {
        match self {
            NoApi::Sandbox => PayWith::Sandbox(SandboxPay {
                url: sandbox_path(reference),
            }),
            NoApi::Shop => PayWith::Shop(ShopPay {
                reference: reference.to_string(),
            }),
        }
    }
}

#[async_trait]
impl Connector for NoApi {
    fn name(&self) -> &'static str {
        match self {
            NoApi::Sandbox => "sandbox",
            NoApi::Shop => "webhook",
        }
    }

    fn has_api(&self) -> bool {
        false
    }

    async fn start(&self, order: &Order<'_>, _: Option<&str>) -> Result<Started, ProviderError> {
        Ok(Started {
            id: None,
            pay: self.pay(order.reference),
        })
    }

    /// Checkout starts nothing here: every answer says what to pay with.
    fn standing_pay(&self, reference: Uuid) -> Option<PayWith> {
        Some(self.pay(reference))
    }

    async fn lookup(&self, _: &str) -> Result<Option<Found>, ProviderError> {
        Ok(None)
    }

    async fn cancel(&self, _: &str) -> Result<Option<Found>, ProviderError> {
        Ok(None)
    }

    async fn refund(&self, _: Option<&str>, _: u64, _: &str) -> Result<RefundTaken, ProviderError> {
        Ok(RefundTaken { id: None })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
