//! The outbox relay: committed events, oldest first, to the event sink; marked published only
//! after the sink took them. One relay publishes at a time (the ledger's relay lease), so events
//! keep their order however many replicas run. A failing sink is retried with backoff (the
//! backlog grows, nothing is lost); an event the sink refuses for good goes to the dead letters
//! after `events.max_tries`, with a metric and a log line.

use std::sync::Arc;
use std::time::Duration;

use crate::events::{EventSink, Refused};
use crate::service::App;

const MAX_BACKOFF: Duration = Duration::from_secs(5);
const BACKLOG_EVERY: Duration = Duration::from_secs(1);

pub async fn run(app: App, sink: Arc<dyn EventSink>) {
    let poll = Duration::from_millis(app.config.events.poll_ms);
    let mut backoff = poll;
    let mut lease = None;
    let mut measured = std::time::Instant::now() - BACKLOG_EVERY;
    loop {
        // The backlog is counted once a second, not per batch: counting is the costly part.
        if measured.elapsed() >= BACKLOG_EVERY {
            measured = std::time::Instant::now();
            if let Ok((pending, oldest)) = app.ledger.outbox_backlog().await {
                metrics::gauge!("sluice_outbox_pending").set(pending as f64);
                metrics::gauge!("sluice_outbox_oldest_age_seconds").set(oldest);
            }
        }
        let held = match &mut lease {
            Some(l) => l,
            None => match app.ledger.relay_lease().await {
                Ok(Some(l)) => lease.insert(l),
                Ok(None) | Err(_) => {
                    // Another relay publishes (or the ledger is down): stand by.
                    tokio::time::sleep(poll * 5).await;
                    continue;
                }
            },
        };
        if !held.alive().await {
            lease = None;
            continue;
        }
        match relay_once(&app, sink.as_ref()).await {
            Ok(0) => {
                backoff = poll;
                tokio::time::sleep(poll).await;
            }
            Ok(_) => backoff = poll,
            Err(e) => {
                metrics::counter!("sluice_event_publish_errors_total").increment(1);
                tracing::warn!(error = %e, retry_in = ?backoff, "relaying events failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Relays one batch; returns how many events went out.
pub async fn relay_once(app: &App, sink: &dyn EventSink) -> anyhow::Result<usize> {
    let batch = app.ledger.pending_events(app.config.events.batch).await?;
    if batch.is_empty() {
        return Ok(0);
    }
    let published = match sink.publish(&batch).await {
        Ok(()) => batch.len(),
        Err(e) => match e.downcast::<Refused>() {
            Ok(refused) => {
                let dead = app
                    .ledger
                    .record_refusal(refused.id, app.config.events.max_tries)
                    .await?;
                if dead {
                    metrics::counter!("sluice_outbox_dead_letters_total").increment(1);
                    tracing::error!(event = %refused.id, reason = %refused.reason, "event dead-lettered: the sink refuses it");
                }
                refused.published
            }
            Err(other) => return Err(other),
        },
    };
    let ids: Vec<_> = batch[..published].iter().map(|e| e.id).collect();
    if !ids.is_empty() {
        app.ledger.mark_published(&ids).await?;
    }
    metrics::counter!("sluice_events_published_total").increment(published as u64);
    Ok(published.max(1))
}
