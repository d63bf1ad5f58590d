//! Reapers, on tokio-cron-scheduler: attempts past their admission, hold or payment deadline
//! (by the database's clock) end EXPIRED with their stock restored exactly once; old saved
//! idempotent responses are purged. Two reapers racing (two replicas) never expire one attempt
//! twice: the ledger claims rows with SKIP LOCKED, and the queue store's restore is idempotent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_cron_scheduler::{Job, JobScheduler};

use crate::domain::AttemptEvent;
use crate::service::transition::settle_all;
use crate::service::App;

/// Rows claimed per transaction.
const BATCH: u32 = 200;
/// Batches per run at most, so one run stays short; the next run takes the rest.
const MAX_BATCHES: usize = 20;

pub async fn start(app: App) -> anyhow::Result<JobScheduler> {
    let scheduler = JobScheduler::new().await?;
    let running = Arc::new(AtomicBool::new(false));
    let cron = app.config.workers.reaper_cron.clone();
    let job = Job::new_async(cron.as_str(), move |_id, _scheduler| {
        let (app, running) = (app.clone(), running.clone());
        Box::pin(async move {
            // A slow run is not overlapped by the next one.
            if running.swap(true, Ordering::AcqRel) {
                return;
            }
            reap(&app).await;
            running.store(false, Ordering::Release);
        })
    })?;
    scheduler.add(job).await?;
    scheduler.start().await?;
    Ok(scheduler)
}

/// One pass over every kind of deadline (a span of its own when traces are on).
pub async fn reap(app: &App) {
    let span = crate::telemetry::traces::root(|| tracing::info_span!("reaper.pass"));
    tracing::Instrument::instrument(reap_each(app), span).await
}

async fn reap_each(app: &App) {
    metrics::counter!("sluice_reaper_runs_total").increment(1);
    for event in AttemptEvent::TIMEOUTS {
        if event == AttemptEvent::PaymentTimeout {
            super::payments::settle_due(app).await;
        }
        for _ in 0..MAX_BATCHES {
            match app.ledger.expire_due(event, BATCH).await {
                Ok(expired) => {
                    settle_all(app, &expired).await;
                    metrics::counter!("sluice_reaper_expired_total", "cause" => event.as_str())
                        .increment(expired.len() as u64);
                    if (expired.len() as u32) < BATCH {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(?event, error = %e, "reaper pass failed");
                    break;
                }
            }
        }
    }
    if let Err(e) = app
        .ledger
        .purge_saved_responses(app.config.workers.idempotency_ttl_secs.0)
        .await
    {
        tracing::warn!(error = %e, "idempotency purge failed");
    }
    // A subscription whose turn has not come within a day is of an attempt that is gone.
    if let Err(e) = app.ledger.purge_push_subscriptions(24 * 3600).await {
        tracing::warn!(error = %e, "push subscription purge failed");
    }
}
