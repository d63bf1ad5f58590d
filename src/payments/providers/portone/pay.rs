//! What the page needs to pay with PortOne (`payment.pay` when `provider` is `portone`).

use poem_openapi::Object;
use serde::Serialize;

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
