//! The payment provider's webhook.

use poem_openapi::param::Header;
use poem_openapi::payload::{Binary, Json};
use poem_openapi::{ApiRequest, ApiResponse, Enum, Object, OpenApi};

use super::attempts::types::AttemptStateName;
use super::problem::ApiError;
use super::ApiTags;
use crate::payments::standard_webhooks::Delivery;
use crate::service::payment::{ProviderAck, WebhookResult};
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
    ) -> Result<ProviderWebhookResponse, ApiError> {
        let ack = service::stripe_webhook::receive(&self.app, &signature, body.bytes()).await?;
        Ok(ProviderWebhookResponse::Ok(Json(ack.into())))
    }

    /// Receive a Toss Payments webhook
    ///
    /// Register this URL in Toss's developer centre (웹훅) for `PAYMENT_STATUS_CHANGED` and,
    /// with virtual accounts, `DEPOSIT_CALLBACK`. Toss does not sign its webhooks: sluice looks
    /// the payment up (`GET /v1/payments/{paymentKey}`, or by order for a deposit, whose
    /// `secret` must be the payment's) and acts on what Toss answers, never on the body. Each
    /// word is applied once, however often Toss resends it. 404 unless `payments.provider` is
    /// `toss`. E.g.:
    ///
    /// ```json
    /// {"eventType": "PAYMENT_STATUS_CHANGED", "createdAt": "2026-12-05T20:00:07.000000",
    ///  "data": {"paymentKey": "tviva20261205200001AbCd1", "orderId": "sluice-5f0c2a4e…",
    ///   "status": "DONE", "totalAmount": 110000}}
    /// ```
    #[oai(
        path = "/v1/webhooks/toss",
        method = "post",
        operation_id = "receiveTossWebhook"
    )]
    async fn receive_toss(&self, body: WebhookBody) -> Result<ProviderWebhookResponse, ApiError> {
        let ack = service::toss::receive(&self.app, body.bytes()).await?;
        Ok(ProviderWebhookResponse::Ok(Json(ack.into())))
    }

    /// Receive a PortOne webhook
    ///
    /// Register this URL in PortOne's console (결제 연동 → 웹훅, version 2024-04-25) and set
    /// its secret as `payments.portone.webhook_secret`. The Standard Webhooks headers are
    /// verified (every `v1` signature, constant-time, 300 s tolerance); the payment is then
    /// read from PortOne (`GET /payments/{paymentId}`), and its amount and currency must be the
    /// hold's. 404 unless `payments.provider` is `portone`. E.g.:
    ///
    /// ```json
    /// {"type": "Transaction.Paid", "timestamp": "2026-12-05T11:00:07.000Z",
    ///  "data": {"paymentId": "sluice-5f0c2a4e…", "storeId": "store-…", "transactionId": "…"}}
    /// ```
    #[oai(
        path = "/v1/webhooks/portone",
        method = "post",
        operation_id = "receivePortOneWebhook"
    )]
    async fn receive_portone(
        &self,
        #[oai(name = "webhook-id")] id: Header<String>,
        #[oai(name = "webhook-timestamp")] timestamp: Header<String>,
        #[oai(name = "webhook-signature")] signature: Header<String>,
        body: WebhookBody,
    ) -> Result<ProviderWebhookResponse, ApiError> {
        let delivery = Delivery {
            id: &id,
            timestamp: &timestamp,
            signature: &signature,
        };
        let ack = service::portone_webhook::receive(&self.app, &delivery, body.bytes()).await?;
        Ok(ProviderWebhookResponse::Ok(Json(ack.into())))
    }
}

impl From<ProviderAck> for ProviderAckOut {
    fn from(ack: ProviderAck) -> Self {
        ProviderAckOut {
            result: ack.result().to_owned(),
            attempt_state: ack.state().map(Into::into),
        }
    }
}

#[derive(ApiResponse)]
pub enum ProviderWebhookResponse {
    /// Received: `result` says what it did. Every event sluice does not act on is answered
    /// 200 too, so the provider does not send it again.
    #[oai(status = 200)]
    Ok(Json<ProviderAckOut>),
}

/// What a payment provider's word did (a Stripe, Toss Payments or PortOne webhook, a buyer's
/// return from Toss).
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct ProviderAckOut {
    /// `applied` (the attempt moved), `duplicate` (this word was applied before),
    /// `refund_required` (paid after the attempt expired: refunded through the provider when
    /// `payments.refund_late_payments` is on), `recorded` (a failed try or a refund, noted on
    /// the payment), or `ignored` (not about a payment sluice started, or of another kind).
    pub result: String,
    #[oai(skip_serializing_if_is_none)]
    pub attempt_state: Option<AttemptStateName>,
}

impl poem_openapi::types::Example for ProviderAckOut {
    fn example() -> Self {
        ProviderAckOut {
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
