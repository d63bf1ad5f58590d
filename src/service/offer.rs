//! What a user may buy in a sale: its name, limits and free stock — for the waiting-room page
//! and any storefront. It comes from the ledger (free seats only for seated sales), but every
//! waiting user's page asks for it, and the ledger must only see admitted traffic: answers are
//! kept for a second per sale, so a crowd costs the ledger one read a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{App, ServiceError, ServiceResult};
use crate::domain::{ProofOfWork, Sale, SaleId, Stock};

/// How long an offer is served from memory: remaining stock may be this stale.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// How long an offer is kept at all.
const KEEP_FOR: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct OfferCache {
    /// Shared, so a join's look at the proof of work copies no seat list.
    offers: Mutex<HashMap<SaleId, (Instant, Arc<Offer>)>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub sale: Sale,
    pub remaining: u32,
    /// Seats still free (seated sales only).
    pub free_seats: Option<Vec<String>>,
}

pub async fn offer(app: &App, id: SaleId) -> ServiceResult<Arc<Offer>> {
    if let Some((at, offer)) = app.offers.offers.lock().expect("not poisoned").get(&id) {
        if at.elapsed() < FRESH_FOR {
            return Ok(Arc::clone(offer));
        }
    }
    let offer = Arc::new(read(app, id).await?);
    let mut offers = app.offers.offers.lock().expect("not poisoned");
    // Old entries stay a while: the fallback of `proof_of_work` while the ledger is down.
    offers.retain(|_, (at, _)| at.elapsed() < KEEP_FOR);
    offers.insert(id, (Instant::now(), Arc::clone(&offer)));
    Ok(offer)
}

/// The work a join to `id` must show. From the offers kept in memory; when the ledger cannot
/// be read, the last one known (or none: joins keep answering from the queue store alone
/// while the ledger is down, and stop asking for work rather than stop taking joins).
pub async fn proof_of_work(app: &App, id: SaleId) -> Option<ProofOfWork> {
    match offer(app, id).await {
        Ok(offer) => Some(offer.sale.proof_of_work.clone()),
        Err(ServiceError::NotFound(_)) => None,
        Err(e) => {
            tracing::debug!(sale = %id, error = %e, "proof of work from the last known offer");
            let offers = app.offers.offers.lock().expect("not poisoned");
            offers
                .get(&id)
                .map(|(_, offer)| offer.sale.proof_of_work.clone())
        }
    }
}

impl OfferCache {
    /// Forgets a sale's offer (its settings changed here).
    pub fn forget(&self, id: SaleId) {
        self.offers.lock().expect("not poisoned").remove(&id);
    }
}

async fn read(app: &App, id: SaleId) -> ServiceResult<Offer> {
    let record = app
        .ledger
        .sale(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let free_seats = match &record.sale.stock {
        Stock::Quantity(_) => None,
        Stock::Seats(_) => match app.ledger.free_stock(id).await? {
            Stock::Seats(free) => Some(free),
            Stock::Quantity(_) => Some(Vec::new()),
        },
    };
    Ok(Offer {
        sale: record.sale,
        remaining: record.remaining,
        free_seats,
    })
}
