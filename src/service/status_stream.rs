//! A status stream's answers: pushed from this replica's view of the attempt's line, not
//! polled from the queue store. While the attempt waits, each refresh of the line wakes the
//! stream, which answers from the view and sends an event only if the answer changed; a
//! request on this replica that changes the attempt (leave, hold, checkout, payment) wakes it
//! at once ([`super::line::Nudges`]). The store is asked only when the view says something
//! happened to the attempt; from ADMITTED on the ledger answers, at the nudges and at most
//! every `poll_after_ms` (5 s at most), as steps there come from other replicas' requests
//! and the reapers too.
//!
//! Each event carries an id that names its answer ([`event_id`]): a client that reconnects
//! with `Last-Event-ID` is not sent the answer it has again.

use std::time::Duration;

use futures_util::stream::{self, BoxStream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::line::{LineSnapshot, Nudged};
use super::{status, App, AttemptView, ServiceResult};
use crate::auth::Ticket;
use crate::domain::{AttemptId, AttemptState, UserId};

/// The longest a stream past the queue waits before asking the ledger again.
const LEDGER_EVERY: Duration = Duration::from_secs(5);

/// What a stream keeps between events.
struct Following {
    app: App,
    attempt: AttemptId,
    user: UserId,
    /// The latest queue ticket, and what it says, while the attempt waits.
    ticket: Option<(String, Ticket)>,
    /// The line's snapshots as they come.
    line: watch::Receiver<Option<std::sync::Arc<LineSnapshot>>>,
    nudged: Nudged,
    drain: watch::Receiver<bool>,
    /// The answer last sent (or the client's `Last-Event-ID`).
    last_id: Option<String>,
    /// The answer to send first, computed when the stream opened.
    first: Option<AttemptView>,
    /// The last answer: what to wait for next.
    state: AttemptState,
    ended: bool,
}

/// The attempt's status events (id, answer), starting with `first`, until the attempt ends,
/// the process drains (its last event is the status then) or its status cannot be read.
pub fn follow(
    app: App,
    attempt: AttemptId,
    user: UserId,
    first: AttemptView,
    last_event_id: Option<String>,
) -> BoxStream<'static, (String, AttemptView)> {
    let following = Following {
        line: app.lines.subscribe(attempt.sale),
        nudged: app.lines.nudges.follow(attempt),
        drain: app.drain.subscribe(),
        ticket: None,
        state: first.state,
        first: Some(first),
        last_id: last_event_id,
        ended: false,
        app,
        attempt,
        user,
    };
    stream::unfold(following, |mut f| async move {
        loop {
            if f.ended {
                return None;
            }
            let view = match f.first.take() {
                Some(view) => view,
                None => {
                    f.wait().await;
                    // An error (a store down) ends the stream; the client reconnects or polls.
                    f.answer().await.ok()?
                }
            };
            f.state = view.state;
            // Verified again only when it changed (a refresh hands back the same ticket).
            let kept = f.ticket.as_ref().map(|(ticket, _)| ticket) == view.queue_ticket.as_ref();
            if !kept {
                f.ticket = view.queue_ticket.as_ref().and_then(|ticket| {
                    let placed = f.app.tickets.verify(ticket, f.attempt, &f.user)?;
                    Some((ticket.clone(), placed))
                });
            }
            let last = view.state.is_terminal() || *f.drain.borrow();
            let id = event_id(&view);
            if !last && f.last_id.as_ref() == Some(&id) {
                continue;
            }
            f.last_id = Some(id.clone());
            f.ended = last;
            return Some(((id, view), f));
        }
    })
    .boxed()
}

impl Following {
    /// Until something may have changed: the line refreshed (while waiting), a nudge, the
    /// ledger's interval (past the queue), or the process draining.
    async fn wait(&mut self) {
        let waiting = matches!(self.state, AttemptState::Queued);
        // No timer while waiting: the line's refreshes say when to look again.
        let ledger_turn = async {
            if waiting {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(LEDGER_EVERY).await
            }
        };
        tokio::select! {
            changed = self.line.changed(), if waiting => {
                if changed.is_err() {
                    // The line's view went away (never while followed): ask as past the queue.
                    tokio::time::sleep(LEDGER_EVERY).await;
                }
            }
            _ = self.nudged.nudged() => {}
            _ = ledger_turn => {}
            _ = super::drain::started(&mut self.drain) => {}
        }
    }

    /// The attempt's answer now: from the line while it waits there, else from the ledger
    /// (past the queue), else from the store.
    async fn answer(&self) -> ServiceResult<AttemptView> {
        if let Some((ticket, placed)) = &self.ticket {
            if let Some(view) =
                status::from_line(&self.app, self.attempt, &self.user, ticket, placed)
            {
                return Ok(view);
            }
        }
        if !matches!(self.state, AttemptState::Queued) {
            if let Some(view) = status::from_ledger(&self.app, self.attempt, &self.user).await? {
                return Ok(view);
            }
        }
        status::from_store(&self.app, self.attempt, &self.user).await
    }
}

/// Names an answer by what it says (not by when it was given or when to ask again): equal
/// answers have equal ids, on every replica.
pub fn event_id(view: &AttemptView) -> String {
    let said = format!(
        "{}|{:?}|{:?}|{:?}|{}|{:?}|{:?}|{:?}|{:?}",
        view.state.name(),
        view.state.reason(),
        view.position,
        view.waiting,
        view.sold_out,
        view.admission_expires_at,
        view.hold,
        view.hold_expires_at,
        view.payment_reference,
    );
    hex::encode(&Sha256::digest(said.as_bytes())[..8])
}
