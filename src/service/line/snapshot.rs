//! One replica's picture of a sale's waiting line as of its last refresh, and the places
//! computed from it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::queue::{LineDigest, LineFigures, Renumbering};

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
    /// How the lottery's draw made this numbering from the one before, once learned: the
    /// tickets of before the draw find their places here too. Shared with the next snapshot
    /// while the numbering stands.
    renumbered: Option<Arc<Renumbered>>,
}

/// What the lottery's draw made of a line's serials, as a replica learned it from the store
/// ([`crate::queue::QueueStore::renumbered`]).
#[derive(Debug)]
pub struct Renumbered {
    pub drawn: Renumbering,
    /// The numbering the draw made.
    pub epoch: String,
    /// Each serial's new one from `drawn.first` on, as its distance from `drawn.first` plus
    /// one (0 for a serial nobody waiting held): 4 bytes a serial.
    serials: Vec<u32>,
}

impl Renumbered {
    /// `serials`: each one's new serial from `drawn.first` on, 0 for none; those not given
    /// are 0. `None` when the draw's range is too wide to keep this way.
    pub fn new(drawn: Renumbering, epoch: String, serials: &[u64]) -> Option<Self> {
        let mut kept = vec![0u32; Self::width(&drawn)?];
        for (slot, serial) in kept.iter_mut().zip(serials) {
            if *serial >= drawn.first && *serial <= drawn.last {
                *slot = (*serial - drawn.first + 1) as u32;
            }
        }
        Some(Renumbered {
            drawn,
            epoch,
            serials: kept,
        })
    }

    /// How many serials the draw renumbered, if few enough to keep this way.
    pub fn width(drawn: &Renumbering) -> Option<usize> {
        let width = drawn.last.checked_sub(drawn.first)? + 1;
        u32::try_from(width).ok()?;
        usize::try_from(width).ok()
    }

    /// This is what the draw `drawn` made of numbering `epoch`'s predecessor.
    fn made(&self, drawn: &Renumbering, epoch: &str) -> bool {
        self.drawn == *drawn && self.epoch == epoch
    }

    /// The serial of the draw's numbering that `serial` of the one before it became.
    fn serial_now(&self, serial: u64) -> Option<u64> {
        let at = serial.checked_sub(self.drawn.first)?;
        match *self.serials.get(usize::try_from(at).ok()?)? {
            0 => None,
            n => Some(self.drawn.first + u64::from(n) - 1),
        }
    }
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
            renumbered: None,
        }
    }

    /// The next snapshot, from a refresh sent at `as_of` with this one's epoch and cursor
    /// ([`LineFigures::epoch`], [`LineSnapshot::logged`]). `None` when the store does not
    /// hold the sale (nothing can be answered from memory then).
    pub fn next(&self, digest: &LineDigest, as_of: DateTime<Utc>, most: usize) -> Option<Self> {
        if !digest.figures.known {
            return None;
        }
        // The departure log goes on across the lottery's draw made from this numbering.
        let same_log = digest.figures.epoch == self.figures.epoch
            || digest
                .renumbered
                .as_ref()
                .is_some_and(|d| d.from_epoch == self.figures.epoch);
        let restarted = !same_log || digest.from != self.logged;
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
        let renumbered = match (&self.renumbered, &digest.renumbered) {
            (Some(known), Some(drawn)) if known.made(drawn, &digest.figures.epoch) => {
                Some(Arc::clone(known))
            }
            _ => None,
        };
        Some(LineSnapshot {
            as_of,
            figures: digest.figures.clone(),
            departures,
            logged,
            caught_up,
            renumbered,
        })
    }

    /// This snapshot, knowing how the lottery's draw made its numbering.
    pub fn learned(mut self, renumbered: Arc<Renumbered>) -> Self {
        self.renumbered = Some(renumbered);
        self
    }

    /// The lottery's draw `drawn`, which made this numbering, is not learned yet.
    pub fn lacks(&self, drawn: &Renumbering) -> bool {
        !self
            .renumbered
            .as_ref()
            .is_some_and(|known| known.made(drawn, &self.figures.epoch))
    }

    /// `serial` of `epoch` in this snapshot's numbering: itself in this numbering; the one the
    /// lottery's draw gave its holder if it is of the numbering before the draw; `None` when
    /// it is of another one, or its holder was not waiting at the draw (the store says what
    /// became of them).
    pub fn serial_now(&self, serial: u64, epoch: &str) -> Option<u64> {
        if epoch == self.figures.epoch {
            return Some(serial);
        }
        let renumbered = self.renumbered.as_ref()?;
        if epoch != renumbered.drawn.from_epoch || renumbered.epoch != self.figures.epoch {
            return None;
        }
        renumbered.serial_now(serial)
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
            renumbered: None,
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
            .next(&digest("e1", 1, 10, 0, &[7, 3]), now, 100)
            .unwrap();
        assert_eq!(first.place(5, "e1"), Some(exact(1, 5, &[3, 7])));
        assert_eq!(first.place(10, "e1"), Some(8));
        assert_eq!(first.place(3, "e1"), None, "departed");
        // Admission passed 1..=4; 9 left; only the new one travels.
        let second = first.next(&digest("e1", 5, 12, 2, &[9]), now, 100).unwrap();
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
            .next(&digest("e1", 1, 10, 0, &[2, 3]), now, 100)
            .unwrap();
        let drawn = first.next(&digest("e2", 1, 10, 0, &[]), now, 100).unwrap();
        assert_eq!(drawn.place(4, "e2"), Some(4));
        assert_eq!(drawn.place(2, "e2"), Some(2));
        let forgotten = first.next(&digest("e1", 1, 10, 0, &[5]), now, 100).unwrap();
        assert_eq!(forgotten.place(2, "e1"), Some(2), "the old log is dropped");
        assert_eq!(forgotten.place(5, "e1"), None);
    }

    #[test]
    fn a_learned_draw_maps_the_serials_of_before_it_while_its_numbering_stands() {
        let now = Utc::now();
        let drawn = Renumbering {
            from_epoch: "e1".into(),
            first: 3,
            last: 6,
        };
        let made = LineDigest {
            renumbered: Some(drawn.clone()),
            ..digest("e2", 3, 8, 0, &[4])
        };
        let view = LineSnapshot::empty().next(&made, now, 100).unwrap();
        assert!(view.lacks(&drawn));
        // 3 -> 5, 4 gone before the draw, 5 -> 3, 6 -> 6.
        let learned = Renumbered::new(drawn.clone(), "e2".into(), &[5, 0, 3, 6]).unwrap();
        let view = view.learned(Arc::new(learned));
        assert!(!view.lacks(&drawn));
        assert_eq!(view.serial_now(3, "e1"), Some(5));
        assert_eq!(view.serial_now(4, "e1"), None, "nobody's at the draw");
        assert_eq!(view.serial_now(5, "e1"), Some(3));
        assert_eq!(view.serial_now(7, "e1"), None, "past the draw's range");
        assert_eq!(view.serial_now(2, "e1"), None, "before it");
        assert_eq!(
            view.serial_now(4, "e2"),
            Some(4),
            "the new numbering as it is"
        );
        assert_eq!(view.serial_now(3, "e0"), None, "another numbering");
        let next = view.next(&made, now, 100).unwrap();
        assert!(!next.lacks(&drawn), "kept while the numbering stands");
        assert_eq!(next.serial_now(6, "e1"), Some(6));
        // The departure log goes on across the draw: a view of the numbering it was made from
        // keeps its departures.
        let before = LineSnapshot::empty()
            .next(&digest("e1", 3, 8, 0, &[4]), now, 100)
            .unwrap();
        let across = LineDigest {
            renumbered: Some(drawn.clone()),
            ..digest("e2", 3, 8, 1, &[7])
        };
        let across = before.next(&across, now, 100).unwrap();
        assert_eq!(across.logged(), 2);
        assert_eq!(across.place(8, "e2"), Some(4), "4 and 7 gone before 8");
        let rebuilt = next.next(&digest("e3", 3, 8, 0, &[]), now, 100).unwrap();
        assert_eq!(
            rebuilt.serial_now(3, "e1"),
            None,
            "dropped with its numbering"
        );
        let wide = Renumbering {
            last: u64::from(u32::MAX) + 3,
            ..drawn
        };
        assert!(Renumbered::new(wide, "e2".into(), &[]).is_none());
    }

    #[test]
    fn a_view_behind_by_more_than_one_refresh_carries_says_nothing_until_caught_up() {
        let now = Utc::now();
        let behind = LineSnapshot::empty()
            .next(&digest("e", 1, 10, 0, &[2, 3]), now, 2)
            .unwrap();
        assert_eq!(behind.place(9, "e"), None);
        let caught = behind.next(&digest("e", 1, 10, 2, &[4]), now, 2).unwrap();
        assert_eq!(caught.place(9, "e"), Some(6));
        let unknown = LineDigest {
            figures: LineFigures::unknown(),
            ..digest("e", 1, 10, 3, &[])
        };
        assert!(caught.next(&unknown, now, 2).is_none());
    }
}
