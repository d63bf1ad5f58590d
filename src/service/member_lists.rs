//! This replica's copy of each live list phase's members, so that a presale of hundreds of
//! thousands joining at once costs the ledger nothing per join: a join in a list phase asks
//! the copy, kept as a sorted array of 64-bit keyed hashes of the user ids (8 bytes a member:
//! 8 MB for a million), which a binary search answers.
//!
//! The copies are read off the join path, by a worker of every replica
//! (`workers::presale_lists`), a page at a time, whenever a list's version changes. A version
//! is the list's member count (`Phase::members`, which the ledger keeps with the phase and the
//! offer carries from it): a list only grows, so a copy of a later version than a join's offer
//! names answers for it too. The ledger stays the truth: a join whose offer names a later
//! version than the copy (ids were added a moment ago) takes a yes from the copy, and asks the
//! ledger about its one user otherwise; with no copy at all (a replica just started), it asks
//! the ledger likewise. Reads of whole lists are counted (`sluice_phase_list_reads_total`).
//!
//! The hash is SipHash with keys drawn at start: a user cannot choose an id that collides
//! with a member's (ids come from the identity provider), and with a million members one
//! id in 2^44 would by chance.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::{Arc, RwLock};

use crate::domain::{SaleId, UserId};
use crate::ledger::{LedgerResult, PhaseLedger};

/// User ids read a call when a list is read whole.
const PAGE: u32 = 50_000;

/// A list phase: its sale and its position among the sale's phases.
pub type ListKey = (SaleId, u32);

/// One list phase's members, as of one version of the list.
struct Copy {
    /// The list's `Phase::members` when it was read.
    version: u64,
    /// The members' hashes, sorted.
    hashes: Vec<u64>,
}

#[derive(Default)]
pub struct MemberLists {
    keys: RandomState,
    lists: RwLock<HashMap<ListKey, Arc<Copy>>>,
}

impl MemberLists {
    /// Whether `user` is on list phase `position` of `sale`, whose list is at `version`: from
    /// the copy, and from the ledger only for a user the copy lacks while it is behind.
    pub async fn contains(
        &self,
        ledger: &dyn PhaseLedger,
        sale: SaleId,
        position: u32,
        version: u64,
        user: &UserId,
    ) -> LedgerResult<bool> {
        let copy = self.copy((sale, position));
        let hash = self.keys.hash_one(user.as_str());
        match copy {
            Some(copy) if copy.hashes.binary_search(&hash).is_ok() => Ok(true),
            Some(copy) if copy.version >= version => Ok(false),
            _ => ledger.is_member(sale, position, user).await,
        }
    }

    /// Reads the list of `key` whole unless the copy here is of `version` or later.
    pub async fn keep_up(
        &self,
        ledger: &dyn PhaseLedger,
        key: ListKey,
        version: u64,
    ) -> LedgerResult<()> {
        if self.copy(key).is_some_and(|c| c.version >= version) {
            return Ok(());
        }
        let copy = Arc::new(self.read(ledger, key, version).await?);
        self.lists
            .write()
            .expect("member lists lock")
            .insert(key, copy);
        Ok(())
    }

    /// Forgets the copies of lists not in `live` (their phase is over, or their sale).
    pub fn keep_only(&self, live: &HashSet<ListKey>) {
        self.lists
            .write()
            .expect("member lists lock")
            .retain(|key, _| live.contains(key));
    }

    /// The lists of `sale` kept here.
    pub fn kept_of(&self, sale: SaleId) -> Vec<ListKey> {
        let lists = self.lists.read().expect("member lists lock");
        lists.keys().filter(|(s, _)| *s == sale).copied().collect()
    }

    fn copy(&self, key: ListKey) -> Option<Arc<Copy>> {
        self.lists
            .read()
            .expect("member lists lock")
            .get(&key)
            .cloned()
    }

    /// The whole list from the ledger, a page at a time; `version` is the count it had.
    async fn read(
        &self,
        ledger: &dyn PhaseLedger,
        (sale, position): ListKey,
        version: u64,
    ) -> LedgerResult<Copy> {
        metrics::counter!("sluice_phase_list_reads_total").increment(1);
        let mut hashes = Vec::with_capacity(version as usize);
        let mut after: Option<String> = None;
        loop {
            let page = ledger
                .members(sale, position, after.as_deref(), PAGE)
                .await?;
            hashes.extend(page.iter().map(|u| self.keys.hash_one(u.as_str())));
            if page.len() < PAGE as usize {
                break;
            }
            after = page.last().cloned();
        }
        hashes.sort_unstable();
        Ok(Copy { version, hashes })
    }
}
