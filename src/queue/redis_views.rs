//! Status lookups of one sale go to Redis together. Every status answer, and every poll of a
//! status stream, asks where an attempt stands; one script call per lookup made each pay for a
//! round of the Redis client (command encoding, the connection task, a reply parsed) and for a
//! script call in Redis, and read the sale's figures again. Lookups that arrive while earlier
//! ones of the same sale are out wait in a [`Gathering`] and go together, up to
//! [`MAX_LOOKUPS`] in one call of `lua/position.lua`, which reads the sale's figures once.
//!
//! Nothing waits for company: with fewer than [`MAX_CALLS`] calls of a sale out, a lookup goes
//! at once (a batch of one). Only while Redis is busy with that sale do lookups gather, so a
//! batch is as large as the load makes it.
//!
//! The data structure: per sale with lookups pending or out, the pending lookups in arrival
//! order and the number of calls out. A *drainer* (a task the store spawns) takes the pending
//! lookups as one batch, answers them, and takes the next batch until none is left; at most
//! [`MAX_CALLS`] drainers per sale. The map and both fields change under one lock, so a lookup
//! that arrives as the last drainer stops starts a new one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::SaleId;

/// Calls of one sale out at once: two keep Redis busy with one sale's batch while the next one
/// gathers (one would leave Redis idle between a reply and the next call).
pub const MAX_CALLS: usize = 2;

/// Lookups in one call: bounds how long one script holds Redis (about 10 µs a lookup).
pub const MAX_LOOKUPS: usize = 64;

/// The pending lookups of every sale; `A` is one lookup with the way to answer it.
pub struct Gathering<A> {
    sales: Mutex<HashMap<SaleId, Pending<A>>>,
}

/// One sale's side of a [`Gathering`].
struct Pending<A> {
    /// Lookups not yet in a call, oldest first.
    asks: Vec<A>,
    /// Drainers of this sale (each with at most one call out).
    drainers: usize,
}

impl<A> Default for Gathering<A> {
    fn default() -> Self {
        Gathering {
            sales: Mutex::new(HashMap::new()),
        }
    }
}

impl<A> Gathering<A> {
    /// Adds a lookup. `Some` when the caller must run a drainer for the sale (fewer than
    /// [`MAX_CALLS`] were running); otherwise a running drainer takes the lookup.
    pub fn add(self: &Arc<Self>, sale: SaleId, ask: A) -> Option<Drainer<A>> {
        let mut sales = self.sales.lock().expect("gathering lock");
        let pending = sales.entry(sale).or_insert_with(|| Pending {
            asks: Vec::new(),
            drainers: 0,
        });
        pending.asks.push(ask);
        if pending.drainers >= MAX_CALLS {
            return None;
        }
        pending.drainers += 1;
        Some(Drainer {
            gathering: Arc::clone(self),
            sale,
        })
    }

    /// Lookups pending for `sale`.
    #[cfg(test)]
    fn pending(&self, sale: SaleId) -> usize {
        let sales = self.sales.lock().expect("gathering lock");
        sales.get(&sale).map_or(0, |p| p.asks.len())
    }
}

/// The right to take a sale's pending lookups as batches. Dropping it (at the end, or if the
/// task running it fails) counts it out, so the next lookup starts another.
pub struct Drainer<A> {
    gathering: Arc<Gathering<A>>,
    sale: SaleId,
}

impl<A> Drainer<A> {
    /// The next batch, oldest first, at most [`MAX_LOOKUPS`]; `None` when none is pending (the
    /// drainer is then done).
    pub fn next_batch(&mut self) -> Option<Vec<A>> {
        let mut sales = self.gathering.sales.lock().expect("gathering lock");
        let pending = sales.get_mut(&self.sale)?;
        if pending.asks.is_empty() {
            return None;
        }
        let take = pending.asks.len().min(MAX_LOOKUPS);
        Some(pending.asks.drain(..take).collect())
    }
}

impl<A> Drop for Drainer<A> {
    fn drop(&mut self) {
        let mut sales = match self.gathering.sales.lock() {
            Ok(sales) => sales,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(pending) = sales.get_mut(&self.sale) {
            pending.drainers -= 1;
            if pending.drainers == 0 && pending.asks.is_empty() {
                sales.remove(&self.sale);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sale() -> SaleId {
        SaleId(Uuid::new_v4())
    }

    #[test]
    fn a_lone_lookup_starts_a_drainer_that_takes_it_alone() {
        let gathering = Arc::new(Gathering::default());
        let sale = sale();
        let mut drainer = gathering
            .add(sale, 1)
            .expect("the first lookup starts a drainer");
        assert_eq!(drainer.next_batch(), Some(vec![1]));
        assert_eq!(drainer.next_batch(), None);
        drop(drainer);
        assert!(
            gathering.sales.lock().unwrap().is_empty(),
            "a done sale is forgotten"
        );
    }

    #[test]
    fn lookups_arriving_while_calls_are_out_go_together_in_order() {
        let gathering = Arc::new(Gathering::default());
        let sale = sale();
        let mut first = gathering.add(sale, 0).unwrap();
        let mut second = gathering.add(sale, 1).unwrap();
        assert_eq!(first.next_batch(), Some(vec![0, 1]));
        assert_eq!(second.next_batch(), None, "the first took both");
        drop(second);
        // The first drainer's call is out; two slots were taken, one is free again.
        let mut third = gathering.add(sale, 2).expect("one drainer of two left");
        for n in 3..10 {
            assert!(gathering.add(sale, n).is_none(), "{MAX_CALLS} drainers run");
        }
        assert_eq!(gathering.pending(sale), 8);
        assert_eq!(third.next_batch(), Some((2..10).collect()));
        assert_eq!(first.next_batch(), None);
    }

    #[test]
    fn a_batch_holds_at_most_max_lookups() {
        let gathering = Arc::new(Gathering::default());
        let sale = sale();
        let mut drainer = gathering.add(sale, 0).unwrap();
        let _other = gathering.add(sale, 1).unwrap();
        for n in 2..(MAX_LOOKUPS + 10) {
            assert!(gathering.add(sale, n).is_none());
        }
        assert_eq!(drainer.next_batch().unwrap().len(), MAX_LOOKUPS);
        assert_eq!(
            drainer.next_batch(),
            Some((MAX_LOOKUPS..MAX_LOOKUPS + 10).collect())
        );
    }

    #[test]
    fn sales_gather_apart() {
        let gathering = Arc::new(Gathering::default());
        let (a, b) = (sale(), sale());
        let mut on_a = gathering.add(a, "a").unwrap();
        let mut on_b = gathering
            .add(b, "b")
            .expect("another sale has drainers of its own");
        assert_eq!(on_a.next_batch(), Some(vec!["a"]));
        assert_eq!(on_b.next_batch(), Some(vec!["b"]));
    }

    #[test]
    fn a_dropped_drainer_lets_the_next_lookup_start_one() {
        let gathering = Arc::new(Gathering::default());
        let sale = sale();
        let first = gathering.add(sale, 0).unwrap();
        let second = gathering.add(sale, 1).unwrap();
        assert!(gathering.add(sale, 2).is_none());
        // Both fail without taking a batch (their task died): the lookups stay pending.
        drop(first);
        drop(second);
        let mut next = gathering.add(sale, 3).expect("no drainer runs");
        assert_eq!(next.next_batch(), Some(vec![0, 1, 2, 3]));
    }
}
