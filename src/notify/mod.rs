//! "It's your turn": telling an admitted user who left the tab. The replica that admits hands
//! each newly admitted attempt to [`Turns`]; a worker sends, per attempt, at most one Web Push
//! message (to the subscription the page left, [`web_push`]) and one webhook to the shop
//! ([`shop_webhook`]: `attempt.admitted`, for its own app push, SMS or KakaoTalk message).
//!
//! Each channel is idempotent per attempt: an attempt is handed over once, when the ledger
//! first records its admission (an admission recorded again after a failover is not news); a
//! subscription is taken (deleted) as it is read; the push carries a `Topic` and the webhook an
//! id, both the attempt's, so a push service or a shop that gets one twice keeps one. Each is
//! bounded in rate (`notify.max_per_second`), and the hand-over queue is bounded: past it,
//! messages are dropped and counted (`sluice_turn_notifications_total{outcome="dropped"}`),
//! never waited for — admission does not slow down for its messages. `workers/turns.rs` sends.

pub mod shop_webhook;
pub mod web_push;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::NotifyConfig;
use crate::domain::{AttemptId, UserId};

/// An attempt whose turn came.
#[derive(Debug, Clone)]
pub struct Turn {
    pub attempt: AttemptId,
    pub user: UserId,
    /// When its admission ends, in Unix ms: how long the user has to come back.
    pub until_ms: i64,
    /// The trace the admission was made in (W3C `traceparent`), sent with each message.
    pub traceparent: Option<String>,
}

/// Turns waiting to be told, in at most this many (then dropped).
const QUEUE: usize = 10_000;

/// Tries of one message in all (a push service or a shop that is down, or says 429 or 5xx),
/// the waits between them doubling from [`FIRST_BACKOFF`].
const TRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The hand-over from the admission loop to the sending worker (`workers/turns.rs`).
pub struct Turns {
    sender: Option<mpsc::Sender<Turn>>,
    receiver: Mutex<Option<mpsc::Receiver<Turn>>>,
    /// The server's VAPID keys, when Web Push is on.
    vapid: Option<Arc<web_push::Vapid>>,
}

impl Turns {
    /// A hand-over when a channel is configured; otherwise one that takes nothing. The VAPID
    /// keys must be one pair.
    pub fn new(config: &NotifyConfig) -> anyhow::Result<Turns> {
        let vapid = if config.vapid_private_key.is_empty() {
            None
        } else {
            let vapid = web_push::Vapid::new(
                config.vapid_private_key.expose(),
                &config.vapid_public_key,
                &config.vapid_subject,
            )
            .map_err(|e| anyhow::anyhow!("notify.vapid_private_key: {e}"))?;
            Some(Arc::new(vapid))
        };
        let (sender, receiver) = if config.any_channel() {
            let (sender, receiver) = mpsc::channel(QUEUE);
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        Ok(Turns {
            sender,
            receiver: Mutex::new(receiver),
            vapid,
        })
    }

    pub fn vapid(&self) -> Option<&Arc<web_push::Vapid>> {
        self.vapid.as_ref()
    }

    /// Hands over newly admitted attempts; never waits.
    pub fn admitted(&self, turns: impl IntoIterator<Item = Turn>) {
        let Some(sender) = &self.sender else { return };
        for turn in turns {
            if sender.try_send(turn).is_err() {
                counted("queue", "dropped");
            }
        }
    }

    /// The receiving end, once (the worker's).
    pub fn take(&self) -> Option<mpsc::Receiver<Turn>> {
        self.receiver.lock().expect("not poisoned").take()
    }
}

pub fn counted(channel: &'static str, outcome: &'static str) {
    metrics::counter!("sluice_turn_notifications_total", "channel" => channel, "outcome" => outcome)
        .increment(1);
}

/// What one try of a message came to.
enum Sent {
    Ok,
    /// Not worth trying again: a 4xx other than 429.
    Refused(u16),
    /// Worth another try: no answer, 429 or 5xx.
    Later(String),
}

async fn send(request: &reqwest::RequestBuilder) -> Sent {
    let Some(request) = request.try_clone() else {
        return Sent::Refused(0);
    };
    match request.send().await {
        Ok(r) if r.status().is_success() => Sent::Ok,
        Ok(r) if r.status().is_client_error() && r.status().as_u16() != 429 => {
            Sent::Refused(r.status().as_u16())
        }
        Ok(r) => Sent::Later(format!("HTTP {}", r.status())),
        Err(e) => Sent::Later(e.without_url().to_string()),
    }
}

/// Sends `request`, trying again after an outage (`TRIES` in all); counted by channel and
/// outcome: `sent`, `gone` (a push service's 404 or 410: the subscription ended), `refused`,
/// `failed`.
pub async fn deliver(channel: &'static str, request: reqwest::RequestBuilder) {
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=TRIES {
        match send(&request).await {
            Sent::Ok => return counted(channel, "sent"),
            Sent::Refused(404 | 410) if channel == "web_push" => return counted(channel, "gone"),
            Sent::Refused(status) => {
                tracing::warn!(channel, status, "a your-turn message was refused");
                return counted(channel, "refused");
            }
            Sent::Later(e) if attempt == TRIES => {
                tracing::warn!(channel, error = %e, "a your-turn message could not be sent");
                return counted(channel, "failed");
            }
            Sent::Later(_) => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
    }
}

/// What a push message carries: the service worker (`/waiting-room/sw.js`) words it in the
/// page's language.
#[derive(serde::Serialize)]
struct PushPayload<'a> {
    r#type: &'static str,
    attempt: String,
    sale: String,
    /// When the admission ends (RFC 3339).
    until: String,
    /// The waiting page of the sale, from the origin of the service worker.
    url: String,
    lang: &'a str,
}

pub fn push_request(
    client: &reqwest::Client,
    vapid: &web_push::Vapid,
    subscription: &web_push::Subscription,
    turn: &Turn,
    now_secs: i64,
) -> anyhow::Result<reqwest::RequestBuilder> {
    let endpoint = reqwest::Url::parse(&subscription.endpoint)?;
    let until = chrono::DateTime::from_timestamp_millis(turn.until_ms).unwrap_or_default();
    let payload = PushPayload {
        r#type: "attempt.admitted",
        attempt: turn.attempt.to_string(),
        sale: turn.attempt.sale.to_string(),
        until: until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        url: format!("/?sale={}", turn.attempt.sale),
        lang: &subscription.lang,
    };
    let body = subscription.encrypt(&serde_json::to_vec(&payload)?)?;
    // Kept by the push service until the admission ends, no longer: a late message is no use.
    let ttl = ((turn.until_ms / 1000) - now_secs).max(0);
    // A Topic is at most 32 base64url characters: the attempt's own UUID, as hex.
    let topic = turn.attempt.local.simple().to_string();
    Ok(client
        .post(endpoint.clone())
        .header("TTL", ttl.to_string())
        .header("Urgency", "high")
        .header("Topic", topic)
        .header("Content-Encoding", "aes128gcm")
        .header("Content-Type", "application/octet-stream")
        .header("Authorization", vapid.authorization(&endpoint, now_secs)?)
        .body(body))
}
