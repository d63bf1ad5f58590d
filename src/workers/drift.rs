//! The drift checker: each open sale's holdings in the queue store (free units or seats, the
//! active set, the holds, the units per user) are compared with the ledger's snapshot on a
//! schedule, and rebuilt from it when they disagree, as when Redis lost writes in a failover
//! or a compensation after a refused hold never reached it. Admission is never paused.
//!
//! A hold in flight makes the two disagree for a moment (the store takes first, the ledger
//! commits after), so a difference is repaired only once it has stood still: the store's
//! version (it counts every change to its holdings) and the ledger's snapshot the same at
//! `STANDING` checks in a row and for twice the ledger's acquire timeout (longer than a
//! hold of another replica can be between the two), with no queue-sync change waiting and
//! no hold of this process in flight; and the repair is a compare-and-set on that version
//! (any change since makes it a no-op).
//! The holdings are read whole (the active set, every hold, the units per user, a page a
//! call) only when the store's version, read cheaply first, has not moved since the last
//! check: a store that moved in the meantime holds no difference that stands, so a busy
//! sale's checks cost its shard almost nothing. Each whole read is counted
//! (`sluice_queue_drift_reads_total{sale}`).
//! Each repair is counted (`sluice_queue_drift_repaired_total{sale}`) and logged with the
//! differences found.
//!
//! Each check also reads the version of each sale's settings that the store holds (every sale
//! not closed, then the closed ones, the newest first): one that is not the ledger's at two
//! checks in a row (the store lost a change and nothing recorded it as lost, the ledger was
//! restored from a backup to before the store's, or the store was restored from a snapshot
//! taken before a close; a change in flight is one check's) has the ledger's settings written
//! over it (`service::sales::follow_in_queue`, which also lets go of a closed sale's waiting
//! users; `sluice_queue_settings_repaired_total`). A sale the store does not hold is left
//! alone: it is rebuilt at its first join or status.
//!
//! Which mechanism repairs which failure, with its metric and alert: `docs/architecture.md`,
//! "Keeping the stores in line".
//!
//! One difference needs no stillness: a quantity sale's store with more units free than the
//! ledger (a failover lost the store's side of holds the ledger committed: the store would
//! sell units the ledger refuses). The sale's admitter looks every second
//! ([`take_back_excess`]), however busy the sale is, and takes the excess off at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::domain::SaleId;
use crate::domain::SaleSnapshot;
use crate::service::App;
use crate::telemetry::warn_throttled;

/// Sales whose settings one check compares, at most: every open one (a deployment keeps few
/// open) and the latest closed ones, one small read each.
const SETTINGS_CHECKED: u32 = 1000;

/// Checks in a row that must find the same store version and ledger snapshot, disagreeing.
const STANDING: u32 = 2;

/// A difference found: the store's version, the ledger's snapshot, when it was first found
/// so, and by how many checks in a row.
struct Standing {
    version: u64,
    snapshot: SaleSnapshot,
    since: Instant,
    checks: u32,
}

type Seen = HashMap<SaleId, Standing>;

/// The store's version of each sale at the last check.
type Versions = HashMap<SaleId, u64>;

/// The sales whose settings the store held in another version than the ledger at the last
/// check: the store's version and the ledger's.
type SettingsApart = HashMap<SaleId, (u64, u64)>;

pub async fn run(app: App, every: Duration) {
    let mut drain = app.drain.subscribe();
    let mut seen = Seen::new();
    let mut versions = Versions::new();
    let mut apart = SettingsApart::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = crate::service::drain::started(&mut drain) => return,
        }
        if let Err(e) = check_settings(&app, &mut apart).await {
            tracing::debug!(error = %e, "settings check skipped");
        }
        if let Err(e) = check(&app, &mut seen, &mut versions).await {
            tracing::debug!(error = %e, "drift check skipped");
        }
    }
}

async fn check(app: &App, seen: &mut Seen, versions: &mut Versions) -> anyhow::Result<()> {
    let (pending, _) = app.ledger.sync_backlog().await?;
    if pending > 0 {
        seen.clear(); // the queue-sync worker has changes to apply first
        return Ok(());
    }
    let min_standing = app.config.ledger.acquire_timeout_ms.duration() * 2;
    let plans = app.ledger.admitting_sales().await?;
    seen.retain(|sale, _| plans.iter().any(|p| p.sale == *sale));
    versions.retain(|sale, _| plans.iter().any(|p| p.sale == *sale));
    for plan in plans {
        let sale = plan.sale;
        // One sale's failure (a call to either store, a record that does not read) is that
        // sale's: the sales after it are still checked.
        if let Err(e) = check_sale(app, sale, seen, versions, min_standing).await {
            seen.remove(&sale);
            // Every sale's check fails alike while a store is away: one line a second.
            warn_throttled!(%sale, error = %e, "drift check of a sale failed");
        }
    }
    Ok(())
}

/// Units a quantity sale's store has free that the ledger does not, taken off the store's
/// count; how many. One look (the ledger read before and after the store) tells whether the
/// store has units the ledger does not: a hold takes its units in the store first and a unit
/// given back comes back in the ledger first, so no such change in flight puts the store's
/// count above both readings, and a look never finds more than the store really has over.
/// Changes in flight can hide some: when a look finds any, two windows of looks are taken,
/// a quarter of a second apart, and the most either found in both comes off. An operator's
/// withdrawal (the ledger first, then the store, a moment apart) could show in one look: it
/// is gone by the second window.
pub async fn take_back_excess(app: &App, sale: SaleId) -> anyhow::Result<u32> {
    if excess(app, sale).await? == 0 {
        return Ok(0);
    }
    let mut windows = [0u32; 2];
    for found in &mut windows {
        tokio::time::sleep(EXCESS_WINDOW).await;
        for _ in 0..EXCESS_LOOKS {
            *found = (*found).max(excess(app, sale).await?);
        }
    }
    let take = windows[0].min(windows[1]);
    if take == 0 {
        return Ok(0);
    }
    app.queue
        .adjust_stock(sale, &crate::domain::StockChange::Withdraw(take))
        .await?;
    metrics::counter!("sluice_queue_excess_units_taken_total", "sale" => sale.to_string())
        .increment(u64::from(take));
    tracing::warn!(%sale, excess = take, "the queue store had units free that the ledger took: taken off");
    Ok(take)
}

/// Looks a window of [`take_back_excess`] takes, and the time between its windows.
const EXCESS_LOOKS: usize = 5;
const EXCESS_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// One look: the store's free units above the ledger's readings before and after it.
async fn excess(app: &App, sale: SaleId) -> anyhow::Result<u32> {
    let Some(before) = app.ledger.free_units(sale).await? else {
        return Ok(0);
    };
    let store = app.queue.stats(sale).await?;
    let Some(after) = app.ledger.free_units(sale).await? else {
        return Ok(0);
    };
    if !store.known {
        return Ok(0);
    }
    Ok(store.remaining.saturating_sub(u64::from(before.max(after))) as u32)
}

/// Compares the version of each sale's settings the store holds with the ledger's
/// ([`crate::ledger::QueueSyncLedger::sales_settings_to_check`]), and writes the ledger's settings of
/// those found apart the same way at the last check too.
async fn check_settings(app: &App, apart: &mut SettingsApart) -> anyhow::Result<()> {
    let mut now = SettingsApart::new();
    for (sale, ledger) in app.ledger.sales_settings_to_check(SETTINGS_CHECKED).await? {
        // A sale the store does not hold is rebuilt at its first join or status.
        let held = match app.queue.settings_version(sale).await {
            Ok(Some(held)) if held != ledger => held,
            Ok(_) => continue,
            Err(e) => {
                warn_throttled!(%sale, error = %e, "settings check of a sale failed");
                continue;
            }
        };
        if apart.get(&sale) != Some(&(held, ledger)) {
            now.insert(sale, (held, ledger));
            continue;
        }
        match crate::service::sales::follow_in_queue(app, sale).await {
            Ok(()) => {
                metrics::counter!("sluice_queue_settings_repaired_total").increment(1);
                tracing::warn!(%sale, held, ledger, "the queue store held another version of a sale's settings than the ledger: the ledger's are written");
            }
            Err(e) => warn_throttled!(%sale, error = %e, "settings repair of a sale failed"),
        }
    }
    *apart = now;
    Ok(())
}

/// One sale's check: its holdings read and compared if the store stood still since the last
/// check, and repaired once a difference has stood.
async fn check_sale(
    app: &App,
    sale: SaleId,
    seen: &mut Seen,
    versions: &mut Versions,
    min_standing: Duration,
) -> anyhow::Result<()> {
    let version = app.queue.stats(sale).await?.version;
    if versions.insert(sale, version) != Some(version) {
        seen.remove(&sale); // moved since the last check: nothing stands still to compare
        return Ok(());
    }
    if app.holds_in_flight.any(sale) {
        seen.remove(&sale);
        return Ok(());
    }
    metrics::counter!("sluice_queue_drift_reads_total", "sale" => sale.to_string()).increment(1);
    let Some(holdings) = app.queue.holdings(sale).await? else {
        seen.remove(&sale);
        return Ok(());
    };
    let snapshot = app.ledger.snapshot(sale).await?;
    let after = app.queue.stats(sale).await?;
    let drift = holdings.drift(&snapshot);
    let still = after.version == holdings.version && !app.holds_in_flight.any(sale);
    let (Some(drift), true) = (drift, still) else {
        seen.remove(&sale);
        return Ok(());
    };
    let standing = match seen.remove(&sale) {
        Some(s) if s.version == holdings.version && s.snapshot == snapshot => Standing {
            checks: s.checks + 1,
            ..s
        },
        _ => Standing {
            version: holdings.version,
            snapshot,
            since: Instant::now(),
            checks: 1,
        },
    };
    if standing.checks < STANDING || standing.since.elapsed() < min_standing {
        seen.insert(sale, standing);
        return Ok(());
    }
    let snapshot = standing.snapshot;
    let Some(settings) = app.ledger.sale_settings(sale).await? else {
        return Ok(());
    };
    let repair = holdings.repair_from(&snapshot);
    if app
        .queue
        .rebuild_if_unchanged(&settings, &repair, holdings.version)
        .await?
    {
        metrics::counter!("sluice_queue_drift_repaired_total", "sale" => sale.to_string())
            .increment(1);
        tracing::warn!(
            %sale,
            free_in_queue_store = drift.free.0,
            free_in_ledger = drift.free.1,
            seats_differing = drift.seats,
            active_but_ended = drift.extra,
            live_but_missing = drift.missing,
            holds_differing = drift.holds,
            users_differing = drift.bought,
            "queue store's holdings repaired from the ledger"
        );
    }
    Ok(())
}
