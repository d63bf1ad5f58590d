//! The sender of "it's your turn" (`crate::notify`): the turns the admission loop hands
//! over, each channel's messages made and sent, bounded in rate and in flight.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use crate::domain::AttemptId;
use crate::notify::{self, shop_webhook, web_push, Turn};
use crate::service::App;

/// Messages in flight at once per channel.
const IN_FLIGHT: usize = 16;

type Limiter = governor::DefaultDirectRateLimiter;

/// Sends the turns handed over until the process stops.
pub async fn run(app: App) {
    let Some(mut receiver) = app.turns.take() else {
        return;
    };
    let config = &app.config.notify;
    let per_second = config.max_per_second;
    let limiter = Arc::new(Limiter::direct(governor::Quota::per_second(per_second)));
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(client) => client,
        Err(e) => return tracing::error!(error = %e, "no HTTP client: your-turn messages off"),
    };
    let vapid = app.turns.vapid().cloned();
    let hook = shop_webhook::ShopWebhook::from_config(config).map(Arc::new);
    let mut batch = Vec::with_capacity(100);
    while receiver.recv_many(&mut batch, 100).await > 0 {
        let mut requests = Vec::new();
        if let Some(vapid) = &vapid {
            requests.extend(
                web_push_requests(&app, &client, vapid, &batch)
                    .await
                    .into_iter()
                    .map(|r| ("web_push", r)),
            );
        }
        if let Some(hook) = &hook {
            for turn in &batch {
                match hook.request(&client, turn) {
                    Ok(r) => requests.push(("webhook", with_trace(r, turn))),
                    Err(e) => tracing::warn!(error = %e, "an attempt.admitted webhook not made"),
                }
            }
        }
        batch.clear();
        futures_util::stream::iter(requests)
            .for_each_concurrent(IN_FLIGHT, |(channel, request)| {
                let limiter = Arc::clone(&limiter);
                async move {
                    limiter.until_ready().await;
                    notify::deliver(channel, request).await;
                }
            })
            .await;
    }
}

/// The push messages of a batch's attempts that left a subscription (each taken as it is read).
/// `request` with the trace the turn's admission was made in (W3C Trace Context), so the
/// shop's service or the push service can follow it.
fn with_trace(request: reqwest::RequestBuilder, turn: &Turn) -> reqwest::RequestBuilder {
    match &turn.traceparent {
        Some(traceparent) => request.header("traceparent", traceparent),
        None => request,
    }
}

async fn web_push_requests(
    app: &App,
    client: &reqwest::Client,
    vapid: &web_push::Vapid,
    batch: &[Turn],
) -> Vec<reqwest::RequestBuilder> {
    let ids: Vec<AttemptId> = batch.iter().map(|t| t.attempt).collect();
    let subscriptions = match app.ledger.take_push_subscriptions(&ids).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, count = ids.len(), "push subscriptions not read: no push for these turns");
            return Vec::new();
        }
    };
    let now = chrono::Utc::now().timestamp();
    let mut requests = Vec::with_capacity(subscriptions.len());
    for (attempt, subscription) in subscriptions {
        let Some(turn) = batch.iter().find(|t| t.attempt == attempt) else {
            continue;
        };
        match notify::push_request(client, vapid, &subscription, turn, now) {
            Ok(r) => requests.push(with_trace(r, turn)),
            Err(e) => {
                notify::counted("web_push", "refused");
                tracing::warn!(%attempt, error = %e, "a push message not made");
            }
        }
    }
    requests
}
