//! Warnings that an outage would repeat once per request: while Redis or the database is away
//! every request fails alike, and a line for each would flood the log (and cost the CPU of
//! writing it) when the counters already count them. The first of each second is logged, with
//! how many were left out since the one before: [`warn_throttled!`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::Instant;

/// What "this second" counts from.
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `tracing::warn!` at most once a second from this call site, with `left_out` added: how many
/// it left out since the one before.
macro_rules! warn_throttled {
    ($($args:tt)+) => {{
        static THROTTLE: $crate::telemetry::Throttle = $crate::telemetry::Throttle::new();
        if let Some(left_out) = THROTTLE.allow() {
            tracing::warn!(left_out, $($args)+);
        }
    }};
}
pub(crate) use warn_throttled;

/// One kind of warning, at most one logged a second.
pub struct Throttle {
    /// The second (since [`STARTED`], plus one: zero is "never") of the last one logged.
    logged_in: AtomicU64,
    /// Warnings left out since the last one logged.
    left_out: AtomicU64,
}

impl Throttle {
    pub const fn new() -> Self {
        Throttle {
            logged_in: AtomicU64::new(0),
            left_out: AtomicU64::new(0),
        }
    }

    /// `Some(how many were left out since the last one logged)` when this one is to be logged.
    pub fn allow(&self) -> Option<u64> {
        self.allow_in(STARTED.elapsed().as_secs() + 1)
    }

    fn allow_in(&self, second: u64) -> Option<u64> {
        let last = self.logged_in.load(Ordering::Relaxed);
        if last != second
            && self
                .logged_in
                .compare_exchange(last, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.left_out.swap(0, Ordering::Relaxed));
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_a_second_is_logged_with_the_count_of_those_left_out() {
        let throttle = Throttle::new();
        assert_eq!(throttle.allow_in(1), Some(0));
        assert_eq!(throttle.allow_in(1), None);
        assert_eq!(throttle.allow_in(1), None);
        assert_eq!(throttle.allow_in(3), Some(2));
        assert_eq!(throttle.allow_in(3), None);
        assert_eq!(throttle.allow_in(4), Some(1));
    }
}
