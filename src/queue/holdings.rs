//! What a queue store holds of a sale besides its queue (free stock, active set, holds, units
//! per user), and how it differs from the ledger's snapshot: the drift checker's comparison
//! (`workers::drift`).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::{Admitted, SaleSnapshot, Take};
use crate::domain::{Stock, UserId};

/// A sale's holdings as the queue store has them.
#[derive(Debug, Clone, PartialEq)]
pub struct Holdings {
    /// Counts every change to the stock, holds and active set: two reads with the same
    /// version saw the same holdings, and a repair is a compare-and-set on it. A store that
    /// reads the holdings in pages gives the version at the first: the pages are of one
    /// moment when a later read finds it unchanged.
    pub version: u64,
    /// What is free to hold.
    pub free: Stock,
    /// Admitted, holding or paying attempts, and what each holds.
    pub active: BTreeMap<Uuid, Option<Take>>,
    /// Units each user holds or bought (users at 0 left out).
    pub bought: BTreeMap<UserId, u32>,
    /// The admission batch not yet recorded in the ledger: active here, unknown there, and no
    /// drift (its admitter records it, or the next one does).
    pub unrecorded: Vec<Admitted>,
}

/// How the queue store's holdings differ from the ledger's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Drift {
    /// Free units (or seats) in the store and in the ledger.
    pub free: (u64, u64),
    /// Free seats the two disagree on (seat sales).
    pub seats: u64,
    /// Active in the store, ended (or unknown) in the ledger.
    pub extra: u64,
    /// Live in the ledger, not active in the store.
    pub missing: u64,
    /// Live in both, holding different things.
    pub holds: u64,
    /// Users whose held-or-bought units differ.
    pub bought: u64,
}

impl Holdings {
    /// How these holdings differ from the ledger's `snapshot`; `None` when they agree.
    pub fn drift(&self, snapshot: &SaleSnapshot) -> Option<Drift> {
        let mut drift = Drift {
            free: (self.free.total().into(), snapshot.free.total().into()),
            ..Drift::default()
        };
        if let (Stock::Seats(store), Stock::Seats(ledger)) = (&self.free, &snapshot.free) {
            let store: BTreeSet<&String> = store.iter().collect();
            let ledger: BTreeSet<&String> = ledger.iter().collect();
            drift.seats = store.symmetric_difference(&ledger).count() as u64;
        }
        let unrecorded: BTreeSet<Uuid> = self.unrecorded.iter().map(|a| a.attempt.local).collect();
        let live: BTreeMap<Uuid, Option<Take>> = snapshot
            .live
            .iter()
            .map(|l| (l.attempt.local, l.hold.clone().map(normalised)))
            .collect();
        for (attempt, take) in &self.active {
            match live.get(attempt) {
                None if unrecorded.contains(attempt) => {}
                None => drift.extra += 1,
                Some(held) if *held != take.clone().map(normalised) => drift.holds += 1,
                Some(_) => {}
            }
        }
        drift.missing = live.keys().filter(|a| !self.active.contains_key(a)).count() as u64;
        let ledger_bought: BTreeMap<&UserId, u32> = snapshot
            .bought
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(u, n)| (u, *n))
            .collect();
        let users: BTreeSet<&UserId> = self
            .bought
            .keys()
            .chain(ledger_bought.keys().copied())
            .collect();
        drift.bought = users
            .into_iter()
            .filter(|u| self.bought.get(*u) != ledger_bought.get(u))
            .count() as u64;
        let agree = drift.free.0 == drift.free.1
            && drift.seats == 0
            && drift.extra == 0
            && drift.missing == 0
            && drift.holds == 0
            && drift.bought == 0;
        (!agree).then_some(drift)
    }

    /// The ledger's `snapshot` with this batch not yet recorded added to its live attempts:
    /// what a repair rebuilds the sale's holdings from, so the batch keeps its slots.
    pub fn repair_from(&self, snapshot: &SaleSnapshot) -> SaleSnapshot {
        let mut repaired = snapshot.clone();
        repaired.reset = false;
        for admitted in &self.unrecorded {
            if !repaired.live.iter().any(|l| l.attempt == admitted.attempt) {
                repaired.live.push(super::LiveAttempt {
                    attempt: admitted.attempt,
                    user: admitted.user.clone(),
                    deadline_ms: admitted.deadline_ms,
                    hold: None,
                });
            }
        }
        repaired
    }
}

/// Seats in a fixed order, so two holds of the same seats compare equal.
fn normalised(take: Take) -> Take {
    match take {
        Take::Seats(mut seats) => {
            seats.sort();
            Take::Seats(seats)
        }
        quantity => quantity,
    }
}
