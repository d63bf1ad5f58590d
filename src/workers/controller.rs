//! The rate each admission tick uses. Manual sales: the admin's `rate_per_minute`. Adaptive
//! sales: a [`Valve`] on the sale's admitter, moved once per round of signals
//! ([`crate::signals`]) and published to the queue store after each move, so any replica can
//! show it and the replica that takes the lease over carries on from the same rate.

use crate::config::ValveConfig;
use crate::domain::valve::{Change, ControllerState, Valve, ValveSettings};
use crate::domain::{AdmissionMode, SaleId};
use crate::ledger::AdmissionPlan;
use crate::service::App;
use crate::signals::Round;

const REASONS: [&str; 5] = ["increase", "decrease", "hold", "stale", "manual"];

/// The valve's law for a sale with these bounds.
pub fn settings(config: &ValveConfig, min: u32, max: u32) -> ValveSettings {
    ValveSettings {
        min: min as f64,
        max: max as f64,
        step: (max as f64 * config.increase_fraction).max(1.0),
        backoff: config.backoff,
        hold_band: config.hold_band,
    }
}

/// The rate (users per minute) the admitter of `plan` uses this tick. `valve` is the sale's
/// controller between ticks; `fresh` a round of signals not yet applied.
pub async fn rate(
    app: &App,
    plan: &AdmissionPlan,
    valve: &mut Option<Valve>,
    fresh: Option<&Round>,
) -> f64 {
    let sale = plan.sale;
    let label = sale.to_string();
    let (min, max) = match plan.admission.mode {
        AdmissionMode::Manual => {
            *valve = None;
            let rate = plan.admission.rate_per_minute as f64;
            export(&label, rate, "manual", false);
            return rate;
        }
        AdmissionMode::Adaptive { min, max } => (min, max),
    };
    let wanted = settings(&app.config.valve, min, max);
    let valve = match valve {
        Some(v) => v,
        None => valve.insert(Valve::new(wanted, starting_rate(app, plan).await)),
    };
    if valve.settings != wanted {
        // The admin moved the bounds: keep the rate, within the new ones.
        *valve = Valve::new(wanted, valve.rate);
    }
    if let Some(round) = fresh {
        let change = valve.tick(&round.readings);
        if matches!(change, Change::Decrease { .. }) {
            tracing::info!(%sale, rate = valve.rate, ?change, "admission rate backed off");
        }
        publish(app, sale, valve, round).await;
    }
    export(&label, valve.rate, valve.last.reason(), true);
    valve.rate
}

/// Where a new controller starts: from the rate the sale's previous admitter published (a
/// lease taken over), else from the sale's `rate_per_minute`.
async fn starting_rate(app: &App, plan: &AdmissionPlan) -> f64 {
    let published = app
        .queue
        .controller(plan.sale)
        .await
        .ok()
        .flatten()
        .and_then(|json| serde_json::from_str::<ControllerState>(&json).ok());
    published.map_or(plan.admission.rate_per_minute as f64, |c| c.rate)
}

async fn publish(app: &App, sale: SaleId, valve: &Valve, round: &Round) {
    let state = ControllerState {
        rate: valve.rate,
        last: valve.last.clone(),
        readings: round.readings.clone(),
        updated_at_ms: chrono::Utc::now().timestamp_millis(),
    };
    // Outlives a few missed rounds, and vanishes once no admitter renews it.
    let ttl_ms = 3 * app.config.valve.tick_ms.0 + app.config.workers.lease_ttl_ms.0;
    let json = serde_json::to_string(&state).expect("plain data serialises");
    if let Err(e) = app.queue.put_controller(sale, &json, ttl_ms).await {
        tracing::debug!(%sale, error = %e, "controller state not published");
    }
}

fn export(sale: &str, rate: f64, reason: &str, adaptive: bool) {
    metrics::gauge!("sluice_admission_target_rate_per_minute", "sale" => sale.to_owned()).set(rate);
    metrics::gauge!("sluice_admission_adaptive", "sale" => sale.to_owned()).set(if adaptive {
        1.0
    } else {
        0.0
    });
    for r in REASONS {
        metrics::gauge!("sluice_admission_last_change", "sale" => sale.to_owned(), "reason" => r)
            .set(if r == reason { 1.0 } else { 0.0 });
    }
}
