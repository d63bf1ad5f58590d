//! The providers sluice does not call (`sandbox`, `webhook`): their payments are reported by
//! `Sluice-Signature` webhooks (`webhook.rs`), and a refund is a `refund_required` event for
//! the shop. The sandbox's page posts an outcome at sluice's sandbox route; the shop's own
//! payment service needs only the payment's reference.

use std::any::Any;

use async_trait::async_trait;

use super::calls::ProviderError;
use super::connector::{Connector, Found, Order, PayWith, RefundTaken, Started};

/// A provider without an API: `name`, and what its page is given.
pub struct NoApi {
    name: &'static str,
    pay: PayWith,
}

impl NoApi {
    /// The built-in test provider: the page pays at sluice's sandbox route.
    pub fn sandbox() -> Self {
        NoApi {
            name: "sandbox",
            pay: PayWith::Sandbox,
        }
    }

    /// The shop's own payment service, which reports by signed webhook.
    pub fn shop() -> Self {
        NoApi {
            name: "webhook",
            pay: PayWith::Reference,
        }
    }
}

#[async_trait]
impl Connector for NoApi {
    fn name(&self) -> &'static str {
        self.name
    }

    fn has_api(&self) -> bool {
        false
    }

    async fn start(&self, _: &Order<'_>, _: Option<&str>) -> Result<Started, ProviderError> {
        Ok(Started {
            id: None,
            pay: self.pay.clone(),
        })
    }

    async fn lookup(&self, _: &str) -> Result<Option<Found>, ProviderError> {
        Ok(None)
    }

    async fn cancel(&self, _: &str) -> Result<Option<Found>, ProviderError> {
        Ok(None)
    }

    async fn refund(
        &self,
        _: Option<&str>,
        _: u64,
        _: &str,
    ) -> Result<RefundTaken, ProviderError> {
        Ok(RefundTaken { id: None })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
