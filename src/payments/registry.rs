//! The providers sluice knows, by the name `payments.provider` gives them: the one place that
//! lists them all. A new provider is its module (its [`Connector`]), a line here, its page
//! script and its test stand-in.

use std::sync::Arc;
use std::time::Duration;

use super::connector::Connector;
use super::no_api::NoApi;
use super::portone::PortOne;
use super::stripe::Stripe;
use super::toss::Toss;
use crate::config::{Config, ProviderName};

/// The provider `config` chooses, made from its settings.
pub fn from_config(config: &Config) -> anyhow::Result<Arc<dyn Connector>> {
    let timeout = Duration::from_millis(config.payments.call_timeout_ms);
    let payments = &config.payments;
    Ok(match config.payment_provider() {
        ProviderName::Sandbox => Arc::new(NoApi::Sandbox),
        ProviderName::Webhook => Arc::new(NoApi::Shop),
        ProviderName::Stripe => Arc::new(Stripe::new(
            payments.stripe.clone(),
            timeout,
            payments.tolerance_secs,
        )?),
        ProviderName::Toss => Arc::new(Toss::new(
            payments.toss.clone(),
            timeout,
            &config.http.public_url,
        )?),
        ProviderName::PortOne => Arc::new(PortOne::new(
            payments.portone.clone(),
            timeout,
            payments.tolerance_secs,
        )?),
    })
}
