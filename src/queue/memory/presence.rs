//! The last sign of life of each waiting attempt, when abandonment is on (the in-process twin
//! of the `seen` sorted set). Kept in two indexes so that the abandonment reaper finds the
//! longest-silent attempts without scanning everyone who waits: a ticket opening queues
//! millions, and the reaper runs every second under the sale's lock.

use std::collections::{BTreeSet, HashMap};

use uuid::Uuid;

#[derive(Default)]
pub(super) struct Presence {
    /// Attempt → its last sign of life (ms): to find an attempt's entry in `by_time`.
    last_seen: HashMap<Uuid, i64>,
    /// (last sign of life, attempt), oldest first: the reaper's order.
    by_time: BTreeSet<(i64, Uuid)>,
}

impl Presence {
    /// Records a sign of life at `at_ms`, whether or not the attempt was tracked.
    pub(super) fn touch(&mut self, attempt: Uuid, at_ms: i64) {
        if let Some(previous) = self.last_seen.insert(attempt, at_ms) {
            self.by_time.remove(&(previous, attempt));
        }
        self.by_time.insert((at_ms, attempt));
    }

    /// Records a sign of life only for an attempt already tracked (a waiting one).
    pub(super) fn refresh(&mut self, attempt: Uuid, at_ms: i64) {
        if self.last_seen.contains_key(&attempt) {
            self.touch(attempt, at_ms);
        }
    }

    /// Stops tracking the attempt (admitted, left or abandoned).
    pub(super) fn forget(&mut self, attempt: Uuid) {
        if let Some(at) = self.last_seen.remove(&attempt) {
            self.by_time.remove(&(at, attempt));
        }
    }

    /// Up to `limit` attempts silent since `cutoff_ms` or before, the longest-silent first;
    /// they stay tracked until forgotten.
    pub(super) fn silent_since(&self, cutoff_ms: i64, limit: usize) -> Vec<Uuid> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at <= cutoff_ms)
            .take(limit)
            .map(|(_, attempt)| *attempt)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn the_longest_silent_come_first_and_a_touch_moves_an_attempt_back() {
        let mut p = Presence::default();
        p.touch(id(1), 100);
        p.touch(id(2), 50);
        p.touch(id(3), 300);
        assert_eq!(p.silent_since(200, 10), vec![id(2), id(1)]);
        assert_eq!(p.silent_since(200, 1), vec![id(2)]);
        p.touch(id(2), 400);
        assert_eq!(p.silent_since(200, 10), vec![id(1)]);
        assert_eq!(p.silent_since(1000, 10), vec![id(1), id(3), id(2)]);
    }

    #[test]
    fn refresh_ignores_untracked_attempts_and_forget_drops_both_indexes() {
        let mut p = Presence::default();
        p.refresh(id(1), 10);
        assert!(p.silent_since(i64::MAX, 10).is_empty());
        p.touch(id(1), 10);
        p.refresh(id(1), 20);
        assert_eq!(p.silent_since(15, 10), Vec::<Uuid>::new());
        p.forget(id(1));
        p.forget(id(1));
        assert!(p.silent_since(i64::MAX, 10).is_empty());
        assert!(p.last_seen.is_empty() && p.by_time.is_empty());
    }
}
