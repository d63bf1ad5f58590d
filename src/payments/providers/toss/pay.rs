//! What the page needs to pay with Toss Payments (`payment.pay` when `provider` is `toss`).

use poem_openapi::Object;
use serde::Serialize;

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
