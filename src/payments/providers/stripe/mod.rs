//! Stripe over PaymentIntents: the API calls sluice makes (create, retrieve, cancel a
//! PaymentIntent; refund it) and the events it reads from Stripe's webhooks. Requests are
//! form-encoded with the secret key as the bearer, as Stripe's API reference describes them
//! (<https://docs.stripe.com/api/payment_intents>); writes carry an `Idempotency-Key`, so a
//! retried write is one write at Stripe. `Stripe-Signature` is the `t=…,v1=…` scheme of
//! [`crate::payments::signature`], with the endpoint's `whsec_…` secret.

pub mod connector;
mod pay;
mod settings;
mod webhook;

pub use pay::StripePay;
pub use settings::StripeSettings;

use std::time::Duration;

use serde::Deserialize;

use crate::payments::calls::{call, exchange, http_client, ProviderError, Repeat};
use crate::payments::signature::{SignatureError, WebhookSigner};

/// A PaymentIntent as sluice reads it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Intent {
    pub id: String,
    pub amount: u64,
    pub currency: String,
    /// requires_payment_method | requires_confirmation | requires_action | processing |
    /// requires_capture | canceled | succeeded.
    pub status: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub metadata: std::collections::HashMap<String, String>,
    #[serde(default)]
    pub last_payment_error: Option<PaymentError>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PaymentError {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

impl PaymentError {
    /// What the buyer is told: Stripe's message, or its code.
    pub fn describe(&self) -> String {
        self.message
            .clone()
            .or_else(|| self.code.clone())
            .unwrap_or_else(|| "the payment failed".into())
    }
}

/// A refund as sluice reads it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Refund {
    pub id: String,
    /// pending | succeeded | failed | canceled | requires_action.
    pub status: String,
}

/// An event of a webhook: its id, type and object.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: EventData,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    pub object: serde_json::Value,
}

/// The Stripe API with one account's keys.
#[derive(Clone)]
pub struct Stripe {
    http: reqwest::Client,
    config: StripeSettings,
    timeout: Duration,
    /// Verifies `Stripe-Signature` with the endpoint's secret.
    signer: WebhookSigner,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<String>,
}

impl Stripe {
    /// The API with `config`'s keys; webhooks further than `tolerance_secs` from now are
    /// refused.
    pub fn new(
        config: StripeSettings,
        timeout: Duration,
        tolerance_secs: u64,
    ) -> anyhow::Result<Self> {
        let http = http_client(timeout)?;
        let signer = WebhookSigner::new(config.webhook_secret.expose(), tolerance_secs);
        Ok(Stripe {
            http,
            config,
            timeout,
            signer,
        })
    }

    /// Checks a webhook's `Stripe-Signature` over its raw body at `now` (Unix seconds).
    pub fn verify(&self, header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
        self.signer.verify(header, body, now)
    }

    pub fn publishable_key(&self) -> &str {
        &self.config.publishable_key
    }

    pub fn js_url(&self) -> &str {
        &self.config.js_url
    }

    /// One request ([`exchange`]); a refusal says Stripe's message.
    async fn send<T: for<'de> Deserialize<'de>>(
        &self,
        method: reqwest::Method,
        path: &str,
        form: &[(String, String)],
        idempotency_key: Option<&str>,
    ) -> Result<T, ProviderError> {
        let url = format!("{}{}", self.config.api_base.trim_end_matches('/'), path);
        let mut request = self
            .http
            .request(method, url)
            .bearer_auth(self.config.secret_key.expose());
        if !form.is_empty() {
            request = request.form(form);
        }
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        exchange(request, |body| {
            serde_json::from_slice::<ErrorBody>(body)
                .ok()
                .and_then(|b| b.error.message.or(b.error.code))
        })
        .await
    }

    /// Creates the PaymentIntent of an attempt's payment (`key`: one per payment, so a retry
    /// finds the same intent).
    pub async fn create_intent(
        &self,
        amount: u64,
        currency: &str,
        metadata: &[(&str, String)],
        key: &str,
    ) -> Result<Intent, ProviderError> {
        // The payment methods are the account's (Stripe's default since API 2023-08-16).
        let mut form = vec![
            ("amount".to_owned(), amount.to_string()),
            ("currency".to_owned(), currency.to_ascii_lowercase()),
        ];
        for (k, v) in metadata {
            form.push((format!("metadata[{k}]"), v.clone()));
        }
        let key = format!("sluice-intent-{key}");
        call(
            "stripe",
            "create_intent",
            self.timeout,
            Repeat::Safe,
            || {
                self.send(
                    reqwest::Method::POST,
                    "/v1/payment_intents",
                    &form,
                    Some(&key),
                )
            },
        )
        .await
    }

    pub async fn retrieve_intent(&self, id: &str) -> Result<Intent, ProviderError> {
        let path = format!("/v1/payment_intents/{}", path_segment(id)?);
        call(
            "stripe",
            "retrieve_intent",
            self.timeout,
            Repeat::Safe,
            || self.send(reqwest::Method::GET, &path, &[], None),
        )
        .await
    }

    /// Cancels an intent that is not paid; an intent that is already canceled is the answer.
    pub async fn cancel_intent(&self, id: &str) -> Result<Intent, ProviderError> {
        let path = format!("/v1/payment_intents/{}/cancel", path_segment(id)?);
        let key = format!("sluice-cancel-{id}");
        call(
            "stripe",
            "cancel_intent",
            self.timeout,
            Repeat::Safe,
            || self.send(reqwest::Method::POST, &path, &[], Some(&key)),
        )
        .await
    }

    /// Refunds `amount` of a paid intent (`key`: one per refund).
    pub async fn refund(
        &self,
        intent: &str,
        amount: u64,
        key: &str,
    ) -> Result<Refund, ProviderError> {
        let form = vec![
            ("payment_intent".to_owned(), intent.to_owned()),
            ("amount".to_owned(), amount.to_string()),
        ];
        let key = format!("sluice-refund-{key}");
        call("stripe", "refund", self.timeout, Repeat::Safe, || {
            self.send(reqwest::Method::POST, "/v1/refunds", &form, Some(&key))
        })
        .await
    }
}

/// An id as one path segment: Stripe's ids are `[A-Za-z0-9_]`.
fn path_segment(id: &str) -> Result<&str, ProviderError> {
    if !id.is_empty()
        && id.len() <= 255
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        Ok(id)
    } else {
        Err(ProviderError::Refused(format!("not a Stripe id: {id:?}")))
    }
}
