//! What a user may buy in a sale: its name, limits and free stock — for the waiting-room page
//! and any storefront. It comes from the ledger's row of the sale and the queue store's stock
//! counter (see `read`; free seats only for seated sales), but every waiting user's page asks
//! for it, and every join reads its proof-of-work settings from it, and the ledger must only
//! see admitted traffic: answers are kept for a second per sale, so a crowd costs the ledger
//! one read a second. One request reads at a time (per sale); while it does, the others are
//! answered from the offer it replaces, or, when there is none yet, wait for it, so no join
//! waits behind the read once the second is up.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;
// tokio's clock: the same as std's, but it stands still in a test that pauses time.
use tokio::time::Instant;

use super::{App, ServiceError, ServiceResult};
use crate::domain::{Sale, SaleId, Stock};

/// How long an offer is served from memory: remaining stock may be this stale.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// How long an offer is kept at all.
const KEEP_FOR: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct OfferCache {
    /// Shared, so a join's look at the proof of work copies no seat list.
    offers: Mutex<HashMap<SaleId, (Instant, Arc<Offer>)>>,
    /// Held by the one request reading a sale's offer from the ledger.
    reading: Mutex<HashMap<SaleId, Arc<AsyncMutex<()>>>>,
    /// Counts the changes forgotten here: a read that began before one may have read the old
    /// settings, so its offer is answered but not kept.
    changes: AtomicU64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub sale: Sale,
    pub remaining: u32,
    /// Seats still free (seated sales only).
    pub free_seats: Option<Vec<String>>,
    /// The sale's phases (none: one phase, everyone).
    pub phases: Vec<crate::domain::phase::Phase>,
}

pub async fn offer(app: &App, id: SaleId) -> ServiceResult<Arc<Offer>> {
    app.offers.get(id, || read(app, id)).await
}

/// What a join to `id` follows: the proof of work it must show and the sale's phases. From
/// the offer kept in memory, even a stale one: the join does not wait for its refresh, which
/// runs apart (a join's time is the queue store's call alone, not also the offer's read of the
/// ledger and of the store's counter, each with its own timeout). Only with no offer kept does
/// the join wait for the read: `None` for a sale the ledger does not know (the queue store then
/// answers the join), and the read's error when the ledger cannot be read. A replica that has
/// served the sale keeps its offer for `KEEP_FOR` and goes on taking joins while the ledger is
/// down; one that never read it asks the join to come back rather than let it in unchecked,
/// past a presale's list or codes and its proof of work.
pub async fn join_rules(app: &App, id: SaleId) -> ServiceResult<Option<Arc<Offer>>> {
    if let Some((at, kept)) = app.offers.kept(id) {
        if at.elapsed() >= FRESH_FOR {
            let app = app.clone();
            tokio::spawn(async move {
                if let Err(e) = offer(&app, id).await {
                    tracing::debug!(sale = %id, error = %e, "offer not refreshed");
                }
            });
        }
        return Ok(Some(kept));
    }
    match offer(app, id).await {
        Ok(offer) => Ok(Some(offer)),
        Err(ServiceError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

impl OfferCache {
    /// The sale's offer: the one kept while fresh; else `read` by one caller at a time, the
    /// others answered with the offer it replaces (or, with none yet, waiting for the read).
    async fn get<F, Fut>(&self, id: SaleId, read: F) -> ServiceResult<Arc<Offer>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ServiceResult<Offer>>,
    {
        let kept = self.kept(id);
        if let Some((at, offer)) = &kept {
            if at.elapsed() < FRESH_FOR {
                return Ok(Arc::clone(offer));
            }
        }
        let gate = self.gate(id);
        let _reading = match (gate.try_lock(), kept) {
            (Ok(reading), _) => reading,
            // Another caller is reading: the offer it replaces will do meanwhile.
            (Err(_), Some((_, stale))) => return Ok(stale),
            (Err(_), None) => {
                let reading = gate.lock().await;
                // Read while this one waited (unless that read failed: then this one tries).
                if let Some((at, offer)) = self.kept(id) {
                    if at.elapsed() < FRESH_FOR {
                        return Ok(offer);
                    }
                }
                reading
            }
        };
        let changes = self.changes.load(Ordering::SeqCst);
        let offer = Arc::new(read().await?);
        let mut offers = self.offers.lock().expect("not poisoned");
        if self.changes.load(Ordering::SeqCst) != changes {
            return Ok(offer);
        }
        // Old entries stay a while: the fallback of `join_rules` while the ledger is down.
        offers.retain(|_, (at, _)| at.elapsed() < KEEP_FOR);
        offers.insert(id, (Instant::now(), Arc::clone(&offer)));
        Ok(offer)
    }

    /// Forgets a sale's offer (its settings changed here).
    pub fn forget(&self, id: SaleId) {
        let mut offers = self.offers.lock().expect("not poisoned");
        self.changes.fetch_add(1, Ordering::SeqCst);
        offers.remove(&id);
    }

    /// The offer kept for a sale and when it was read.
    fn kept(&self, id: SaleId) -> Option<(Instant, Arc<Offer>)> {
        let offers = self.offers.lock().expect("not poisoned");
        offers.get(&id).map(|(at, offer)| (*at, Arc::clone(offer)))
    }

    /// The lock a request holds while it reads the sale's offer, one per sale. Past 64 of
    /// them, those of sales with no offer kept and no one reading are dropped.
    fn gate(&self, id: SaleId) -> Arc<AsyncMutex<()>> {
        let mut reading = self.reading.lock().expect("not poisoned");
        if reading.len() > 64 {
            let offers = self.offers.lock().expect("not poisoned");
            reading.retain(|sale, gate| offers.contains_key(sale) || Arc::strong_count(gate) > 1);
        }
        Arc::clone(reading.entry(id).or_default())
    }
}

/// The offer, from the ledger's row of the sale; what is left from the queue store's stock
/// counter for a sale by quantity (counting the ledger's free units scans them: 145 ms for a
/// million, every second, on every replica), from the ledger's free seats for a seated sale
/// (listed for the offer anyway). The ledger counts only while the queue store cannot say.
async fn read(app: &App, id: SaleId) -> ServiceResult<Offer> {
    let sale = app
        .ledger
        .sale_settings(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let (remaining, free_seats) = match &sale.stock {
        Stock::Quantity(_) => match app.queue.stats(id).await {
            Ok(stats) if stats.known => (stats.remaining as u32, None),
            _ => {
                let counted = app.ledger.sale(id).await?;
                (counted.map_or(0, |r| r.remaining), None)
            }
        },
        Stock::Seats(_) => match app.ledger.free_stock(id).await? {
            Stock::Seats(free) => (free.len() as u32, Some(free)),
            Stock::Quantity(_) => (0, Some(Vec::new())),
        },
    };
    let phases = app.ledger.phases(id).await?;
    Ok(Offer {
        sale,
        remaining,
        free_seats,
        phases,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use chrono::Utc;
    use futures_util::future::join_all;

    use super::*;
    use crate::domain::{NewSale, Ttls};

    fn an_offer(remaining: u32) -> Offer {
        let sale = NewSale {
            name: "offer".into(),
            opens_at: None,
            closes_at: None,
            quantity: Some(10),
            seats: None,
            per_user_limit: 1,
            ttls: Ttls {
                admission_secs: 60,
                hold_secs: 60,
                payment_secs: 60,
            },
            rate_per_minute: 60,
            max_active: 10,
            adaptive: None,
            lottery: None,
            layout: None,
            price: Default::default(),
            instant: false,
        }
        .parse(Utc::now())
        .unwrap();
        Offer {
            sale,
            remaining,
            free_seats: None,
            phases: Vec::new(),
        }
    }

    /// A read that takes 100 ms and counts itself; `remaining` tells the reads apart.
    async fn slow_read(reads: &AtomicUsize) -> ServiceResult<Offer> {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(an_offer(n as u32))
    }

    #[tokio::test(start_paused = true)]
    async fn a_crowd_costs_one_read_and_never_waits_on_a_refresh() {
        let (cache, id, reads) = (OfferCache::default(), SaleId::new(), AtomicUsize::new(0));
        // 50 at once and nothing kept yet: one reads, the others wait for it.
        let first = join_all((0..50).map(|_| cache.get(id, || slow_read(&reads)))).await;
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(first.iter().all(|o| o.as_ref().unwrap().remaining == 1));

        // Once it is stale, one caller reads again; the others get the old offer at once.
        tokio::time::advance(FRESH_FOR).await;
        let refresh = cache.get(id, || slow_read(&reads));
        let meanwhile = async {
            tokio::task::yield_now().await;
            let started = tokio::time::Instant::now();
            let old = cache.get(id, || slow_read(&reads)).await.unwrap();
            (old.remaining, started.elapsed())
        };
        let (refreshed, (old, waited)) = tokio::join!(refresh, meanwhile);
        assert_eq!(refreshed.unwrap().remaining, 2);
        assert_eq!((old, waited), (1, Duration::ZERO));
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        assert_eq!(
            cache.get(id, || slow_read(&reads)).await.unwrap().remaining,
            2
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_began_before_a_change_is_not_kept_after_it() {
        let (cache, id, reads) = (OfferCache::default(), SaleId::new(), AtomicUsize::new(0));
        // The admitter reads the offer; the operator's change commits and is forgotten here
        // while that read is still out; the read's (old) offer must not be kept.
        let read = cache.get(id, || slow_read(&reads));
        let change = async {
            tokio::task::yield_now().await;
            cache.forget(id);
        };
        let (old, ()) = tokio::join!(read, change);
        assert_eq!(
            old.unwrap().remaining,
            1,
            "the caller still gets what it read"
        );
        assert!(
            cache.kept(id).is_none(),
            "the old offer is kept after the change"
        );
        assert_eq!(
            cache.get(id, || slow_read(&reads)).await.unwrap().remaining,
            2
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_failed_read_the_next_caller_reads() {
        let (cache, id, reads) = (OfferCache::default(), SaleId::new(), AtomicUsize::new(0));
        let failed = cache.get(id, || async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Err(ServiceError::NotFound("sale"))
        });
        let waiting = async {
            tokio::task::yield_now().await;
            cache.get(id, || slow_read(&reads)).await
        };
        let (failed, waited) = tokio::join!(failed, waiting);
        assert!(matches!(failed, Err(ServiceError::NotFound(_))));
        assert_eq!(waited.unwrap().remaining, 1);
    }
}
