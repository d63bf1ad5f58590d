//! The payment provider's webhook.

use poem_openapi::param::Header;
use poem_openapi::payload::{Binary, Json};
use poem_openapi::{ApiRequest, ApiResponse, Enum, Object, OpenApi};

use super::attempts::types::AttemptStateName;
use super::problem::ApiError;
use super::ApiTags;
use crate::service::payment::WebhookResult;
use crate::service::{self, App};

pub struct WebhooksApi {
    pub app: App,
}

/// The raw body, whatever its declared type: the signature is over the exact bytes.
#[derive(ApiRequest)]
pub enum WebhookBody {
    #[oai(content_type = "application/json")]
    Json(Binary<Vec<u8>>),
    /// As Stripe sends it.
    #[oai(content_type = "application/json; charset=utf-8")]
    JsonUtf8(Binary<Vec<u8>>),
    #[oai(content_type = "application/octet-stream")]
    Bytes(Binary<Vec<u8>>),
}

impl WebhookBody {
    fn bytes(&self) -> &[u8] {
        match self {
            WebhookBody::Json(b) | WebhookBody::JsonUtf8(b) | WebhookBody::Bytes(b) => b,
        }
    }
}

#[derive(ApiResponse)]
pub enum WebhookResponse {
    /// Received: `result` says what it did; do not re-send.
    #[oai(status = 200)]
    Ok(Json<WebhookAckOut>),
}

#[OpenApi(tag = "ApiTags::Payments")]
impl WebhooksApi {
    /// Receive a payment event
    ///
    /// The provider posts the event, signed in `Sluice-Signature: t=<unix>,v1=<hex>` with
    /// HMAC-SHA256 over `<t>.<raw body>`; timestamps more than 5 minutes off are refused.
    /// `type` is `payment.succeeded` or `payment.failed`; `payment_reference` is the one the
    /// checkout returned:
    ///
    /// ```json
    /// {"id": "evt_3PqX9b2", "type": "payment.succeeded",
    ///  "payment_reference": "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f62"}
    /// ```
    ///
    /// Each event id is applied once: re-deliveries answer `duplicate`. Success → CONFIRMED;
    /// failure → EXPIRED with the stock given back; success after expiry → a
    /// `sluice.payment.refund_required` event (the attempt stays EXPIRED).
    #[oai(
        path = "/v1/webhooks/payments",
        method = "post",
        operation_id = "receivePaymentWebhook"
    )]
    async fn receive(
        &self,
        #[oai(name = "Sluice-Signature")] signature: Header<String>,
        body: WebhookBody,
    ) -> Result<WebhookResponse, ApiError> {
        let ack = service::payment::receive(&self.app, &signature, body.bytes()).await?;
        Ok(WebhookResponse::Ok(Json(WebhookAckOut {
            result: ack.result.into(),
            attempt_state: ack.state.into(),
        })))
    }

    /// Receive a Stripe event
    ///
    /// Register this URL at Stripe (Dashboard → Developers → Webhooks) with the events
    /// `payment_intent.succeeded`, `payment_intent.payment_failed`, `payment_intent.canceled`
    /// and `charge.refunded`, and set its signing secret as `payments.stripe.webhook_secret`.
    /// `Stripe-Signature` is verified as Stripe documents it (every `v1` value, constant-time,
    /// 300 s tolerance). Each event id is applied once. 404 unless `payments.provider` is
    /// `stripe`. The body is Stripe's event, e.g.:
    ///
    /// ```json
    /// {"id": "evt_1QxY2b", "type": "payment_intent.succeeded",
    ///  "data": {"object": {"id": "pi_3QxY2a", "object": "payment_intent", "amount": 110000,
    ///   "currency": "krw", "status": "succeeded",
    ///   "metadata": {"attempt_id": "0193a0c4…", "payment_reference": "5f0c2a4e-…"}}}}
    /// ```
    #[oai(
        path = "/v1/webhooks/stripe",
        method = "post",
        operation_id = "receiveStripeWebhook"
    )]
    async fn receive_stripe(
        &self,
        #[oai(name = "Stripe-Signature")] signature: Header<String>,
        body: WebhookBody,
    ) -> Result<StripeWebhookResponse, ApiError> {
        let ack = service::stripe_webhook::receive(&self.app, &signature, body.bytes()).await?;
        Ok(StripeWebhookResponse::Ok(Json(StripeAckOut {
            result: ack.result().to_owned(),
            attempt_state: ack.state().map(Into::into),
        })))
    }
}

#[derive(ApiResponse)]
pub enum StripeWebhookResponse {
    /// Received: `result` says what it did. Every event sluice does not act on is answered
    /// 200 too, so Stripe does not send it again.
    #[oai(status = 200)]
    Ok(Json<StripeAckOut>),
}

/// A Stripe event's answer.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct StripeAckOut {
    /// `applied` (the attempt moved), `duplicate` (this event was applied before),
    /// `refund_required` (paid after the attempt expired: refunded through Stripe when
    /// `payments.refund_late_payments` is on), `recorded` (a failed try or a refund, noted on
    /// the payment), or `ignored` (not about a payment sluice started, or of another type).
    pub result: String,
    #[oai(skip_serializing_if_is_none)]
    pub attempt_state: Option<AttemptStateName>,
}

impl poem_openapi::types::Example for StripeAckOut {
    fn example() -> Self {
        StripeAckOut {
            result: "applied".into(),
            attempt_state: Some(AttemptStateName::Confirmed),
        }
    }
}

/// The webhook's answer.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct WebhookAckOut {
    pub result: WebhookResultName,
    pub attempt_state: AttemptStateName,
}

impl poem_openapi::types::Example for WebhookAckOut {
    fn example() -> Self {
        WebhookAckOut {
            result: WebhookResultName::Applied,
            attempt_state: AttemptStateName::Confirmed,
        }
    }
}

/// What a webhook did: `applied` (the attempt moved: CONFIRMED, or EXPIRED with its stock
/// back), `duplicate` (this event id was seen before; nothing changed), `ignored` (a new event
/// that changes nothing, such as a failure after a success) or `refund_required` (money arrived
/// for an attempt that had expired; the attempt stays EXPIRED and a
/// `sluice.payment.refund_required` event is emitted).
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum WebhookResultName {
    Applied,
    Duplicate,
    Ignored,
    RefundRequired,
}

impl From<WebhookResult> for WebhookResultName {
    fn from(result: WebhookResult) -> Self {
        match result {
            WebhookResult::Applied => WebhookResultName::Applied,
            WebhookResult::Duplicate => WebhookResultName::Duplicate,
            WebhookResult::Ignored => WebhookResultName::Ignored,
            WebhookResult::RefundRequired => WebhookResultName::RefundRequired,
        }
    }
}
