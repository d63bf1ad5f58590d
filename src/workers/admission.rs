//! The admission loop: every tick, for each sale that is open now, the holder of the sale's
//! lease moves the head of the queue to the active set at the sale's rate (set by hand, or by
//! the adaptive controller: [`super::controller`]), never beyond max_active, and records the
//! admissions in the ledger. If the ledger cannot record them, they go back to their places in
//! the queue. A batch stays marked unrecorded in the queue store until the ledger has it, so
//! when an admitter dies between the two, the next lease holder records that batch first:
//! nobody is admitted twice or skipped across a failover.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::watch;

use super::controller;
use crate::domain::valve::Valve;
use crate::domain::{AttemptEvent, AttemptState, SaleId, SaleStatus};
use crate::ledger::AdmissionPlan;
use crate::queue::{AdmitOutcome, Admitted, LotteryDraw};
use crate::service::App;
use crate::signals::Round;
use crate::telemetry::warn_throttled;

/// Per-sale memory of the loop between ticks.
#[derive(Default)]
struct SaleTicker {
    /// Fractional admissions owed (rate × elapsed), so low rates still admit on time.
    credit: f64,
    /// Exponentially weighted admissions per minute while people wait: the ETA's rate.
    measured_rate: f64,
    /// The adaptive controller, while this process admits for an adaptive sale.
    valve: Option<Valve>,
    /// When this process began a lottery's draw that is still under way (for its log line).
    drawing_since: Option<std::time::Instant>,
    /// When the store's free units were last compared with the ledger's
    /// (`drift::take_back_excess`).
    excess_checked: Option<std::time::Instant>,
}

/// How often the sale's admitter compares the store's free units with the ledger's (at most
/// once a tick).
const EXCESS_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Most waiting attempts dropped for inactivity per sale and tick (bounds one script's work).
const ABANDON_PER_TICK: u32 = 1000;

/// Most attempts one admit_batch call moves (one script call, one ledger transaction).
const MAX_BATCH: u32 = 1000;

/// At most this many ticks' worth of credit is kept, so a pause does not end in a burst.
const MAX_CREDIT_TICKS: f64 = 2.0;

/// Most batches an instant sale's admitter claims in a tick: its line drains as fast as the
/// ledger records claims, a batch at a time, and the other sales' ticks still come.
const INSTANT_BATCHES_PER_TICK: u32 = 10;

/// Admits every tick until the process drains; then, its tick done, gives up the leases of
/// the sales it admitted for, so another replica admits for them at its next tick.
pub async fn run(app: App, mut rounds: watch::Receiver<Round>) {
    let tick = app.config.workers.admission_tick_ms.duration();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tickers: HashMap<SaleId, SaleTicker> = HashMap::new();
    let mut drain = app.drain.subscribe();
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = crate::service::drain::started(&mut drain) => break,
        }
        let plans = match app.ledger.admitting_sales().await {
            Ok(plans) => plans,
            Err(e) => {
                tracing::warn!(error = %e, "admission: cannot list open sales");
                continue;
            }
        };
        tickers.retain(|sale, _| {
            let open = plans.iter().any(|p| p.sale == *sale);
            if !open {
                metrics::gauge!("sluice_admission_open", "sale" => sale.to_string()).set(0.0);
            }
            open
        });
        // A round of signals the controllers have not seen yet.
        let fresh = match rounds.has_changed() {
            Ok(true) => Some(rounds.borrow_and_update().clone()),
            Ok(false) | Err(_) => None,
        };
        for plan in plans {
            let ticker = tickers.entry(plan.sale).or_default();
            let span = crate::telemetry::traces::root(
                || tracing::info_span!("admission.tick", sale = %plan.sale),
            );
            let admitted = admit(&app, &plan, ticker, tick, fresh.as_ref());
            if let Err(e) = tracing::Instrument::instrument(admitted, span).await {
                // Every sale's tick fails alike while a store is away: one line a second.
                warn_throttled!(sale = %plan.sale, error = %e, "admission tick failed");
            }
        }
    }
    for sale in tickers.keys() {
        match app.queue.release_lease(*sale, &app.instance_id).await {
            Ok(true) => tracing::info!(%sale, "admission lease given up"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(%sale, error = %e, "giving up the admission lease failed: it runs out by itself")
            }
        }
    }
}

async fn admit(
    app: &App,
    plan: &AdmissionPlan,
    ticker: &mut SaleTicker,
    tick: Duration,
    fresh: Option<&Round>,
) -> anyhow::Result<()> {
    let sale = plan.sale;
    let sale_label = sale.to_string();
    metrics::gauge!("sluice_admission_open", "sale" => sale_label.clone()).set(1.0);
    metrics::gauge!("sluice_admission_max_active", "sale" => sale_label.clone())
        .set(plan.admission.max_active as f64);
    let stats = app.queue.stats(sale).await?;
    metrics::gauge!("sluice_queue_waiting", "sale" => sale_label.clone()).set(stats.waiting as f64);
    metrics::gauge!("sluice_active_users", "sale" => sale_label.clone()).set(stats.active as f64);
    metrics::gauge!("sluice_stock_remaining", "sale" => sale_label.clone())
        .set(stats.remaining as f64);

    let ttl_ms = app.config.workers.lease_ttl_ms.0;
    let Some(lease) = app.queue.lease(sale, &app.instance_id, ttl_ms).await? else {
        return Ok(()); // another replica admits for this sale
    };
    // A phase whose time came begins (its rate applies from the next tick on), or a lottery
    // phase's pre-queue opens (fenced until the phase starts, then drawn).
    let offer = crate::service::offer::offer(app, sale).await?;
    let phases = if offer.phases.is_empty() {
        crate::service::phases::Steps::default()
    } else {
        crate::service::phases::follow(app, sale, &offer.phases).await?
    };
    if plan.closes_at.is_some_and(|t| t <= chrono::Utc::now()) && stats.waiting == 0 {
        // Past its closing time nobody joins; once nobody waits either, the sale is over:
        // closed as an admin would close it (its event, the offer's status), and it leaves the
        // admission loop.
        crate::service::sales::set_status(app, sale, SaleStatus::Closed, None).await?;
        tracing::info!(%sale, "sale closed: past its closing time and nobody waiting");
        return Ok(());
    }
    // The sale's lottery at its opening (from the first serial), then a lottery phase's at
    // its start (from its pre-queue's); each made once. Nobody is admitted while one is made.
    let opening = plan.opening.seed().map(|seed| (seed, 0));
    let phase = phases
        .draw
        .as_ref()
        .map(|(seed, from)| (seed.as_str(), *from));
    for (seed, from) in opening.into_iter().chain(phase) {
        if !drawn(app, sale, ticker, seed, from, tick).await? {
            return Ok(());
        }
    }
    if !app.config.workers.abandon_after_secs.is_off() {
        let abandoned = app.queue.abandon(sale, ABANDON_PER_TICK).await?;
        if abandoned > 0 {
            metrics::counter!("sluice_abandoned_total", "sale" => sale_label.clone())
                .increment(abandoned);
            // And among the transitions by cause, with the waiting users who left or were
            // closed out.
            crate::service::transition::waiting_ended(AttemptEvent::Abandon, abandoned);
        }
    }
    if ticker
        .excess_checked
        .is_none_or(|at| at.elapsed() >= EXCESS_CHECK_EVERY)
    {
        ticker.excess_checked = Some(std::time::Instant::now());
        if let Err(e) = super::drift::take_back_excess(app, sale).await {
            warn_throttled!(%sale, error = %e, "the stock check of a sale failed");
        }
    }
    if plan.instant {
        let recorded = crate::service::claim::record_stale(app, sale).await?;
        if recorded > 0 {
            tracing::warn!(%sale, recorded, "recorded claims their replica left unrecorded");
        }
    }
    let rate = controller::rate(app, plan, &mut ticker.valve, fresh).await;
    metrics::gauge!("sluice_admission_rate_per_minute", "sale" => sale_label.clone())
        .set(ticker.measured_rate);
    let per_tick = rate * tick.as_secs_f64() / 60.0;
    ticker.credit = (ticker.credit + per_tick).min(per_tick * MAX_CREDIT_TICKS + 1.0);
    if plan.instant {
        // Claims from the line go as fast as the ledger records them (the store bounds the
        // claims in flight by max_active and by the units left).
        ticker.credit = f64::from(MAX_BATCH * INSTANT_BATCHES_PER_TICK);
    }
    let wanted = ticker.credit.floor() as u32;
    if wanted == 0 {
        return Ok(());
    }
    let admission_ttl_ms = plan.admission_ttl_secs as u64 * 1000;
    // In batches of at most MAX_BATCH, each recorded before the next is taken: a fast sale's
    // tick (16,667 at 1,000,000 a minute) stays many small script calls and transactions.
    let mut admitted = 0u32;
    while admitted < wanted {
        let want = (wanted - admitted).min(MAX_BATCH);
        let outcome = app
            .queue
            .admit_batch_below(
                sale,
                &lease,
                want,
                admission_ttl_ms,
                ticker.measured_rate,
                phases.below,
            )
            .await?;
        let batch = match outcome {
            AdmitOutcome::Admitted(batch) => batch,
            AdmitOutcome::Unrecorded(batch) => {
                tracing::warn!(%sale, count = batch.len(), fence = lease.fence, "recording an admission batch an earlier admitter left unrecorded");
                return record(app, plan, &batch).await;
            }
            AdmitOutcome::LeaseLost => return Ok(()),
        };
        let got = batch.len() as u32;
        record(app, plan, &batch).await?;
        admitted += got;
        ticker.credit -= got as f64;
        if got < want {
            break;
        }
    }
    if admitted < wanted {
        // Queue empty or cap reached: owe nothing beyond this tick.
        ticker.credit = ticker.credit.min(1.0);
    }
    if stats.waiting > 0 {
        let observed = admitted as f64 * 60.0 / tick.as_secs_f64();
        ticker.measured_rate = if ticker.measured_rate == 0.0 {
            observed
        } else {
            0.8 * ticker.measured_rate + 0.2 * observed
        };
    }
    Ok(())
}

/// An instant sale's batch from the line: its claims recorded in the ledger (each the
/// store gave a unit), the store told which the ledger has (the rest give their unit back),
/// then the batch no longer kept as unrecorded. If the ledger fails, the batch goes back to
/// its places in the queue, units and all.
async fn record_claims(
    app: &App,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> anyhow::Result<()> {
    let sale = plan.sale;
    let Some(first) = admitted.first() else {
        return Ok(());
    };
    let asks: Vec<crate::ledger::ClaimAsk> = admitted
        .iter()
        .map(|a| crate::ledger::ClaimAsk {
            attempt: a.attempt,
            user: a.user.clone(),
            seq: a.seq,
        })
        .collect();
    let claimed = match crate::service::claim::settle_batch(app, sale, &asks).await {
        Ok(claimed) => claimed,
        Err(e) => {
            tracing::warn!(%sale, error = %e, count = admitted.len(), "claims not recorded; putting them back in the queue");
            app.queue.unadmit(sale, admitted).await?;
            return Err(e);
        }
    };
    app.queue.admissions_recorded(sale, first.attempt).await?;
    for a in admitted {
        app.lines.nudges.nudge(a.attempt);
    }
    metrics::counter!("sluice_admitted_total", "sale" => sale.to_string())
        .increment(claimed as u64);
    Ok(())
}

/// Makes (or finds made) the lottery draw of the line from serial `from`: whether it is made.
/// A tick's time at most, so that the other sales' admission goes on while a large draw is
/// made.
async fn drawn(
    app: &App,
    sale: SaleId,
    ticker: &mut SaleTicker,
    seed: &str,
    from: u64,
    tick: Duration,
) -> anyhow::Result<bool> {
    let since = *ticker
        .drawing_since
        .get_or_insert_with(std::time::Instant::now);
    match app.queue.draw_lottery_from(sale, seed, from, tick).await? {
        LotteryDraw::UnderWay => return Ok(false),
        LotteryDraw::Drawn(n) => {
            let took_ms = since.elapsed().as_millis() as u64;
            tracing::info!(%sale, ordered = n, from, took_ms, "lottery drawn");
        }
        LotteryDraw::DrawnBefore => {}
    }
    ticker.drawing_since = None;
    Ok(true)
}

/// An attempt the store admitted that the ledger had admitted before: a failover lost the
/// store's first admission, so the attempt was still in line there. One the ledger has ended
/// leaves the active set at once (its slot would otherwise stay taken until long past its new
/// deadline; units of a hold the store still counts come back, as the ledger has them).
async fn forget_readmitted(app: &App, attempt: crate::domain::AttemptId) -> anyhow::Result<()> {
    let Some(record) = app.ledger.attempt(attempt).await? else {
        return Ok(());
    };
    match record.state {
        AttemptState::Expired { .. } => {
            app.queue.restore(attempt, None).await?;
            tracing::warn!(%attempt, "an attempt admitted again after a failover lost its admission, ended in the ledger, leaves the active set");
        }
        // Live: the slot is its own. Confirmed: its units stay sold; the slot frees at its
        // deadline, with the entries whose reaper the store lost.
        AttemptState::Queued
        | AttemptState::Admitted
        | AttemptState::Hold
        | AttemptState::PaymentPending
        | AttemptState::Confirmed => {}
    }
    Ok(())
}

/// Writes a batch the queue store admitted into the ledger (idempotent: a batch recorded before
/// is not recorded twice), then tells the store it no longer needs keeping. If the ledger
/// refuses, the batch goes back to its places in the queue.
async fn record(app: &App, plan: &AdmissionPlan, admitted: &[Admitted]) -> anyhow::Result<()> {
    let sale = plan.sale;
    let Some(first) = admitted.first() else {
        return Ok(());
    };
    if plan.instant {
        return record_claims(app, plan, admitted).await;
    }
    let before = match app.ledger.record_admissions(plan, admitted).await {
        Ok(before) => before,
        Err(e) => {
            tracing::warn!(%sale, error = %e, count = admitted.len(), "admissions not recorded; putting them back in the queue");
            app.queue.unadmit(sale, admitted).await?;
            return Err(e.into());
        }
    };
    app.queue.admissions_recorded(sale, first.attempt).await?;
    // The turn came for those the ledger had not admitted before: tell them once.
    let traceparent = crate::telemetry::traces::traceparent();
    app.turns.admitted(
        admitted
            .iter()
            .filter(|a| !before.contains(&a.attempt))
            .map(|a| crate::notify::Turn {
                attempt: a.attempt,
                user: a.user.clone(),
                until_ms: a.deadline_ms,
                traceparent: traceparent.clone(),
            }),
    );
    for attempt in before {
        forget_readmitted(app, attempt).await?;
    }
    metrics::counter!("sluice_admitted_total", "sale" => sale.to_string())
        .increment(admitted.len() as u64);
    crate::service::transition::admitted(admitted.len() as u64);
    Ok(())
}
