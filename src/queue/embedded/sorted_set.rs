//! A sorted set as Redis keeps one: each member's score, and the members in (score, member)
//! order, which ZRANGEBYSCORE, ZCOUNT and ZPOPMIN walk. Members are also kept in byte order,
//! so that ZSCAN resumes after the last member it returned.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::Bytes;

/// A score in the set's order: a total order on floats (no NaN is ever stored).
#[derive(Clone, Copy)]
pub(super) struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Score {
    /// A score as Redis reads one: a float, `inf`, `+inf` or `-inf`; never NaN.
    pub fn parse(b: &[u8]) -> Option<f64> {
        let s = std::str::from_utf8(b).ok()?;
        let v = match s.to_ascii_lowercase().as_str() {
            "inf" | "+inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => s.parse::<f64>().ok()?,
        };
        (!v.is_nan()).then_some(v)
    }

    /// A score as Redis writes one: an integral score as an integer, else the shortest form
    /// that reads back the same.
    pub fn format(v: f64) -> String {
        if v.is_infinite() {
            return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
        }
        if v.fract() == 0.0 && v.abs() < 1e17 {
            return format!("{}", v as i64);
        }
        format!("{v}")
    }
}

/// A score range of ZRANGEBYSCORE, ZCOUNT and ZREMRANGEBYSCORE: each end inclusive unless
/// written with `(`.
pub(super) struct ScoreRange {
    min: Bound<f64>,
    max: Bound<f64>,
}

impl ScoreRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        fn end(b: &[u8]) -> Option<Bound<f64>> {
            match b.strip_prefix(b"(") {
                Some(rest) => Score::parse(rest).map(Bound::Excluded),
                None => Score::parse(b).map(Bound::Included),
            }
        }
        Some(ScoreRange {
            min: end(min)?,
            max: end(max)?,
        })
    }

    fn above_min(&self, s: f64) -> bool {
        match self.min {
            Bound::Included(m) => s >= m,
            Bound::Excluded(m) => s > m,
            Bound::Unbounded => true,
        }
    }

    fn below_max(&self, s: f64) -> bool {
        match self.max {
            Bound::Included(m) => s <= m,
            Bound::Excluded(m) => s < m,
            Bound::Unbounded => true,
        }
    }
}

#[derive(Default)]
pub(super) struct SortedSet {
    /// Each member's score, in member order (ZSCORE, ZSCAN).
    scores: BTreeMap<Bytes, f64>,
    /// The members in score order, ties by member (ranges, ZPOPMIN).
    order: BTreeSet<(Score, Bytes)>,
}

impl SortedSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Adds the member, or moves it to `score`.
    pub fn insert(&mut self, member: Bytes, score: f64) {
        if let Some(old) = self.scores.insert(member.clone(), score) {
            self.order.remove(&(Score(old), member.clone()));
        }
        self.order.insert((Score(score), member));
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(old) => {
                self.order.remove(&(Score(old), member.to_vec()));
                true
            }
            None => false,
        }
    }

    pub fn pop_min(&mut self) -> Option<(f64, Bytes)> {
        let (Score(s), m) = self.order.pop_first()?;
        self.scores.remove(&m);
        Some((s, m))
    }

    /// The members whose scores fall in `range`, lowest first.
    pub fn range<'a>(
        &'a self,
        range: &'a ScoreRange,
    ) -> impl Iterator<Item = (f64, &'a Bytes)> + 'a {
        let start = match range.min {
            Bound::Included(m) | Bound::Excluded(m) => Bound::Included((Score(m), Vec::new())),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.order
            .range((start, Bound::Unbounded))
            .map(|(Score(s), m)| (*s, m))
            .skip_while(|(s, _)| !range.above_min(*s))
            .take_while(|(s, _)| range.below_max(*s))
    }

    /// The members after `after` in byte order (all, for none), with their scores.
    pub fn members_after<'a>(
        &'a self,
        after: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a Bytes, f64)> + 'a {
        let from = match after {
            Some(m) => Bound::Excluded(m.to_vec()),
            None => Bound::Unbounded,
        };
        self.scores
            .range((from, Bound::Unbounded))
            .map(|(m, s)| (m, *s))
    }

    /// Every member with its score, in score order (the journal's snapshot).
    pub fn iter(&self) -> impl Iterator<Item = (f64, &Bytes)> {
        self.order.iter().map(|(Score(s), m)| (*s, m))
    }
}
