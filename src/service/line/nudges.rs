//! Pushes to status streams: a request that changes an attempt (leave, hold, release,
//! checkout, payment) wakes the attempt's streams on this replica at once, instead of at the
//! next refresh or poll.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::domain::AttemptId;

/// The open streams' wake-ups, by attempt.
#[derive(Default)]
pub struct Nudges {
    streams: Mutex<HashMap<AttemptId, Arc<Notify>>>,
}

/// A stream's registration: its wake-up, dropped with the stream.
pub struct Nudged {
    attempt: AttemptId,
    notify: Arc<Notify>,
    nudges: Arc<Nudges>,
}

impl Nudged {
    /// Resolves at the next nudge of the attempt (or at once if one came since the last).
    pub async fn nudged(&self) {
        self.notify.notified().await
    }
}

impl Drop for Nudged {
    fn drop(&mut self) {
        let mut streams = self.nudges.streams.lock().expect("nudges lock");
        // Another stream of the same attempt shares the entry while it lives.
        if Arc::strong_count(&self.notify) <= 2 {
            streams.remove(&self.attempt);
        }
    }
}

impl Nudges {
    /// Registers a stream of `attempt`.
    pub fn follow(self: &Arc<Self>, attempt: AttemptId) -> Nudged {
        let mut streams = self.streams.lock().expect("nudges lock");
        let notify = Arc::clone(streams.entry(attempt).or_default());
        Nudged {
            attempt,
            notify,
            nudges: Arc::clone(self),
        }
    }

    /// Wakes the attempt's streams on this replica.
    pub fn nudge(&self, attempt: AttemptId) {
        let streams = self.streams.lock().expect("nudges lock");
        if let Some(notify) = streams.get(&attempt) {
            notify.notify_waiters();
            // A stream between two waits takes it at its next one.
            notify.notify_one();
        }
    }
}
