//! Request limits on the hot, unauthenticated-cost paths (join, status, events, offer), so one
//! client cannot poll a waiting room to death: per user (the token's subject) and per client
//! IP (a bot farm cycling accounts). GCRA (governor), keyed, in process: each replica limits
//! what reaches it.

use std::hash::Hash;
use std::net::IpAddr;
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

/// A join limiter and a status limiter for one kind of key; `None` is off.
struct ByKind<K: Hash + Eq + Clone> {
    join: Option<DefaultKeyedRateLimiter<K>>,
    status: Option<DefaultKeyedRateLimiter<K>>,
}

impl<K: Hash + Eq + Clone> ByKind<K> {
    fn new(join: (u32, u32), status: (u32, u32)) -> Self {
        ByKind {
            join: limiter(join.0, join.1),
            status: limiter(status.0, status.1),
        }
    }

    fn check(&self, kind: Limited, key: &K, clock: &DefaultClock) -> Result<(), Duration> {
        let limiter = match kind {
            Limited::Join => &self.join,
            Limited::Status => &self.status,
        };
        match limiter {
            None => Ok(()),
            Some(l) => l
                .check_key(key)
                .map_err(|not_until| not_until.wait_time_from(clock.now())),
        }
    }

    fn shrink(&self) {
        for l in [&self.join, &self.status].into_iter().flatten() {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

pub struct Limits {
    by_user: ByKind<UserId>,
    by_ip: ByKind<IpAddr>,
    clock: DefaultClock,
}

fn limiter<K: Hash + Eq + Clone>(
    per_second: u32,
    burst: u32,
) -> Option<DefaultKeyedRateLimiter<K>> {
    let rate = NonZeroU32::new(per_second)?;
    let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
    Some(RateLimiter::keyed(
        Quota::per_second(rate).allow_burst(burst),
    ))
}

impl Limits {
    pub fn new(c: &LimitsConfig) -> Self {
        Limits {
            by_user: ByKind::new(
                (c.join_per_second, c.join_burst),
                (c.status_per_second, c.status_burst),
            ),
            by_ip: ByKind::new(
                (c.ip_join_per_second, c.ip_join_burst),
                (c.ip_status_per_second, c.ip_status_burst),
            ),
            clock: DefaultClock::default(),
        }
    }

    /// `Err(wait)` when the user must wait before asking again.
    pub fn check(&self, kind: Limited, user: &UserId) -> Result<(), Duration> {
        self.by_user.check(kind, user, &self.clock)
    }

    /// `Err(wait)` when requests from this address must wait.
    pub fn check_ip(&self, kind: Limited, ip: IpAddr) -> Result<(), Duration> {
        self.by_ip.check(kind, &ip, &self.clock)
    }

    /// Forgets keys that have been quiet long enough to be back at a full burst.
    pub fn shrink(&self) {
        self.by_user.shrink();
        self.by_ip.shrink();
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
            ip_join_per_second: 0,
            ip_join_burst: 0,
            ip_status_per_second: 1,
            ip_status_burst: 1,
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
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(limits.check_ip(Limited::Status, ip), Ok(()));
        assert!(limits.check_ip(Limited::Status, ip).is_err(), "per address");
        assert_eq!(
            limits.check_ip(Limited::Status, "192.0.2.8".parse().unwrap()),
            Ok(())
        );
    }
}
