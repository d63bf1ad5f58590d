//! What the page needs to pay, one object per provider, tagged by `provider` (the answer's
//! `payment.pay`, a tagged union in the spec). With `registry.rs`, the list of the providers
//! sluice knows: each provider's connector fills its own object.

use poem_openapi::{Object, Union};
use serde::Serialize;

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

/// What Stripe.js needs to take the payment: load it from `js_url`, then
/// `Stripe(publishable_key).elements({clientSecret: client_secret})`.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct StripePay {
    pub client_secret: String,
    pub publishable_key: String,
    pub js_url: String,
}

/// What Toss's payment window needs: load the SDK from `js_url`, then
/// `TossPayments(client_key).payment({customerKey}).requestPayment({method, amount: {currency,
/// value: amount}, orderId: order_id, orderName: order_name, successUrl: success_url,
/// failUrl: fail_url})`. The URLs are sluice's; when they are paths, resolve them against the
/// address sluice is called at. A shop whose own page is the success URL posts what Toss gives
/// it to `confirmTossPayment` instead.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct TossPay {
    pub client_key: String,
    pub js_url: String,
    /// The attempt's order id (6-64 characters of `[A-Za-z0-9_-]`).
    pub order_id: String,
    /// The sale's name, cut to Toss's 100 characters.
    pub order_name: String,
    /// The hold's amount, in minor units (whole won for KRW).
    pub amount: u64,
    pub currency: String,
    pub success_url: String,
    pub fail_url: String,
}

/// What PortOne's payment window needs: load the SDK from `js_url`, then
/// `PortOne.requestPayment({storeId: store_id, channelKey: channel_key, paymentId: payment_id,
/// orderName: order_name, totalAmount: amount, currency: "CURRENCY_" + currency, payMethod})`.
/// PortOne then reports to `receiveProviderWebhook`.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct PortOnePay {
    pub store_id: String,
    pub channel_key: String,
    pub js_url: String,
    /// The attempt's payment id at PortOne.
    pub payment_id: String,
    /// The sale's name, cut to 100 characters.
    pub order_name: String,
    /// The hold's amount, in minor units (whole won for KRW).
    pub amount: u64,
    pub currency: String,
}
