//! The ledger fails fast while its database is down. The breaker is a check where a connection
//! is taken ([`Breaker::take`]): while it is open, taking one answers `Unavailable` (503 +
//! Retry-After) at once, and the moment it opens, every caller still waiting for a connection
//! gets the same answer, rather than each waiting out the pool's acquire timeout.
//!
//! It opens when the database is found unreachable by a connection of its own (a busy pool is
//! no outage): asked when taking a connection failed as unavailable, or has waited longer than
//! [`SUSPECT_AFTER`]. A probe then pings the database every [`PROBE_EVERY`] and closes the
//! breaker on the first answer, so service resumes within that of the database's return. Paths
//! that need only the queue store (join, a waiting user's status) never wait on it either way.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{LedgerError, LedgerResult};

/// How often the probe asks a down database whether it is back.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long one probe waits for the database.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// A caller waiting this long for a connection asks whether the database is there at all.
pub const SUSPECT_AFTER: Duration = Duration::from_millis(150);
/// The least time between two such questions: a pool that stays busy (a burst of holds) makes
/// many callers wait, and each question is a connection of its own to the database.
pub const RECHECK_AFTER: Duration = Duration::from_millis(100);

/// Whether the ledger's database is being failed fast.
pub struct Breaker {
    /// True while open; callers waiting for a connection watch it.
    open: watch::Sender<bool>,
    /// A caller is asking the database whether it is there, and when the last one asked.
    checking: Mutex<(bool, Option<Instant>)>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            open: watch::Sender::new(false),
            checking: Mutex::new((false, None)),
        }
    }
}

/// What taking a connection answers while the breaker is open.
fn refused() -> LedgerError {
    LedgerError::Unavailable(
        "the ledger's database is unreachable (failing fast until it answers)".into(),
    )
}

impl Breaker {
    /// Whether this caller may ask the database now (nobody is asking, nor asked just now).
    fn claim_check(&self) -> bool {
        let mut checking = self.checking.lock().expect("not poisoned");
        let (asking, last) = *checking;
        if asking || last.is_some_and(|at| at.elapsed() < RECHECK_AFTER) {
            return false;
        }
        *checking = (true, Some(Instant::now()));
        true
    }

    /// Whether connections are being refused now.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Takes a connection with `acquire`: refused at once while the breaker is open, and given
    /// up with the same answer when it opens during the wait. A wait past [`SUSPECT_AFTER`]
    /// has `suspect` ask whether the database is there (see [`Breaker::observe`]), while the
    /// wait goes on.
    pub async fn take<T, S>(
        &self,
        acquire: impl Future<Output = LedgerResult<T>>,
        suspect: impl FnOnce() -> S,
    ) -> LedgerResult<T>
    where
        S: Future<Output = ()>,
    {
        if self.is_open() {
            return Err(refused());
        }
        let mut opened = self.open.subscribe();
        let acquire = std::pin::pin!(acquire);
        let suspect = std::pin::pin!(async {
            tokio::time::sleep(SUSPECT_AFTER).await;
            suspect().await;
            std::future::pending::<std::convert::Infallible>().await
        });
        tokio::select! {
            result = acquire => result,
            _ = opened.wait_for(|open| *open) => Err(refused()),
            never = suspect => match never {},
        }
    }

    /// After a sign of trouble: one caller at a time, and none within [`RECHECK_AFTER`] of the
    /// last, asks `reachable` (a connection of its own to the database); on a no, the breaker
    /// opens and `probe` is started, which is to return once the database answers again. True
    /// if this call opened it.
    pub async fn observe<R, P>(self: &Arc<Self>, reachable: R, probe: P) -> bool
    where
        R: Future<Output = bool>,
        P: Future<Output = ()> + Send + 'static,
    {
        if self.is_open() || !self.claim_check() {
            return false;
        }
        let up = reachable.await;
        self.checking.lock().expect("not poisoned").0 = false;
        if up || self.open.send_replace(true) {
            return false;
        }
        metrics::counter!("sluice_ledger_breaker_opened_total").increment(1);
        metrics::gauge!("sluice_ledger_breaker_open").set(1.0);
        tracing::warn!("ledger unreachable: failing fast until it answers a probe");
        let this = self.clone();
        tokio::spawn(async move {
            probe.await;
            this.open.send_replace(false);
            metrics::gauge!("sluice_ledger_breaker_open").set(0.0);
            tracing::info!("ledger answers again");
        });
        true
    }
}
