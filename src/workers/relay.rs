//! The outbox relay: committed events, oldest first, to the event sink; marked published only
//! after the sink took them. One relay publishes at a time (the ledger's relay lease), so events
//! keep their order however many replicas run; within the relay at most one batch is in flight,
//! and the next one is read from the ledger while it is. A failing sink is retried with backoff
//! (the backlog grows, nothing is lost); an event the sink refuses for good goes to the dead
//! letters after `events.max_tries`, with a metric and a log line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::events::{EventSink, Refused};
use crate::ledger::OutboxEvent;
use crate::service::App;

const MAX_BACKOFF: Duration = Duration::from_secs(5);
const BACKLOG_EVERY: Duration = Duration::from_secs(1);

/// A batch handed to the sink, and the sink's answer to come.
type InFlight = (Vec<OutboxEvent>, JoinHandle<anyhow::Result<()>>);

pub async fn run(app: App, sink: Arc<dyn EventSink>) {
    let poll = Duration::from_millis(app.config.events.poll_ms);
    let mut backoff = poll;
    let mut lease = None;
    let mut in_flight: Option<InFlight> = None;
    let mut measured = Instant::now() - BACKLOG_EVERY;
    loop {
        // The backlog is counted once a second, not per batch: counting is the costly part.
        if measured.elapsed() >= BACKLOG_EVERY {
            measured = Instant::now();
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
        // Read the next batch while the previous one is being published.
        let after = in_flight
            .as_ref()
            .and_then(|(batch, _)| batch.last())
            .map(|e| e.id);
        let next = app
            .ledger
            .pending_events(app.config.events.batch, after)
            .await;
        if let Some((batch, answer)) = in_flight.take() {
            let answer = answer
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("publishing task: {e}")));
            match settle(&app, &batch, answer).await {
                Ok(true) => backoff = poll,
                // Not all of it went out: read again from the oldest pending row.
                Ok(false) => continue,
                Err(e) => {
                    metrics::counter!("sluice_event_publish_errors_total").increment(1);
                    tracing::warn!(error = %e, retry_in = ?backoff, "relaying events failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        }
        match next {
            Ok(batch) if !batch.is_empty() => {
                let sink = sink.clone();
                let to_send = batch.clone();
                in_flight = Some((
                    batch,
                    tokio::spawn(async move { sink.publish(&to_send).await }),
                ));
            }
            Ok(_) => tokio::time::sleep(poll).await,
            Err(e) => {
                tracing::warn!(error = %e, "reading the outbox failed");
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Records the sink's answer for `batch`: marks what went out published, counts a refusal.
/// `Ok(true)` when the whole batch went out.
async fn settle(
    app: &App,
    batch: &[OutboxEvent],
    answer: anyhow::Result<()>,
) -> anyhow::Result<bool> {
    let published = match answer {
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
    Ok(published == batch.len())
}
