//! The providers sluice knows, by the name `payments.provider` gives them, each in a module of
//! its own here: its API client, its [`Connector`], its webhook, its settings and what the page
//! needs to pay with it. This file, [`settings`] and [`pay`] are the one place that lists them
//! all. A new provider is its module, a line in each of these three, its page script and its
//! test stand-in.

pub mod pay;
pub mod portone;
pub mod settings;
pub mod stripe;
pub mod toss;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::payments::connector::Connector;
use crate::payments::no_api::NoApi;
use crate::setting::Problems;
use portone::PortOne;
use settings::PaymentsConfig;
use stripe::Stripe;
use toss::Toss;

/// The payment providers sluice talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderName {
    Sandbox,
    Webhook,
    Stripe,
    Toss,
    #[serde(rename = "portone")]
    PortOne,
}

impl ProviderName {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderName::Sandbox => "sandbox",
            ProviderName::Webhook => "webhook",
            ProviderName::Stripe => "stripe",
            ProviderName::Toss => "toss",
            ProviderName::PortOne => "portone",
        }
    }
}

/// Adds each setting of `chosen`'s own section that cannot be used (the others are not read).
pub fn check(payments: &PaymentsConfig, chosen: ProviderName, p: &mut Problems) {
    match chosen {
        ProviderName::Sandbox | ProviderName::Webhook => {}
        ProviderName::Stripe => payments.stripe.check(p),
        ProviderName::Toss => payments.toss.check(p),
        ProviderName::PortOne => payments.portone.check(p),
    }
}

/// The provider `chosen`, made from its settings; `public_url` is sluice's address as buyers'
/// browsers reach it (where a provider's window sends the buyer back).
pub fn from_config(
    payments: &PaymentsConfig,
    chosen: ProviderName,
    public_url: &str,
) -> anyhow::Result<Arc<dyn Connector>> {
    let timeout = payments.call_timeout_ms.duration();
    Ok(match chosen {
        ProviderName::Sandbox => Arc::new(NoApi::Sandbox),
        ProviderName::Webhook => Arc::new(NoApi::Shop),
        ProviderName::Stripe => Arc::new(Stripe::new(
            payments.stripe.clone(),
            timeout,
            payments.tolerance_secs.0,
        )?),
        ProviderName::Toss => Arc::new(Toss::new(payments.toss.clone(), timeout, public_url)?),
        ProviderName::PortOne => Arc::new(PortOne::new(
            payments.portone.clone(),
            timeout,
            payments.tolerance_secs.0,
        )?),
    })
}
