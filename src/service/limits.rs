//! Per-user request limits on the hot, unauthenticated-cost paths (join, status, events), so
//! one client cannot poll a waiting room to death. GCRA (governor), keyed by user id, in
//! process: each replica limits what reaches it.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::LimitsConfig;
use crate::domain::UserId;

/// The limited kinds of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    Join,
    Status,
}

pub struct Limits {
    join: Option<DefaultKeyedRateLimiter<UserId>>,
    status: Option<DefaultKeyedRateLimiter<UserId>>,
    clock: DefaultClock,
}

fn limiter(per_second: u32, burst: u32) -> Option<DefaultKeyedRateLimiter<UserId>> {
    let rate = NonZeroU32::new(per_second)?;
    let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
    Some(RateLimiter::keyed(
        Quota::per_second(rate).allow_burst(burst),
    ))
}

impl Limits {
    pub fn new(config: &LimitsConfig) -> Self {
        Limits {
            join: limiter(config.join_per_second, config.join_burst),
            status: limiter(config.status_per_second, config.status_burst),
            clock: DefaultClock::default(),
        }
    }

    /// `Err(wait)` when the user must wait before asking again.
    pub fn check(&self, kind: Limited, user: &UserId) -> Result<(), Duration> {
        let limiter = match kind {
            Limited::Join => &self.join,
            Limited::Status => &self.status,
        };
        match limiter {
            None => Ok(()),
            Some(l) => l
                .check_key(user)
                .map_err(|not_until| not_until.wait_time_from(self.clock.now())),
        }
    }

    /// Forgets users who have been quiet long enough to be back at a full burst.
    pub fn shrink(&self) {
        for l in [&self.join, &self.status].into_iter().flatten() {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_allowed_then_the_user_waits() {
        let limits = Limits::new(&LimitsConfig {
            join_per_second: 1,
            join_burst: 3,
            status_per_second: 0,
            status_burst: 0,
        });
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        for _ in 0..3 {
            assert_eq!(limits.check(Limited::Join, &alice), Ok(()));
        }
        let wait = limits.check(Limited::Join, &alice).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(
            limits.check(Limited::Join, &bob),
            Ok(()),
            "limits are per user"
        );
        for _ in 0..100 {
            assert_eq!(
                limits.check(Limited::Status, &alice),
                Ok(()),
                "0 turns a limit off"
            );
        }
    }
}
