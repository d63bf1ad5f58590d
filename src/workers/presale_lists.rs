//! Keeps this replica's copies of presale lists (`service::member_lists`) and the offers of
//! their sales up to date, off the join path: every second, for each sale not closed that has
//! a list phase, the sale's offer is read again once it is a second old, and each list phase
//! in effect or still to come is read whole when its count has moved. A join in the presale
//! then finds both here and asks the ledger nothing. Lists of phases that are over, or of
//! sales that closed, are let go.

use std::collections::HashSet;
use std::time::Duration;

use crate::domain::phase::{self, Audience};
use crate::domain::SaleId;
use crate::service::member_lists::ListKey;
use crate::service::App;
use crate::telemetry::warn_throttled;

/// How often the lists and offers are looked at: as often as an offer goes stale.
const EVERY: Duration = Duration::from_secs(1);

/// Keeps the copies up to date until the process stops.
pub async fn run(app: App) {
    let mut interval = tokio::time::interval(EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if let Err(e) = keep_up(&app).await {
            warn_throttled!(error = %e, "presale lists not kept up to date");
        }
    }
}

/// One look at every sale with a list phase.
async fn keep_up(app: &App) -> anyhow::Result<()> {
    let sales = app.ledger.sales_with_lists().await?;
    let mut live = HashSet::new();
    for sale in sales {
        match lists_of(app, sale, &mut live).await {
            Ok(()) => {}
            // A sale deleted meanwhile has nothing to keep.
            Err(crate::service::ServiceError::NotFound(_)) => {}
            Err(e) => {
                // Its copies stay as they are until the next look.
                live.extend(app.member_lists.kept_of(sale));
                warn_throttled!(%sale, error = %e, "a presale list not kept up to date");
            }
        }
    }
    app.member_lists.keep_only(&live);
    Ok(())
}

/// Keeps the sale's offer fresh and reads its live lists that moved; adds them to `live`.
async fn lists_of(
    app: &App,
    sale: SaleId,
    live: &mut HashSet<ListKey>,
) -> crate::service::ServiceResult<()> {
    let offer = crate::service::offer::offer(app, sale).await?;
    let from = phase::in_effect(&offer.phases, chrono::Utc::now()).unwrap_or(0);
    for (position, p) in offer.phases.iter().enumerate().skip(from) {
        if p.audience != Audience::List {
            continue;
        }
        let key = (sale, position as u32);
        live.insert(key);
        let ledger: &dyn crate::ledger::PhaseLedger = &*app.ledger;
        app.member_lists.keep_up(ledger, key, p.members).await?;
    }
    Ok(())
}
