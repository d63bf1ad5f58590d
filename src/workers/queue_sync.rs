//! The queue-sync worker: applies to the queue store the changes committed transitions wrote to
//! the ledger's queue-sync log that no request was seen to apply (the store was away, or the
//! process died between commit and sync), oldest first, and marks them applied. Every change is
//! idempotent, so replicas need no lease: two that apply the same row apply it once. While the
//! store is away it waits and tries again, doubling the wait up to a few seconds. The backlog
//! and its oldest age are gauges (`sluice_queue_sync_pending`,
//! `sluice_queue_sync_oldest_age_seconds`; alert `SluiceQueueSyncBehind`).
//!
//! Each round also follows the sales whose settings changed while the store was away (their
//! `settings_version` in the ledger past the `store_version` the store took,
//! [`crate::ledger::QueueSyncLedger::sales_behind_store`]): found so at two rounds in a row with the same
//! version, so that the request which made the change has had its turn, the sale's settings are
//! written whole from the ledger (`service::sales::follow_in_queue`;
//! `sluice_queue_sale_changes_followed_total`). How many sales are behind is a gauge
//! (`sluice_queue_sales_behind`; alert `SluiceSaleChangesBehind`).
//!
//! Each round first fills the queue store's script cache when it lacks a script
//! ([`crate::queue::QueueStore::prepare`]): a Redis that restarted or failed over lost it.
//!
//! Every `REPLAY_EVERY` rounds it also replays: the rows applied within
//! `workers.queue_sync_replay_secs` whose application the store has no record of (a Redis
//! failover or restart lost the last writes the ledger saw applied) are applied again, once
//! (`sluice_queue_sync_replayed_total`). The store records each change's id with the change,
//! so a change whose write survived is never applied twice. The sales whose settings the
//! store took within that time are checked alike: one whose version the store no longer
//! holds has its settings written again from the ledger (counted there too). Rows applied
//! more than [`SYNCED_KEEP_MS`] ago are pruned.
//!
//! Which mechanism repairs which failure, with its metric and alert: `docs/architecture.md`,
//! "Keeping the stores in line".

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use crate::domain::SaleId;
use crate::ledger::PendingSync;
use crate::queue::SYNCED_KEEP_MS;
use crate::service::App;

/// A row younger than this is left to the request that wrote it (its fast path).
const GRACE_MS: u64 = 1000;
/// Rows applied per round.
const BATCH: u32 = 500;
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Rounds between replays (5 s at the default 500 ms); the first round replays, since the
/// store may have lost writes while this process was away.
const REPLAY_EVERY: u64 = 10;
/// Rounds between prunes of the log (5 minutes at the default).
const PRUNE_EVERY: u64 = 600;
/// Rows checked per replay, the newest.
const REPLAY_BATCH: u32 = 20_000;

/// Sales found behind the ledger's settings at the last round, and the version each was at.
type Behind = HashMap<SaleId, u64>;

pub async fn run(app: App, every: Duration) {
    let mut drain = app.drain.subscribe();
    let mut behind = Behind::new();
    metrics::gauge!("sluice_queue_sales_behind").set(0.0);
    let mut wait = every;
    let replay_ms = app.config.workers.queue_sync_replay_secs.millis();
    let mut rounds: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = crate::service::drain::started(&mut drain) => return,
        }
        if rounds.is_multiple_of(REPLAY_EVERY) {
            if let Err(e) = replay(&app, replay_ms).await {
                tracing::debug!(error = %e, "queue sync: replay skipped");
            }
        }
        if rounds % PRUNE_EVERY == PRUNE_EVERY - 1 {
            if let Err(e) = app.ledger.prune_synced(SYNCED_KEEP_MS).await {
                tracing::debug!(error = %e, "queue sync: prune skipped");
            }
        }
        rounds += 1;
        wait = match round(&app, &mut behind).await {
            Ok(()) => every,
            Err(e) => {
                let next = (wait * 2).min(MAX_BACKOFF);
                tracing::warn!(error = %e, retry_in = ?next, "queue sync: a round failed (the queue store or the ledger is not answering)");
                next
            }
        };
    }
}

/// Applies the rows due now, then follows the sales behind; stops at the first change the store
/// cannot take (it is away: the rest would fail alike).
async fn round(app: &App, behind: &mut Behind) -> anyhow::Result<()> {
    // A Redis that restarted or failed over lost its script cache: it is filled again here,
    // before the first burst of calls has each script load itself (a store that does not
    // answer fails the calls below).
    if let Ok(loaded @ 1..) = app.queue.prepare().await {
        tracing::info!(
            scripts = loaded,
            "queue sync: scripts loaded into the queue store"
        );
    }
    if let Ok((pending, oldest)) = app.ledger.sync_backlog().await {
        metrics::gauge!("sluice_queue_sync_pending").set(pending as f64);
        metrics::gauge!("sluice_queue_sync_oldest_age_seconds").set(oldest);
    }
    let due = app.ledger.pending_syncs(GRACE_MS, BATCH).await?;
    let mut applied = Vec::with_capacity(due.len());
    let mut failed = None;
    for sync in &due {
        match app.queue.apply_sync(sync).await {
            Ok(_) => applied.push(sync.id),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if !applied.is_empty() {
        metrics::counter!("sluice_queue_sync_applied_total").increment(applied.len() as u64);
        tracing::info!(
            changes = applied.len(),
            "queue sync: changes the queue store missed are applied"
        );
        app.ledger.mark_synced(&applied).await?;
    }
    match failed {
        Some(e) => Err(e.into()),
        None => follow_sales(app, behind).await,
    }
}

/// Writes to the store the settings of the sales found behind at this round and the last at
/// the same version.
async fn follow_sales(app: &App, behind: &mut Behind) -> anyhow::Result<()> {
    let now: Behind = app
        .ledger
        .sales_behind_store(BATCH)
        .await?
        .into_iter()
        .collect();
    metrics::gauge!("sluice_queue_sales_behind").set(now.len() as f64);
    let stood: Vec<(SaleId, u64)> = now
        .iter()
        .filter(|(sale, version)| behind.get(sale) == Some(version))
        .map(|(sale, version)| (*sale, *version))
        .collect();
    *behind = now;
    for (sale, version) in stood {
        crate::service::sales::follow_in_queue(app, sale).await?;
        metrics::counter!("sluice_queue_sale_changes_followed_total").increment(1);
        tracing::info!(%sale, version, "queue sync: a sale's change the queue store missed is applied");
    }
    Ok(())
}

/// Applies again the rows applied within `within_ms` that the store has no record of.
async fn replay(app: &App, within_ms: u64) -> anyhow::Result<()> {
    let recent = app.ledger.recently_synced(within_ms, REPLAY_BATCH).await?;
    let mut by_sale: BTreeMap<SaleId, Vec<PendingSync>> = BTreeMap::new();
    for sync in recent {
        by_sale.entry(sync.attempt.sale).or_default().push(sync);
    }
    for (sale, rows) in by_sale {
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let missing: HashSet<i64> = app.queue.unsynced(sale, &ids).await?.into_iter().collect();
        if missing.is_empty() {
            continue;
        }
        let mut replayed = 0u64;
        for sync in rows.iter().filter(|r| missing.contains(&r.id)) {
            if app.queue.apply_sync(sync).await? {
                replayed += 1;
            }
        }
        metrics::counter!("sluice_queue_sync_replayed_total").increment(replayed);
        tracing::warn!(%sale, replayed, "queue sync: changes the ledger saw applied were missing from the queue store (a failover or a restart lost them) and are applied again");
    }
    replay_settings(app, within_ms).await
}

/// Writes again the settings of the sales whose change the store was recorded taking within
/// `within_ms` and no longer has (a failover or a restart lost it, or the sale itself).
async fn replay_settings(app: &App, within_ms: u64) -> anyhow::Result<()> {
    for (sale, taken) in app
        .ledger
        .sales_followed_within(within_ms, REPLAY_BATCH)
        .await?
    {
        let held = app.queue.settings_version(sale).await?;
        if held.is_some_and(|held| held >= taken) {
            continue;
        }
        crate::service::sales::follow_in_queue(app, sale).await?;
        metrics::counter!("sluice_queue_sync_replayed_total").increment(1);
        tracing::warn!(%sale, taken, ?held, "queue sync: a sale's change the ledger saw the queue store take was missing from it (a failover or a restart lost it) and is written again");
    }
    Ok(())
}
