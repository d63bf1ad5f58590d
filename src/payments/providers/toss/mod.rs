//! Toss Payments' core API (<https://docs.tosspayments.com/reference>): the calls sluice makes
//! and the payment they answer. The secret key is the Basic user (`<secret_key>:`); it travels
//! only in the `Authorization` header and is never in an error. Writes carry an
//! `Idempotency-Key`, so a retried confirm or cancel is one at Toss.
//!
//! Toss does not sign its webhooks: sluice acts on one only after looking the payment up.

pub mod connector;
mod pay;
mod settings;
mod webhook;

pub use pay::TossPay;
pub use settings::TossSettings;

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use crate::payments::calls::{call, exchange, http_client, ProviderError, Repeat};

/// A Payment object as sluice reads it
/// (<https://docs.tosspayments.com/reference#payment-객체>).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Payment {
    pub payment_key: String,
    pub order_id: String,
    /// READY | IN_PROGRESS | WAITING_FOR_DEPOSIT | DONE | CANCELED | PARTIAL_CANCELED |
    /// ABORTED | EXPIRED.
    pub status: String,
    pub total_amount: u64,
    #[serde(default)]
    pub currency: Option<String>,
    /// A virtual account's deposit callback carries it; it must match (`DEPOSIT_CALLBACK`).
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub failure: Option<Failure>,
    /// The last transaction (a confirm, a cancel): a refund's id.
    #[serde(default)]
    pub last_transaction_key: Option<String>,
}

/// Why a payment failed, as Toss says it: its code and its (Korean) message.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Failure {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

impl Failure {
    /// The code first (kept in the trail), then Toss's message.
    pub fn describe(&self) -> String {
        match (&self.code, &self.message) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            (Some(c), None) => c.clone(),
            (None, Some(m)) => m.clone(),
            (None, None) => "the payment failed".into(),
        }
    }
}

/// Toss's order ids: 6-64 characters of `[A-Za-z0-9_-]`.
pub fn is_order_id(id: &str) -> bool {
    crate::payments::is_url_safe_id(id, 6..=64)
}

/// Toss's payment keys, as one path segment: at most 200 characters of `[A-Za-z0-9_-]`.
pub fn is_payment_key(key: &str) -> bool {
    crate::payments::is_url_safe_id(key, 1..=200)
}

/// The Toss API with one shop's keys.
#[derive(Clone)]
pub struct Toss {
    http: reqwest::Client,
    config: TossSettings,
    /// `Basic base64("<secret_key>:")`.
    authorization: String,
    timeout: Duration,
    /// `http.public_url`: the base of the URLs Toss sends buyers back to.
    public_url: String,
}

impl Toss {
    pub fn new(config: TossSettings, timeout: Duration, public_url: &str) -> anyhow::Result<Self> {
        let http = http_client(timeout)?;
        let authorization = format!(
            "Basic {}",
            STANDARD.encode(format!("{}:", config.secret_key.expose()))
        );
        Ok(Toss {
            http,
            config,
            authorization,
            timeout,
            public_url: public_url.trim_end_matches('/').to_owned(),
        })
    }

    /// sluice's route Toss sends a buyer back to (`success` or `fail`).
    pub fn return_url(&self, outcome: &str) -> String {
        format!("{}/v1/payments/toss/{outcome}", self.public_url)
    }

    pub fn client_key(&self) -> &str {
        &self.config.client_key
    }

    pub fn js_url(&self) -> &str {
        &self.config.js_url
    }

    /// One request ([`exchange`]); a refusal says `code: message`.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Payment, ProviderError> {
        let url = format!("{}{}", self.config.api_base.trim_end_matches('/'), path);
        let mut request = self
            .http
            .request(method, url)
            .header(reqwest::header::AUTHORIZATION, &self.authorization);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        // The error object: {"code": "…", "message": "…"}.
        exchange(request, |body| {
            serde_json::from_slice::<Failure>(body)
                .ok()
                .filter(|f| f.code.is_some() || f.message.is_some())
                .map(|f| f.describe())
        })
        .await
    }

    /// Confirms (approves) the payment the buyer authorized in Toss's window
    /// (`POST /v1/payments/confirm`); `key` makes a retry one confirm.
    pub async fn confirm(
        &self,
        payment_key: &str,
        order_id: &str,
        amount: u64,
        key: &str,
    ) -> Result<Payment, ProviderError> {
        let body = json!({ "paymentKey": payment_key, "orderId": order_id, "amount": amount });
        let key = format!("sluice-confirm-{key}");
        call("toss", "confirm", self.timeout, Repeat::Safe, || {
            self.send(
                reqwest::Method::POST,
                "/v1/payments/confirm",
                Some(&body),
                Some(&key),
            )
        })
        .await
    }

    /// `GET /v1/payments/{paymentKey}`.
    pub async fn payment(&self, payment_key: &str) -> Result<Payment, ProviderError> {
        if !is_payment_key(payment_key) {
            return Err(ProviderError::Refused(format!(
                "not a Toss payment key: {payment_key:?}"
            )));
        }
        let path = format!("/v1/payments/{payment_key}");
        call("toss", "payment", self.timeout, Repeat::Safe, || {
            self.send(reqwest::Method::GET, &path, None, None)
        })
        .await
    }

    /// `GET /v1/payments/orders/{orderId}`: `None` when Toss has no payment of the order (the
    /// buyer never reached Toss's window, or Toss forgot an unconfirmed one).
    pub async fn payment_of_order(&self, order_id: &str) -> Result<Option<Payment>, ProviderError> {
        if !is_order_id(order_id) {
            return Err(ProviderError::Refused(format!(
                "not a Toss order id: {order_id:?}"
            )));
        }
        let path = format!("/v1/payments/orders/{order_id}");
        let found = call(
            "toss",
            "payment_of_order",
            self.timeout,
            Repeat::Safe,
            || self.send(reqwest::Method::GET, &path, None, None),
        )
        .await;
        match found {
            Ok(payment) => Ok(Some(payment)),
            Err(ProviderError::Refused(detail)) if detail.starts_with("NOT_FOUND") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Cancels `amount` of a payment (all of it when `None`): a refund of a paid one, the end
    /// of a virtual account still waiting for its deposit. `key` makes a retry one cancel.
    pub async fn cancel(
        &self,
        payment_key: &str,
        reason: &str,
        amount: Option<u64>,
        key: &str,
    ) -> Result<Payment, ProviderError> {
        if !is_payment_key(payment_key) {
            return Err(ProviderError::Refused(format!(
                "not a Toss payment key: {payment_key:?}"
            )));
        }
        let path = format!("/v1/payments/{payment_key}/cancel");
        let mut body = json!({ "cancelReason": reason });
        if let Some(amount) = amount {
            body["cancelAmount"] = amount.into();
        }
        let key = format!("sluice-cancel-{key}");
        call("toss", "cancel", self.timeout, Repeat::Safe, || {
            self.send(reqwest::Method::POST, &path, Some(&body), Some(&key))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_and_payment_keys_are_what_toss_takes() {
        assert!(is_order_id("sluice-0193a0c4e1b27c3d9f0a1b2c3d4e5f62"));
        assert!(!is_order_id("short"));
        assert!(!is_order_id(&"a".repeat(65)));
        assert!(!is_order_id("order/../x"));
        assert!(is_payment_key(
            "5zJ4xY7m0kODnyRpQWGrN2xqGlNvLrKwv1M9ENjbeoPaZdL6"
        ));
        assert!(!is_payment_key("a b"));
        assert!(!is_payment_key(""));
    }

    #[test]
    fn a_failure_keeps_the_code_in_front_of_the_message() {
        let f: Failure =
            serde_json::from_str(r#"{"code": "REJECT_CARD_PAYMENT", "message": "한도초과"}"#)
                .unwrap();
        assert_eq!(f.describe(), "REJECT_CARD_PAYMENT: 한도초과");
    }
}
