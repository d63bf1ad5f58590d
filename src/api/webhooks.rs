//! The payment provider's webhook.

use poem_openapi::param::{Header, Path};
use poem_openapi::payload::{Binary, Json};
use poem_openapi::{ApiRequest, ApiResponse, Enum, Object, OpenApi};

use super::attempts::types::AttemptStateName;
use super::problem::ApiError;
use super::ApiTags;
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
    /// With its charset named, as some providers send it.
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

    /// Receive a payment provider's webhook
    ///
    /// Where the provider of `payments.provider` posts its webhooks, in its own format and
    /// signed its own way: register `https://<sluice>/v1/webhooks/<provider>` with it
    /// (`docs/integrating.md` says where, for which events, and which secret to set). The
    /// provider's module verifies the request (its signature headers over the raw body, 300 s
    /// tolerance; or, for a provider that does not sign, a lookup at its API that the request
    /// is never trusted without), then sluice applies what the provider says of the payment:
    /// its amount and currency must be the hold's, and each word is applied once however
    /// often it is sent. 404 unless `provider` is the deployment's. The body is the
    /// provider's own, e.g. a PaymentIntent's success:
    ///
    /// ```json
    /// {"id": "evt_1QxY2b", "type": "payment_intent.succeeded",
    ///  "data": {"object": {"id": "pi_3QxY2a", "object": "payment_intent", "amount": 110000,
    ///   "currency": "krw", "status": "succeeded",
    ///   "metadata": {"attempt_id": "0193a0c4…", "payment_reference": "5f0c2a4e-…"}}}}
    /// ```
    #[oai(
        path = "/v1/webhooks/:provider",
        method = "post",
        operation_id = "receiveProviderWebhook"
    )]
    async fn receive_provider(
        &self,
        /// The provider's name, as `payments.provider` gives it.
        provider: Path<String>,
        request: &poem::Request,
        body: WebhookBody,
    ) -> Result<ProviderWebhookResponse, ApiError> {
        let ack = service::provider_webhook::receive(
            &self.app,
            &provider,
            request.headers(),
            body.bytes(),
        )
        .await?;
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

/// What a payment provider's word did (its webhook, or a buyer's return from its window).
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
