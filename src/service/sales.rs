//! Admin use cases: create a sale, read it, pause / resume / close it, tune its admission, and
//! read its counters. Each change an operator makes is given its admin audit entry
//! ([`SaleAudit`]), which the ledger writes in the change's own transaction. A change to what
//! the queue store keeps of a sale (status, admission, name, end to joins) is the ledger's
//! first and the store's next, the settings written whole and tagged with the ledger's version
//! of them, so that the store keeps the latest of two writes that cross; one the store missed
//! is written again from the ledger ([`followed`], [`follow_in_queue`]).
//!
//! Which mechanism repairs which failure, with its metric and alert: `docs/architecture.md`,
//! "Keeping the stores in line".

use chrono::{DateTime, Utc};

use super::{App, ServiceError, ServiceResult};
use crate::domain::sale::is_unprintable;
use crate::domain::valve::ControllerState;
use crate::domain::SaleSnapshot;
use crate::domain::Target;
use crate::domain::{
    Admission, AttemptEvent, NewSale, ProofOfWork, Sale, SaleId, SaleStatus, StockChange,
};
use crate::ledger::{Audit, LedgerError, LedgerStats, SaleChange, SaleRecord};
use crate::queue::Lease;
use crate::telemetry::warn_throttled;

/// An operator's change to a sale as the audit log keeps it.
pub type SaleAudit<'a> = Audit<'a, SaleRecord>;

pub async fn create(
    app: &App,
    mut new: NewSale,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    if let Some(layout) = new.layout {
        of_layout(app, &mut new, layout).await?;
    }
    let sale = new
        .parse(Utc::now())
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    if sale.price.is_none() && app.provider.has_api() {
        return Err(ServiceError::validation(
            "currency",
            format!(
                "a sale needs a price (currency and unit_price): the payment provider ({}) \
                 charges the hold's amount",
                app.provider.name()
            ),
        ));
    }
    keep(app, sale, audit).await
}

/// A gate's line: a sale whose stock is never held, so it needs no price whoever takes the
/// payments.
pub async fn create_line(
    app: &App,
    new: NewSale,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    let sale = new
        .parse(Utc::now())
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    keep(app, sale, audit).await
}

/// Keeps a checked new sale in the ledger, then in the queue store.
async fn keep(app: &App, sale: Sale, audit: &SaleAudit<'_>) -> ServiceResult<SaleRecord> {
    let remaining = sale.stock.total();
    let record = SaleRecord {
        sale,
        remaining,
        settings_version: 0,
    };
    let entry = audit.entry(&Target::Sale(record.sale.id), None, Some(&record));
    app.ledger.create_sale(&record.sale, Some(&entry)).await?;
    // The sale exists from here on: the ledger is its truth, and the queue store is built from
    // it. A store that fails now gets the sale at its first join or status
    // (`restore_in_queue`); answering an error instead would have a retry make a second sale.
    let fresh = SaleSnapshot::fresh(&record.sale);
    if let Err(e) = app
        .queue
        .init_sale(&record.sale, record.settings_version, &fresh, false)
        .await
    {
        tracing::warn!(sale = %record.sale.id, error = %e,
            "the new sale is not in the queue store yet: its first join puts it there");
    }
    Ok(record)
}

/// A sale of a venue layout takes the layout's seats, and each priced category the layout's
/// seats of that category.
async fn of_layout(app: &App, new: &mut NewSale, layout: uuid::Uuid) -> ServiceResult<()> {
    let layout = app
        .ledger
        .layout(layout)
        .await?
        .ok_or_else(|| ServiceError::validation("layout_id", "no such layout"))?;
    if new.seats.is_some() || new.quantity.is_some() {
        return Err(ServiceError::validation(
            "layout_id",
            "a sale of a layout takes the layout's seats: give no quantity or seats",
        ));
    }
    let of_layout = layout.categories();
    for (name, _, seats) in &mut new.price.categories {
        if !seats.is_empty() {
            return Err(ServiceError::validation(
                "categories",
                format!("category {name}: its seats are the layout's; give none"),
            ));
        }
        *seats = of_layout
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, seats)| seats.clone())
            .ok_or_else(|| {
                ServiceError::validation("categories", format!("the layout has no category {name}"))
            })?;
    }
    new.seats = Some(layout.seat_ids());
    Ok(())
}

pub async fn get(app: &App, id: SaleId) -> ServiceResult<SaleRecord> {
    app.ledger
        .sale(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))
}

/// Moves the sale to `status`; `audit` is the operator's entry (none when sluice closes a sale
/// itself, past its `closes_at`).
pub async fn set_status(
    app: &App,
    id: SaleId,
    status: SaleStatus,
    audit: Option<&SaleAudit<'_>>,
) -> ServiceResult<SaleRecord> {
    let record = change_in_ledger(app, id, SaleChange::Status(status), audit).await?;
    followed(app, &record, settings_in_queue(app, &record).await).await;
    Ok(record)
}

/// The queue store takes the sale's settings as the ledger has them after a change; a closed
/// sale lets go of its waiting users. Whether the store holds the sale: one it lost is rebuilt
/// whole from the ledger at its first join or status, or by the queue-sync worker.
async fn settings_in_queue(app: &App, record: &SaleRecord) -> ServiceResult<bool> {
    let id = record.sale.id;
    let held = app
        .queue
        .put_settings(&record.sale, record.settings_version, false)
        .await?;
    if let Some(held) = held.filter(|&v| v > record.settings_version) {
        // A later change wrote them, which the ledger has; or the ledger went back past them
        // (restored from a backup) and its settings stand, whatever the store's version.
        if let Some(now) = app.ledger.sale(id).await? {
            if now.settings_version < held {
                tracing::warn!(sale = %id, store = held, ledger = now.settings_version,
                    "the queue store has a later version of a sale's settings than the ledger: the ledger's are written over it");
                app.queue
                    .put_settings(&now.sale, now.settings_version, true)
                    .await?;
            }
        }
    }
    if record.sale.status == SaleStatus::Closed {
        close_out_the_waiting(app, id).await?;
    }
    Ok(held.is_some())
}

/// Everyone still waiting when a sale closes is EXPIRED (`sale_closed`) from then on: the queue
/// store lets go of their entries (most of what it keeps of a sale) and their next status says
/// so (`service::status`). No transition is written for them (waiting attempts live in the
/// queue store only), so the expiry counter an SRE reads by cause counts them here; a second
/// close finds nobody waiting and counts nobody. Should the store fail here, the sale stays
/// closed and its waiting users are answered alike; the queue-sync worker lets go of them
/// (`follow_in_queue`).
async fn close_out_the_waiting(app: &App, id: SaleId) -> ServiceResult<()> {
    let waiting = app.queue.forget_waiting(id).await?;
    super::transition::waiting_ended(AttemptEvent::SaleClosed, waiting);
    Ok(())
}

/// After a change to a sale's settings, which the ledger has: the queue store took it too
/// (recorded in the ledger, so the queue-sync worker leaves the sale alone), or it did not,
/// and the worker brings the store in line once it answers (`follow_in_queue`). Either way
/// the operator's change stands, and is answered. The store keeps the latest version of the
/// settings whatever order the writes of two changes arrive in, so a write that was refused
/// because a later one was there is in line too.
pub async fn followed<T>(app: &App, record: &SaleRecord, in_queue: ServiceResult<T>) {
    let sale = record.sale.id;
    let recorded = match in_queue {
        Ok(_) => app
            .ledger
            .store_followed(sale, record.settings_version)
            .await
            .map_err(Into::into),
        Err(e) => Err(e),
    };
    if let Err(e) = recorded {
        warn_throttled!(%sale, error = %e, "the queue store may not have a sale's latest change: the queue-sync worker brings it in line");
    }
}

/// Brings the queue store in line with the sale as the ledger has it (the queue-sync worker,
/// for a sale whose change the store missed): its settings written, or the sale rebuilt whole
/// if the store lost it, then recorded.
pub async fn follow_in_queue(app: &App, id: SaleId) -> ServiceResult<()> {
    let Some(record) = app.ledger.sale(id).await? else {
        return Ok(());
    };
    if !settings_in_queue(app, &record).await? {
        put_in_queue(app, &record, false).await?;
    }
    app.ledger
        .store_followed(id, record.settings_version)
        .await?;
    Ok(())
}

pub async fn set_admission(
    app: &App,
    id: SaleId,
    rate_per_minute: u32,
    max_active: u32,
    adaptive: Option<(u32, u32)>,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    let admission = Admission::parse(rate_per_minute, max_active, adaptive)
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    let record = change_in_ledger(app, id, SaleChange::Admission(admission), Some(audit)).await?;
    followed(app, &record, settings_in_queue(app, &record).await).await;
    Ok(record)
}

/// Sets (or, with 0, removes) the proof of work a join must show; a new salt each time, so
/// work done in advance is lost. Other replicas follow within a second.
pub async fn set_proof_of_work(
    app: &App,
    id: SaleId,
    bits: u32,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    let pow = ProofOfWork::parse(bits).map_err(|e| ServiceError::validation(e.field, e.message))?;
    let record = change_in_ledger(app, id, SaleChange::ProofOfWork(&pow), Some(audit)).await?;
    app.offers.forget(id);
    Ok(record)
}

/// An operator's change to a running sale's stock: the ledger takes it in one transaction
/// (withdrawing only free units, all asked or none), then the queue store follows. Should the
/// store fail here, it is left to the drift checker, which brings it back to the ledger's
/// figures once the sale's holdings stand still.
pub async fn change_stock(
    app: &App,
    id: SaleId,
    add: Option<u32>,
    withdraw: Option<u32>,
    add_seats: Option<Vec<String>>,
    withdraw_seats: Option<Vec<String>>,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    let sale = app
        .ledger
        .sale_settings(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let change = StockChange::parse(sale.stock.kind(), add, withdraw, add_seats, withdraw_seats)
        .and_then(|c| c.fits_in(sale.stock.total()).map(|()| c))
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    let record = change_in_ledger(app, id, SaleChange::Stock(&change), Some(audit)).await?;
    if let Err(e) = app.queue.adjust_stock(id, &change).await {
        tracing::warn!(sale = %id, error = %e, "a stock change is in the ledger, not yet in the queue store; the drift checker brings it in line");
    }
    app.offers.forget(id);
    Ok(record)
}

/// A new name (shown to buyers) or end to joins for a sale; what is not given stays. The queue
/// store takes the new settings at once.
pub async fn set_details(
    app: &App,
    id: SaleId,
    name: Option<String>,
    closes_at: Option<DateTime<Utc>>,
    audit: &SaleAudit<'_>,
) -> ServiceResult<SaleRecord> {
    if name.is_none() && closes_at.is_none() {
        return Err(ServiceError::validation("name", "give a name or closes_at"));
    }
    if name
        .as_deref()
        .is_some_and(|n| n.trim().is_empty() || n.chars().any(is_unprintable))
    {
        return Err(ServiceError::validation(
            "name",
            "must show: no control or bidirectional-override characters",
        ));
    }
    let current = get(app, id).await?;
    if let Some(closes_at) = closes_at {
        if closes_at <= current.sale.opens_at {
            return Err(ServiceError::validation(
                "closes_at",
                "must be after opens_at",
            ));
        }
    }
    let details = SaleChange::Details {
        name: name.as_deref(),
        closes_at,
    };
    let record = change_in_ledger(app, id, details, Some(audit)).await?;
    followed(app, &record, settings_in_queue(app, &record).await).await;
    app.offers.forget(id);
    Ok(record)
}

/// A sale's admission settings, and its controller as the admitter last published it.
/// A sale's admission as it runs: the settings, the controller's last published state, and
/// which process admits for it now.
pub struct AdmissionState {
    pub admission: Admission,
    pub controller: Option<ControllerState>,
    /// The lease of the replica admitting for the sale (none while nobody does).
    pub admitter: Option<Lease>,
}

pub async fn admission(app: &App, id: SaleId) -> ServiceResult<AdmissionState> {
    let record = get(app, id).await?;
    let controller = app
        .queue
        .controller(id)
        .await?
        .and_then(|json| serde_json::from_str(&json).ok());
    Ok(AdmissionState {
        admission: record.sale.admission,
        controller,
        admitter: app.queue.lease_holder(id).await?,
    })
}

/// A sale's counters: waiting from the queue store, the rest from the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct SaleStats {
    pub waiting: u64,
    pub ledger: LedgerStats,
}

pub async fn stats(app: &App, id: SaleId) -> ServiceResult<SaleStats> {
    let ledger = app.ledger.stats(id).await.map_err(not_found_sale)?;
    let queue = app.queue.stats(id).await?;
    Ok(SaleStats {
        waiting: queue.waiting,
        ledger,
    })
}

/// The ledger's change to the sale, with the operator's entry if given.
async fn change_in_ledger(
    app: &App,
    id: SaleId,
    change: SaleChange<'_>,
    audit: Option<&SaleAudit<'_>>,
) -> ServiceResult<SaleRecord> {
    app.ledger
        .change_sale(id, change, audit)
        .await
        .map_err(not_found_sale)
}

fn not_found_sale(e: LedgerError) -> ServiceError {
    match e {
        LedgerError::NotFound => ServiceError::NotFound("sale"),
        other => other.into(),
    }
}

/// Rebuilds a sale the queue store lost (flushed, failed over, or an embedded restart) from
/// the ledger: settings, free units, live attempts and their holds. With `force`, rebuilds even
/// a sale the store has (`sluice reconcile`; run it with admission paused). Returns false if
/// the ledger has no such sale.
pub async fn restore_in_queue(app: &App, id: SaleId, force: bool) -> ServiceResult<bool> {
    let Some(record) = app.ledger.sale(id).await? else {
        return Ok(false);
    };
    put_in_queue(app, &record, force).await?;
    Ok(true)
}

/// Writes the sale's settings to the queue store, and rebuilds its holdings from the ledger's
/// snapshot when the store does not hold them (or `force`). A sale the store did not hold gets
/// a line numbered anew from 1: its phases' first serials are moved to it.
async fn put_in_queue(app: &App, record: &SaleRecord, force: bool) -> ServiceResult<()> {
    let id = record.sale.id;
    let snapshot = app.ledger.snapshot(id).await?;
    let version = record.settings_version;
    // A forced rebuild (`sluice reconcile`) keeps the line of a sale the store holds.
    let line_lost = !force || !app.queue.refresh(id, "", 0, &[]).await?.figures.known;
    if app
        .queue
        .init_sale(&record.sale, version, &snapshot, force)
        .await?
    {
        tracing::warn!(sale = %id, live = snapshot.live.len(), "sale rebuilt in the queue store from the ledger");
        if line_lost && app.ledger.renumber_phases(id).await? > 0 {
            app.offers.forget(id);
            tracing::warn!(sale = %id, "the sale's phases start at serial 1 of its new line");
        }
    }
    Ok(())
}
