//! The signs of life a replica gathers for one line between two refreshes: the serials of the
//! waiting users who asked, all of one numbering, so that no serial is written as a sign of
//! life of the user who holds it in another (after the lottery's draw a serial names someone
//! else). Each serial is gathered at most once a window of refreshes: the abandonment reaper
//! needs to know that a user asked within its time, not each time they asked, and every sign
//! written costs the sale's Redis primary (see [`seen_window`]).

/// The most signs of life one refresh carries; more wait for the next (a replica gathers one
/// per waiting user who asks, and users ask every few seconds at most).
const MOST: usize = 200_000;

/// Serials past this are gathered every time: a window is remembered per serial, 2 bytes each,
/// so a line's view keeps at most 32 MB of them.
const MOST_REMEMBERED: u64 = 16_000_000;

/// How many refreshes a window of the gathering spans, for abandonment after `abandon_after`
/// and a refresh every `refresh_every`: a third of the abandonment time. A user who asks at
/// least every third of it (as status answers tell them to) is then written at least once
/// every two thirds of it plus a refresh: within the abandonment time while a refresh is
/// shorter than a third of it. 1 (every refresh) when the window would be shorter than two.
pub fn seen_window(abandon_after: std::time::Duration, refresh_every: std::time::Duration) -> u64 {
    let refreshes = abandon_after.as_millis() / (3 * refresh_every.as_millis()).max(1);
    if refreshes < 2 {
        1
    } else {
        refreshes as u64
    }
}

/// Serials of one numbering (`epoch`) whose holders asked since the last refresh.
#[derive(Debug, Default)]
pub struct SignsOfLife {
    /// The numbering the serials are of: the first gathered one's.
    epoch: String,
    serials: Vec<u64>,
    /// For each serial of `epoch` (by its number), the window it was last gathered in (plus
    /// one, wrapping; 0 for none).
    gathered_in: Vec<u16>,
}

impl SignsOfLife {
    /// Records that the holder of `serial` (of `epoch`) asked in `window` (a count of the
    /// line's refresh windows), unless they did in that window before. A serial of another
    /// numbering than those gathered is dropped: it comes from an answer given while the view
    /// changed numberings, and its holder asks again within the abandonment time.
    pub fn push(&mut self, serial: u64, epoch: &str, window: u64) {
        if self.epoch != epoch {
            if !self.serials.is_empty() {
                return;
            }
            epoch.clone_into(&mut self.epoch);
            self.gathered_in.clear();
        }
        if self.serials.len() >= MOST {
            return;
        }
        if serial < MOST_REMEMBERED {
            let mark = (window % u64::from(u16::MAX)) as u16 + 1;
            let at = serial as usize;
            if at >= self.gathered_in.len() {
                self.gathered_in.resize(at + 1, 0);
            }
            if self.gathered_in[at] == mark {
                return;
            }
            self.gathered_in[at] = mark;
        }
        self.serials.push(serial);
    }

    /// The serials gathered, if they are of `epoch` (the numbering the refresh is sent for;
    /// others are dropped); the gathering starts again.
    pub fn take(&mut self, epoch: &str) -> Vec<u64> {
        let serials = std::mem::take(&mut self.serials);
        if self.epoch == epoch {
            serials
        } else {
            Vec::new()
        }
    }

    /// Puts back the serials of a refresh that failed (they go with the next one), if the
    /// gathering is still of their numbering.
    pub fn put_back(&mut self, serials: Vec<u64>, epoch: &str) {
        if self.epoch == epoch || self.serials.is_empty() {
            epoch.clone_into(&mut self.epoch);
            let room = MOST.saturating_sub(self.serials.len());
            self.serials.extend(serials.into_iter().take(room));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn signs_of_one_numbering_are_gathered_and_others_dropped() {
        let mut signs = SignsOfLife::default();
        signs.push(4, "e1", 0);
        signs.push(7, "e1", 0);
        signs.push(9, "e2", 0);
        assert_eq!(signs.take("e1"), [4, 7], "the other numbering's dropped");
        signs.push(9, "e2", 1);
        signs.push(4, "e1", 1);
        assert_eq!(
            signs.take("e1"),
            Vec::<u64>::new(),
            "not of the refresh's numbering"
        );
        signs.push(5, "e2", 2);
        signs.put_back(vec![3], "e2");
        assert_eq!(signs.take("e2"), [5, 3]);
        assert_eq!(signs.take("e2"), Vec::<u64>::new());
    }

    #[test]
    fn a_serial_is_gathered_once_a_window() {
        let mut signs = SignsOfLife::default();
        signs.push(4, "e1", 10);
        signs.push(4, "e1", 10);
        signs.push(5, "e1", 10);
        assert_eq!(signs.take("e1"), [4, 5]);
        signs.push(4, "e1", 10);
        assert_eq!(
            signs.take("e1"),
            Vec::<u64>::new(),
            "asked in the same window"
        );
        signs.push(4, "e1", 11);
        signs.push(MOST_REMEMBERED + 1, "e1", 11);
        signs.push(MOST_REMEMBERED + 1, "e1", 11);
        assert_eq!(
            signs.take("e1"),
            [4, MOST_REMEMBERED + 1, MOST_REMEMBERED + 1]
        );
        // A new numbering forgets the windows of the old one.
        signs.push(4, "e2", 11);
        assert_eq!(signs.take("e2"), [4]);
    }

    #[test]
    fn a_window_is_a_third_of_the_abandonment_time_in_refreshes() {
        let s = Duration::from_secs;
        assert_eq!(seen_window(s(120), s(1)), 40);
        assert_eq!(seen_window(s(60), s(2)), 10);
        assert_eq!(seen_window(s(6), s(1)), 2);
        assert_eq!(seen_window(s(5), s(1)), 1, "shorter than two refreshes");
        assert_eq!(seen_window(s(3), s(1)), 1);
    }
}
