//! This replica's copy of each list phase's members, so that a presale of hundreds of
//! thousands joining at once costs the ledger nothing per join: a join in a list phase asks
//! the copy, kept as a sorted array of 64-bit keyed hashes of the user ids (8 bytes a member:
//! 8 MB for a million), which a binary search answers. The ledger stays the truth: a copy is
//! of one version of the list (`Phase::members`, the count the ledger keeps with the phase,
//! which the offer carries from the ledger at most a second old), and a join that finds the
//! list at another version reads it whole again first, one reader at a time, a page at a time.
//! Reads of whole lists are counted (`sluice_phase_list_reads_total`).
//!
//! The hash is SipHash with keys drawn at start: a user cannot choose an id that collides
//! with a member's (ids come from the identity provider), and with a million members one
//! id in 2^44 would by chance.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, RwLock};

use crate::domain::{SaleId, UserId};
use crate::ledger::{LedgerResult, PhaseLedger};

/// User ids read a call when a list is read whole.
const PAGE: u32 = 50_000;

/// How long a copy is kept: a sale's presale is over by then, and a list still in use is
/// read again.
const KEEP: std::time::Duration = std::time::Duration::from_secs(3600);

/// One list phase's members, as of one version of the list.
struct Copy {
    /// The list's `Phase::members` when it was read.
    version: u64,
    /// The members' hashes, sorted.
    hashes: Vec<u64>,
    read_at: std::time::Instant,
}

#[derive(Default)]
pub struct MemberLists {
    keys: RandomState,
    lists: RwLock<HashMap<(SaleId, u32), Arc<Copy>>>,
    /// One reader of a whole list at a time (the joins that find it stale wait for it).
    reading: tokio::sync::Mutex<()>,
}

impl MemberLists {
    /// Whether `user` is on list phase `position` of `sale`, whose list is at `version`.
    pub async fn contains(
        &self,
        ledger: &dyn PhaseLedger,
        sale: SaleId,
        position: u32,
        version: u64,
        user: &UserId,
    ) -> LedgerResult<bool> {
        let hash = self.keys.hash_one(user.as_str());
        if let Some(copy) = self.copy(sale, position, version) {
            return Ok(copy.hashes.binary_search(&hash).is_ok());
        }
        let _reading = self.reading.lock().await;
        // Read while this one waited?
        if let Some(copy) = self.copy(sale, position, version) {
            return Ok(copy.hashes.binary_search(&hash).is_ok());
        }
        let copy = Arc::new(self.read(ledger, sale, position, version).await?);
        let found = copy.hashes.binary_search(&hash).is_ok();
        let mut lists = self.lists.write().expect("member lists lock");
        // One copy a sale (it runs one phase at a time), none kept past its time.
        lists.retain(|(s, _), c| *s != sale && c.read_at.elapsed() < KEEP);
        lists.insert((sale, position), copy);
        Ok(found)
    }

    /// The copy of the list at `version`, if this replica has it.
    fn copy(&self, sale: SaleId, position: u32, version: u64) -> Option<Arc<Copy>> {
        let lists = self.lists.read().expect("member lists lock");
        lists
            .get(&(sale, position))
            .filter(|c| c.version == version)
            .cloned()
    }

    /// The whole list from the ledger, a page at a time.
    async fn read(
        &self,
        ledger: &dyn PhaseLedger,
        sale: SaleId,
        position: u32,
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
        Ok(Copy {
            version,
            hashes,
            read_at: std::time::Instant::now(),
        })
    }
}
