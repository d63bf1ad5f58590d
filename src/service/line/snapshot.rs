//! One replica's picture of a sale's waiting line as of its last refresh, and the places
//! computed from it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::queue::{LineDigest, LineFigures};

/// The line as of `as_of`: exact then, for every serial of its epoch.
#[derive(Debug, Clone)]
pub struct LineSnapshot {
    /// When the refresh that made it was sent: its figures are at least this fresh.
    pub as_of: DateTime<Utc>,
    pub figures: LineFigures,
    /// Every serial of the epoch that left out of turn, sorted: a place is a serial's distance
    /// from the head less the departures between (a rank: two binary searches). Shared with
    /// the next snapshot when no one left in between.
    departures: Arc<Vec<u64>>,
    /// How many of the store's departure log `departures` holds (the next refresh's cursor).
    logged: u64,
    /// The store sent every departure it had: places are exact. False while a view that fell
    /// far behind catches up (its answers come from the store meanwhile).
    caught_up: bool,
}

impl LineSnapshot {
    /// The first snapshot of a line.
    pub fn empty() -> Self {
        LineSnapshot {
            as_of: DateTime::<Utc>::MIN_UTC,
            figures: LineFigures::unknown(),
            departures: Arc::default(),
            logged: 0,
            caught_up: false,
        }
    }

    /// The next snapshot, from a refresh sent at `as_of` with this one's epoch and cursor
    /// ([`LineFigures::epoch`], [`LineSnapshot::logged`]). `None` when the store does not
    /// hold the sale (nothing can be answered from memory then).
    pub fn next(&self, digest: LineDigest, as_of: DateTime<Utc>, most: usize) -> Option<Self> {
        if !digest.figures.known {
            return None;
        }
        let restarted = digest.figures.epoch != self.figures.epoch || digest.from != self.logged;
        let mut departures = if restarted {
            Arc::default()
        } else {
            Arc::clone(&self.departures)
        };
        let logged = digest.from + digest.departures.len() as u64;
        let caught_up = digest.departures.len() < most;
        if !digest.departures.is_empty() {
            let merged = Arc::make_mut(&mut departures);
            merged.extend_from_slice(&digest.departures);
            merged.sort_unstable();
        }
        Some(LineSnapshot {
            as_of,
            figures: digest.figures,
            departures,
            logged,
            caught_up,
        })
    }

    /// How many departures of the store's log this snapshot holds.
    pub fn logged(&self) -> u64 {
        self.logged
    }

    /// The 1-based place of `serial` (of `epoch`) as of this snapshot, if it was waiting then.
    /// `None` when it was not, or when this snapshot cannot say: admitted, left, abandoned
    /// (below the head or departed), of another numbering, or not caught up. Then something
    /// happened to the attempt and the store says what.
    pub fn place(&self, serial: u64, epoch: &str) -> Option<u64> {
        let LineFigures {
            head,
            last,
            epoch: numbered,
            ..
        } = &self.figures;
        if !self.caught_up || epoch != numbered || serial < *head || serial > *last {
            return None;
        }
        let departures = self.departures.as_slice();
        if departures.binary_search(&serial).is_ok() {
            return None;
        }
        let ahead_from = departures.partition_point(|d| d < head);
        let ahead_to = departures.partition_point(|d| *d < serial);
        Some(serial - head + 1 - (ahead_to - ahead_from) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(epoch: &str, head: u64, last: u64, from: u64, departures: &[u64]) -> LineDigest {
        LineDigest {
            figures: LineFigures {
                known: true,
                epoch: epoch.into(),
                head,
                last,
                ..LineFigures::unknown()
            },
            from,
            departures: departures.to_vec(),
        }
    }

    /// The place a store computes: serials from the head to it, less those gone between.
    fn exact(head: u64, serial: u64, gone: &[u64]) -> u64 {
        serial - head + 1 - gone.iter().filter(|g| (head..serial).contains(g)).count() as u64
    }

    #[test]
    fn places_equal_the_stores_across_refreshes_that_bring_departures() {
        let now = Utc::now();
        let first = LineSnapshot::empty()
            .next(digest("e1", 1, 10, 0, &[7, 3]), now, 100)
            .unwrap();
        assert_eq!(first.place(5, "e1"), Some(exact(1, 5, &[3, 7])));
        assert_eq!(first.place(10, "e1"), Some(8));
        assert_eq!(first.place(3, "e1"), None, "departed");
        // Admission passed 1..=4; 9 left; only the new one travels.
        let second = first.next(digest("e1", 5, 12, 2, &[9]), now, 100).unwrap();
        assert_eq!(second.logged(), 3);
        assert_eq!(second.place(4, "e1"), None, "admitted");
        assert_eq!(second.place(12, "e1"), Some(exact(5, 12, &[3, 7, 9])));
        assert_eq!(second.place(6, "e1"), Some(2));
        assert_eq!(
            second.place(13, "e1"),
            None,
            "not handed out as of the refresh"
        );
        assert_eq!(second.place(6, "e0"), None, "another numbering");
    }

    #[test]
    fn a_new_epoch_or_a_lost_log_starts_the_departures_again() {
        let now = Utc::now();
        let first = LineSnapshot::empty()
            .next(digest("e1", 1, 10, 0, &[2, 3]), now, 100)
            .unwrap();
        let drawn = first.next(digest("e2", 1, 10, 0, &[]), now, 100).unwrap();
        assert_eq!(drawn.place(4, "e2"), Some(4));
        assert_eq!(drawn.place(2, "e2"), Some(2));
        let forgotten = first.next(digest("e1", 1, 10, 0, &[5]), now, 100).unwrap();
        assert_eq!(forgotten.place(2, "e1"), Some(2), "the old log is dropped");
        assert_eq!(forgotten.place(5, "e1"), None);
    }

    #[test]
    fn a_view_behind_by_more_than_one_refresh_carries_says_nothing_until_caught_up() {
        let now = Utc::now();
        let behind = LineSnapshot::empty()
            .next(digest("e", 1, 10, 0, &[2, 3]), now, 2)
            .unwrap();
        assert_eq!(behind.place(9, "e"), None);
        let caught = behind.next(digest("e", 1, 10, 2, &[4]), now, 2).unwrap();
        assert_eq!(caught.place(9, "e"), Some(6));
        let unknown = LineDigest {
            figures: LineFigures::unknown(),
            ..digest("e", 1, 10, 3, &[])
        };
        assert!(caught.next(unknown, now, 2).is_none());
    }
}
