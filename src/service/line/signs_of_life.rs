//! The signs of life a replica gathers for one line between two refreshes: the serials of the
//! waiting users who asked, all of one numbering, so that no serial is written as a sign of
//! life of the user who holds it in another (after the lottery's draw a serial names someone
//! else).

/// The most signs of life one refresh carries; more wait for the next (a replica gathers one
/// per waiting user who asks, and users ask every few seconds at most).
const MOST: usize = 200_000;

/// Serials of one numbering (`epoch`) whose holders asked since the last refresh.
#[derive(Debug, Default)]
pub struct SignsOfLife {
    /// The numbering the serials are of: the first gathered one's.
    epoch: String,
    serials: Vec<u64>,
}

impl SignsOfLife {
    /// Records that the holder of `serial` (of `epoch`) asked. A serial of another numbering
    /// than those gathered is dropped: it comes from an answer given while the view changed
    /// numberings, and its holder asks again within the abandonment time.
    pub fn push(&mut self, serial: u64, epoch: &str) {
        if self.epoch != epoch {
            if !self.serials.is_empty() {
                return;
            }
            epoch.clone_into(&mut self.epoch);
        }
        if self.serials.len() < MOST {
            self.serials.push(serial);
        }
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
        for serial in serials {
            self.push(serial, epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_of_one_numbering_are_gathered_and_others_dropped() {
        let mut signs = SignsOfLife::default();
        signs.push(4, "e1");
        signs.push(7, "e1");
        signs.push(9, "e2");
        assert_eq!(signs.take("e1"), [4, 7], "the other numbering's dropped");
        signs.push(9, "e2");
        signs.push(4, "e1");
        assert_eq!(
            signs.take("e1"),
            Vec::<u64>::new(),
            "not of the refresh's numbering"
        );
        signs.push(5, "e2");
        signs.put_back(vec![3], "e2");
        assert_eq!(signs.take("e2"), [5, 3]);
        assert_eq!(signs.take("e2"), Vec::<u64>::new());
    }
}
