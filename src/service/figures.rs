//! A sale's figures over recent time, from data sluice keeps (no Prometheus needed): each
//! replica samples every open or paused sale once an interval (`workers.figures_ms`) into the
//! ledger, where the first sample of an interval stands, and operators read them back as a
//! series; admissions a minute come from two samples' difference.

use chrono::{DateTime, Duration, DurationRound, Utc};

use super::{App, ServiceError, ServiceResult};
use crate::domain::valve::ControllerState;
use crate::domain::{SaleId, SaleStatus};
use crate::ledger::SaleFigures;

/// How long samples are kept.
pub const KEPT: Duration = Duration::hours(24);

/// The most of the past a series reaches back.
pub const MAX_MINUTES: u32 = 24 * 60;

/// Samples every open or paused sale at the interval `now` falls in; how many it sampled.
pub async fn sample(app: &App, now: DateTime<Utc>, interval: Duration) -> ServiceResult<usize> {
    let at = now
        .duration_trunc(interval)
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    let mut sales = Vec::new();
    for status in [SaleStatus::Open, SaleStatus::Paused] {
        sales.extend(app.ledger.list_sales(Some(status), None, 1000).await?);
    }
    for sale in &sales {
        let figures = figures_of(app, sale.id, at).await?;
        app.ledger.record_figures(&figures).await?;
    }
    app.ledger.prune_figures(now - KEPT).await?;
    Ok(sales.len())
}

async fn figures_of(app: &App, id: SaleId, at: DateTime<Utc>) -> ServiceResult<SaleFigures> {
    let settings = app
        .ledger
        .sale_settings(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let stats = app.ledger.stats(id).await?;
    let queue = app.queue.stats(id).await?;
    let controller: Option<ControllerState> = app
        .queue
        .controller(id)
        .await?
        .and_then(|json| serde_json::from_str(&json).ok());
    let expired: u64 = stats.expired.iter().map(|(_, n)| n).sum();
    Ok(SaleFigures {
        sale: id,
        at,
        waiting: queue.waiting,
        active: queue.active,
        admitted_total: stats.admitted + stats.holding + stats.paying + stats.confirmed + expired,
        holding_units: stats.units_held,
        paying_units: stats.units_paying,
        sold_units: stats.units_sold,
        remaining: u64::from(stats.remaining),
        rate_per_minute: controller
            .as_ref()
            .map(|c| c.rate)
            .unwrap_or(f64::from(settings.admission.rate_per_minute)),
        decision: controller.map(|c| c.last.reason().to_owned()),
    })
}

/// One point of a series: a sample, and the admissions a minute since the one before.
pub struct Point {
    pub figures: SaleFigures,
    pub admitted_per_minute: Option<f64>,
}

/// The sale's samples over the last `minutes`, oldest first.
pub async fn series(app: &App, id: SaleId, minutes: u32) -> ServiceResult<Vec<Point>> {
    app.ledger
        .sale_settings(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let since = Utc::now() - Duration::minutes(i64::from(minutes.min(MAX_MINUTES)));
    let samples = app.ledger.figures(id, since).await?;
    let mut points: Vec<Point> = Vec::with_capacity(samples.len());
    for figures in samples {
        let admitted_per_minute = points.last().map(|p| {
            let secs = (figures.at - p.figures.at).num_milliseconds() as f64 / 1000.0;
            let admitted = figures
                .admitted_total
                .saturating_sub(p.figures.admitted_total);
            if secs > 0.0 {
                admitted as f64 * 60.0 / secs
            } else {
                0.0
            }
        });
        points.push(Point {
            figures,
            admitted_per_minute,
        });
    }
    Ok(points)
}
