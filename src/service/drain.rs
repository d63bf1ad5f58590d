//! Draining: once SIGTERM (or SIGINT) arrives, the process stops taking new work and finishes
//! what it has. Readiness answers 503 so load balancers send nothing new, status streams send
//! a last event and end (the client reconnects elsewhere with `Last-Event-ID`), the server
//! stops accepting (`http.drain_delay_secs` later) and lets each connection finish its request,
//! and the workers stop at a clean point (see `server::Running::stop`).

use tokio::sync::watch;

/// Whether this process is draining; every part that must react holds a receiver.
pub struct Drain {
    started: watch::Sender<bool>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            started: watch::channel(false).0,
        }
    }
}

impl Drain {
    /// Starts draining (idempotent).
    pub fn start(&self) {
        self.started.send_replace(true);
    }

    pub fn is_draining(&self) -> bool {
        *self.started.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.started.subscribe()
    }
}

/// Resolves once `drain` says draining (at once if it already does; never if its sender is
/// gone without draining).
pub async fn started(drain: &mut watch::Receiver<bool>) {
    if drain.wait_for(|draining| *draining).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_receiver_learns_of_the_drain_once_and_at_once() {
        let drain = Drain::default();
        let mut rx = drain.subscribe();
        assert!(!drain.is_draining());
        let waiting = tokio::spawn(async move { started(&mut rx).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drain.start();
        drain.start();
        waiting.await.unwrap();
        assert!(drain.is_draining());
        // A receiver made after the start sees it at once.
        started(&mut drain.subscribe()).await;
    }
}
