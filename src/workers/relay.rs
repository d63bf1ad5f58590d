//! The outbox relay: committed events, oldest first, to the event sink; marked published only
//! after the sink took them. A failing sink is retried with backoff (the backlog grows, nothing
//! is lost); the backlog's size and age are metrics.

use std::sync::Arc;
use std::time::Duration;

use crate::events::EventSink;
use crate::service::App;

const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub async fn run(app: App, sink: Arc<dyn EventSink>) {
    let poll = Duration::from_millis(app.config.events.poll_ms);
    let mut backoff = poll;
    loop {
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
    if let Ok((pending, oldest)) = app.ledger.outbox_backlog().await {
        metrics::gauge!("sluice_outbox_pending").set(pending as f64);
        metrics::gauge!("sluice_outbox_oldest_age_seconds").set(oldest);
    }
    let batch = app.ledger.pending_events(app.config.events.batch).await?;
    if batch.is_empty() {
        return Ok(0);
    }
    sink.publish(&batch).await?;
    let ids: Vec<_> = batch.iter().map(|e| e.id).collect();
    app.ledger.mark_published(&ids).await?;
    metrics::counter!("sluice_events_published_total").increment(batch.len() as u64);
    Ok(batch.len())
}
