//! What the page needs to pay with Stripe (`payment.pay` when `provider` is `stripe`).

use poem_openapi::Object;
use serde::Serialize;

/// What Stripe.js needs to take the payment: load it from `js_url`, then
/// `Stripe(publishable_key).elements({clientSecret: client_secret})`.
#[derive(Debug, Clone, PartialEq, Serialize, Object)]
pub struct StripePay {
    pub client_secret: String,
    pub publishable_key: String,
    pub js_url: String,
}
