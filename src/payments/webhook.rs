//! The body of a payment webhook.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WebhookKind {
    #[serde(rename = "payment.succeeded")]
    Succeeded,
    #[serde(rename = "payment.failed")]
    Failed,
}

/// What the provider posts. `id` is the provider's event id: deliveries are de-duplicated on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentWebhook {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: WebhookKind,
    pub payment_reference: Uuid,
}

impl PaymentWebhook {
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let hook: PaymentWebhook = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        if hook.id.is_empty() || hook.id.len() > 200 {
            return Err("id: 1 to 200 characters".into());
        }
        Ok(hook)
    }
}
