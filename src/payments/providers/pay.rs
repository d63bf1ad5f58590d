//! What the page needs to pay, one object per provider, tagged by `provider` (the answer's
//! `payment.pay`, a tagged union in the spec): each provider's connector fills its own object,
//! which its module defines.

use poem_openapi::{Object, Union};
use serde::Serialize;

use crate::payments::providers::portone::PortOnePay;
use crate::payments::providers::stripe::StripePay;
use crate::payments::providers::toss::TossPay;

/// What the page needs to pay, by provider.
#[derive(Debug, Clone, PartialEq, Serialize, Union)]
#[oai(discriminator_name = "provider", one_of)]
#[serde(tag = "provider")]
pub enum PayWith {
    #[oai(mapping = "sandbox")]
    #[serde(rename = "sandbox")]
    Sandbox(SandboxPay),
    #[oai(mapping = "webhook")]
    #[serde(rename = "webhook")]
    Shop(ShopPay),
    #[oai(mapping = "stripe")]
    #[serde(rename = "stripe")]
    Stripe(StripePay),
    #[oai(mapping = "toss")]
    #[serde(rename = "toss")]
    Toss(TossPay),
    #[oai(mapping = "portone")]
    #[serde(rename = "portone")]
    PortOne(PortOnePay),
}

/// The sandbox (the embedded default's test provider): POST `{"outcome": "approve"}` (or
/// `"decline"`) at `url` to pay.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct SandboxPay {
    pub url: String,
}

/// The shop's own payment service (`webhook`): it takes the payment under `reference` and
/// reports it to `receivePaymentWebhook`.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct ShopPay {
    pub reference: String,
}
