//! The shop's `attempt.admitted` webhook (`notify.webhook_url`): a JSON POST signed as sluice's
//! own webhooks are, `Sluice-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with
//! `notify.webhook_secret`. Its `id` is the attempt's and the same on every try, so the shop
//! keeps one message per attempt however often it is delivered.

use serde::Serialize;

use super::Turn;
use crate::config::NotifyConfig;
use crate::payments::signature::WebhookSigner;

pub struct ShopWebhook {
    url: reqwest::Url,
    signer: WebhookSigner,
}

/// The message, as `docs/integrating.md` documents it.
#[derive(Serialize)]
struct Message {
    id: String,
    r#type: &'static str,
    created_at: String,
    data: Data,
}

#[derive(Serialize)]
struct Data {
    attempt_id: String,
    sale_id: String,
    user_id: String,
    admission_expires_at: String,
}

impl ShopWebhook {
    pub fn from_config(config: &NotifyConfig) -> Option<ShopWebhook> {
        let url = reqwest::Url::parse(config.webhook_url.as_deref()?).ok()?;
        Some(ShopWebhook {
            url,
            // The tolerance is the receiver's business: sluice only signs.
            signer: WebhookSigner::new(config.webhook_secret.expose(), 0),
        })
    }

    pub fn request(
        &self,
        client: &reqwest::Client,
        turn: &Turn,
    ) -> anyhow::Result<reqwest::RequestBuilder> {
        let until = chrono::DateTime::from_timestamp_millis(turn.until_ms).unwrap_or_default();
        let now = chrono::Utc::now();
        let message = Message {
            id: format!("{}.admitted", turn.attempt),
            r#type: "attempt.admitted",
            created_at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            data: Data {
                attempt_id: turn.attempt.to_string(),
                sale_id: turn.attempt.sale.to_string(),
                user_id: turn.user.as_str().to_owned(),
                admission_expires_at: until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            },
        };
        let body = serde_json::to_vec(&message)?;
        let signature = self.signer.sign(now.timestamp(), &body);
        Ok(client
            .post(self.url.clone())
            .header("Content-Type", "application/json")
            .header("Sluice-Signature", signature)
            .header("Sluice-Event-Id", message.id)
            .body(body))
    }
}
