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
    /// The body as JSON, with an event id the ledger can store.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let hook: PaymentWebhook = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        // A control character (NUL above all: PostgreSQL's text refuses it) is no event id.
        if hook.id.is_empty() || hook.id.len() > 200 || hook.id.chars().any(char::is_control) {
            return Err("id: 1 to 200 characters, no control characters".into());
        }
        Ok(hook)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "id": id, "type": "payment.failed",
            "payment_reference": "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f62"
        }))
        .unwrap()
    }

    #[test]
    fn an_event_id_is_printable_text() {
        assert_eq!(PaymentWebhook::parse(&body("evt_1")).unwrap().id, "evt_1");
        assert_eq!(PaymentWebhook::parse(&body("évt-ü")).unwrap().id, "évt-ü");
        for id in ["", "a\u{0}b", "\u{0}", "line\nbreak", &"x".repeat(201)] {
            assert!(PaymentWebhook::parse(&body(id)).is_err(), "{id:?}");
        }
    }
}
