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
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A batch handed to the sink, and the sink's answer to come.
type InFlight = (Vec<OutboxEvent>, JoinHandle<anyhow::Result<()>>);

/// The backlog gauges, once a second, apart from the relay: a relay stuck on a dead broker
/// must not freeze the very figures (and the valve's signals) that show it is stuck.
pub async fn watch_backlog(app: App) {
    let mut interval = tokio::time::interval(CHECK_EVERY);
    loop {
        interval.tick().await;
        if let Ok((pending, oldest)) = app.ledger.outbox_backlog().await {
            metrics::gauge!("sluice_outbox_pending").set(pending as f64);
            metrics::gauge!("sluice_outbox_oldest_age_seconds").set(oldest);
        }
    }
}

/// Relays until the process drains; then returns once the batch in flight (if any) is
/// published and marked so, never between the sink taking a batch and the ledger learning it
/// did (which would send those events again after a restart).
pub async fn run(app: App, sink: Arc<dyn EventSink>) {
    let poll = app.config.events.poll_ms.duration();
    let mut backoff = poll;
    let mut lease: Option<Box<dyn crate::ledger::RelayLease>> = None;
    let mut in_flight: Option<InFlight> = None;
    let mut checked = Instant::now() - CHECK_EVERY;
    let mut drain = app.drain.subscribe();
    // Waits `wait`, or less if the drain starts meanwhile.
    let pause = |wait: Duration, drain: &mut tokio::sync::watch::Receiver<bool>| {
        let mut drain = drain.clone();
        async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = crate::service::drain::started(&mut drain) => {}
            }
        }
    };
    loop {
        if *drain.borrow_and_update() {
            if let Some((batch, answer)) = in_flight.take() {
                let answer = answer
                    .await
                    .unwrap_or_else(|e| Err(anyhow::anyhow!("publishing task: {e}")));
                if let Err(e) = settle(&app, &batch, answer).await {
                    tracing::warn!(error = %e, "draining: the last batch was not marked published; it is sent again later");
                }
            }
            return;
        }
        // Once a second: whether the lease still holds.
        if checked.elapsed() >= CHECK_EVERY {
            checked = Instant::now();
            if let Some(held) = &mut lease {
                if !held.alive().await {
                    lease = None;
                }
            }
        }
        if lease.is_none() {
            match app.ledger.relay_lease().await {
                Ok(Some(l)) => lease = Some(l),
                Ok(None) | Err(_) => {
                    // Another relay publishes (or the ledger is down): stand by.
                    pause(poll * 5, &mut drain).await;
                    continue;
                }
            }
        }
        // Read the next batch while the previous one is being published.
        let after = in_flight
            .as_ref()
            .and_then(|(batch, _)| batch.last())
            .map(|e| e.id);
        let next = app
            .ledger
            .pending_events(app.config.events.batch.get(), after)
            .await;
        let mut done = None;
        if let Some((batch, answer)) = in_flight.take() {
            let answer = answer
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("publishing task: {e}")));
            if answer.is_ok() {
                // The whole batch is out: send the next one, then mark this one published.
                done = Some(batch);
            } else {
                match settle(&app, &batch, answer).await {
                    // Part of it went out: read again from the oldest pending row.
                    Ok(_) => continue,
                    Err(e) => {
                        metrics::counter!("sluice_event_publish_errors_total").increment(1);
                        tracing::warn!(error = %e, retry_in = ?backoff, "relaying events failed");
                        pause(backoff, &mut drain).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
        }
        let idle = match next {
            Ok(batch) if !batch.is_empty() => {
                let sink = sink.clone();
                let to_send = batch.clone();
                let span = crate::telemetry::traces::root(|| {
                    tracing::info_span!("relay.send", events = to_send.len())
                });
                let send = async move { sink.publish(&to_send).await };
                in_flight = Some((
                    batch,
                    tokio::spawn(tracing::Instrument::instrument(send, span)),
                ));
                false
            }
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "reading the outbox failed");
                true
            }
        };
        if let Some(batch) = done {
            // A failure here only re-sends the batch later (consumers de-duplicate).
            if let Err(e) = settle(&app, &batch, Ok(())).await {
                tracing::warn!(error = %e, "marking events published failed");
            }
            backoff = poll;
        }
        if idle {
            pause(poll, &mut drain).await;
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
