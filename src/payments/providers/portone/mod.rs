//! PortOne's V2 API (<https://developers.portone.io/api/rest-v2>): the calls sluice makes (read
//! a payment, cancel it) and the payment they answer. The API secret travels only in the
//! `Authorization: PortOne <secret>` header and is never in an error. Webhooks are Standard
//! Webhooks-signed ([`crate::payments::standard_webhooks`]) and name the payment only: sluice reads it.

pub mod connector;
mod pay;
mod settings;
mod webhook;

pub use pay::PortOnePay;
pub use settings::PortOneSettings;

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::payments::calls::{call, exchange, http_client, ProviderError, Repeat};
use crate::payments::standard_webhooks::{Delivery, StandardWebhooks};
use crate::payments::SignatureError;

/// A payment as sluice reads it (`GET /payments/{paymentId}`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Payment {
    /// The merchant's payment id (sluice's, from the attempt's payment).
    pub id: String,
    /// READY | PENDING | VIRTUAL_ACCOUNT_ISSUED | PAID | FAILED | PARTIAL_CANCELLED |
    /// CANCELLED.
    pub status: String,
    #[serde(default)]
    pub amount: Option<Amount>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub failure: Option<Failure>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Amount {
    pub total: u64,
}

/// Why a payment failed, as PortOne says it (the PG's code kept).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub pg_code: Option<String>,
    #[serde(default)]
    pub pg_message: Option<String>,
}

impl Failure {
    pub fn describe(&self) -> String {
        let message = self
            .reason
            .clone()
            .or_else(|| self.pg_message.clone())
            .unwrap_or_else(|| "the payment failed".into());
        match &self.pg_code {
            Some(code) => format!("{code}: {message}"),
            None => message,
        }
    }
}

/// A cancellation's answer: `{"cancellation": {...}}`.
#[derive(Debug, Clone, Deserialize)]
struct Cancelled {
    cancellation: Cancellation,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Cancellation {
    pub id: String,
    /// REQUESTED | SUCCEEDED | FAILED.
    pub status: String,
}

/// PortOne's error object: `{"type": "PAYMENT_NOT_FOUND", "message": "…"}`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

/// PortOne's payment ids, as one path segment: sluice's own are `sluice-<32 hex>`.
pub fn is_payment_id(id: &str) -> bool {
    crate::payments::is_url_safe_id(id, 1..=200)
}

/// The PortOne API with one store's secret.
#[derive(Clone)]
pub struct PortOne {
    http: reqwest::Client,
    config: PortOneSettings,
    timeout: Duration,
    /// Verifies the webhooks with the store's webhook secret.
    webhooks: StandardWebhooks,
}

impl PortOne {
    /// The API with `config`'s secrets; webhooks further than `tolerance_secs` from now are
    /// refused.
    pub fn new(
        config: PortOneSettings,
        timeout: Duration,
        tolerance_secs: u64,
    ) -> anyhow::Result<Self> {
        let http = http_client(timeout)?;
        let webhooks = StandardWebhooks::new(config.webhook_secret.expose(), tolerance_secs)
            .ok_or_else(|| anyhow::anyhow!("payments.portone.webhook_secret is not a secret"))?;
        Ok(PortOne {
            http,
            config,
            timeout,
            webhooks,
        })
    }

    /// Checks a webhook's Standard Webhooks headers over its raw body at `now` (Unix seconds).
    pub fn verify(&self, delivery: &Delivery, body: &[u8], now: i64) -> Result<(), SignatureError> {
        self.webhooks.verify(delivery, body, now)
    }

    pub fn config(&self) -> &PortOneSettings {
        &self.config
    }

    /// One request ([`exchange`]); a refusal says `TYPE: message`.
    async fn send<T: for<'de> Deserialize<'de>>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T, ProviderError> {
        let url = format!("{}{}", self.config.api_base.trim_end_matches('/'), path);
        let mut request = self
            .http
            .request(method, url)
            .header(
                reqwest::header::AUTHORIZATION,
                format!("PortOne {}", self.config.api_secret.expose()),
            )
            .query(&[("storeId", &self.config.store_id)]);
        if let Some(body) = body {
            request = request.json(body);
        }
        exchange(request, |body| {
            serde_json::from_slice::<ErrorBody>(body)
                .ok()
                .and_then(|b| match (b.kind, b.message) {
                    (Some(k), Some(m)) => Some(format!("{k}: {m}")),
                    (k, m) => k.or(m),
                })
        })
        .await
    }

    /// `GET /payments/{paymentId}`: `None` when PortOne has no such payment (the buyer never
    /// opened its window).
    pub async fn payment(&self, id: &str) -> Result<Option<Payment>, ProviderError> {
        if !is_payment_id(id) {
            return Err(ProviderError::Refused(format!(
                "not a PortOne payment id: {id:?}"
            )));
        }
        let path = format!("/payments/{id}");
        let found = call("portone", "payment", self.timeout, Repeat::Safe, || {
            self.send(reqwest::Method::GET, &path, None)
        })
        .await;
        match found {
            Ok(payment) => Ok(Some(payment)),
            Err(ProviderError::Refused(detail)) if detail.starts_with("PAYMENT_NOT_FOUND") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Cancels (refunds) `amount` of a paid payment (`POST /payments/{paymentId}/cancel`). Sent
    /// once: a cancel whose answer was lost is found by the next read.
    pub async fn cancel(
        &self,
        id: &str,
        amount: u64,
        reason: &str,
    ) -> Result<Cancellation, ProviderError> {
        if !is_payment_id(id) {
            return Err(ProviderError::Refused(format!(
                "not a PortOne payment id: {id:?}"
            )));
        }
        let path = format!("/payments/{id}/cancel");
        let body = json!({ "amount": amount, "reason": reason });
        let answer: Cancelled = call("portone", "cancel", self.timeout, Repeat::Never, || {
            self.send(reqwest::Method::POST, &path, Some(&body))
        })
        .await?;
        Ok(answer.cancellation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paid_payment_reads_its_total_and_a_failure_keeps_the_pg_code() {
        let paid: Payment = serde_json::from_str(
            r#"{"status": "PAID", "id": "sluice-0193", "transactionId": "tx", "storeId": "store-1",
                "amount": {"total": 110000, "taxFree": 0, "paid": 110000}, "currency": "KRW"}"#,
        )
        .unwrap();
        assert_eq!(paid.amount.unwrap().total, 110000);
        let failed: Payment = serde_json::from_str(
            r#"{"status": "FAILED", "id": "sluice-0193",
                "failure": {"reason": "카드 한도 초과", "pgCode": "C51"}}"#,
        )
        .unwrap();
        assert_eq!(failed.failure.unwrap().describe(), "C51: 카드 한도 초과");
    }
}
