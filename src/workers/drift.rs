//! The drift checker: each open sale of identical units has its queue-store counter (free
//! units) compared with the ledger's count on a schedule, and repaired when they disagree, as
//! when Redis lost writes in a failover or a compensation after a refused hold never reached
//! it. A hold in flight makes them disagree for a moment (the store takes first, the ledger
//! commits after), so a difference is repaired only once it has stood still: the same counter
//! and the same ledger count at [`STANDING`] checks in a row, no queue-sync change waiting,
//! and the repair a compare-and-set on the counter the check read (a hold since then makes it
//! a no-op). Admission is never paused. Each repair is counted
//! (`sluice_queue_drift_repaired_total{sale}`) and logged with the difference.

use std::collections::HashMap;
use std::time::Duration;

use crate::domain::{SaleId, StockKind};
use crate::service::App;

/// Checks in a row that must find the same difference before it is repaired.
const STANDING: u32 = 3;

/// What the last check of a sale found: (counter, ledger count, checks in a row).
type Seen = HashMap<SaleId, (u64, u64, u32)>;

pub async fn run(app: App, every: Duration) {
    let mut drain = app.drain.subscribe();
    let mut seen = Seen::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = crate::service::drain::started(&mut drain) => return,
        }
        if let Err(e) = check(&app, &mut seen).await {
            tracing::debug!(error = %e, "drift check skipped");
        }
    }
}

async fn check(app: &App, seen: &mut Seen) -> anyhow::Result<()> {
    let (pending, _) = app.ledger.sync_backlog().await?;
    if pending > 0 {
        seen.clear(); // the queue-sync worker has changes to apply first
        return Ok(());
    }
    let plans = app.ledger.admitting_sales().await?;
    seen.retain(|sale, _| plans.iter().any(|p| p.sale == *sale));
    for plan in plans {
        let sale = plan.sale;
        let Some(settings) = app.ledger.sale_settings(sale).await? else {
            continue;
        };
        if settings.stock.kind() != StockKind::Quantity {
            continue;
        }
        let before = app.queue.stats(sale).await?;
        let Some(record) = app.ledger.sale(sale).await? else {
            continue;
        };
        let after = app.queue.stats(sale).await?;
        let ledger = u64::from(record.remaining);
        let counter = after.remaining;
        if !after.known || before.remaining != counter || counter == ledger {
            seen.remove(&sale);
            continue;
        }
        let streak = match seen.get(&sale) {
            Some((c, l, n)) if *c == counter && *l == ledger => n + 1,
            _ => 1,
        };
        if streak < STANDING {
            seen.insert(sale, (counter, ledger, streak));
            continue;
        }
        seen.remove(&sale);
        if app.queue.repair_stock(sale, counter, ledger).await? {
            metrics::counter!("sluice_queue_drift_repaired_total", "sale" => sale.to_string())
                .increment(1);
            tracing::warn!(%sale, queue_store = counter, ledger, difference = ledger as i64 - counter as i64, "queue store's free units repaired from the ledger");
        }
    }
    Ok(())
}
