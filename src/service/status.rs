//! The status of an attempt. A waiting attempt with a queue ticket is answered from this
//! replica's view of its line (`super::line`), which costs the queue store nothing; without
//! one, or when the view says something happened to it, the queue store answers; from
//! ADMITTED on, the ledger answers (that traffic is bounded by the admission rate).

use std::sync::LazyLock;

use chrono::Utc;

use super::line::Line;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::auth::Ticket;
use crate::domain::{decide, AttemptEvent, AttemptId, AttemptState, UserId};

/// The attempt's status for `user`; `ticket` is the queue ticket the client presents.
pub async fn status(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    ticket: Option<&str>,
) -> ServiceResult<AttemptView> {
    if let Some(ticket) = ticket {
        match app.tickets.verify(ticket, attempt, user) {
            Some(placed) => {
                if let Some(view) = from_line(app, attempt, user, ticket, &placed) {
                    return Ok(view);
                }
            }
            // Another user's, another attempt's, altered, or signed by a replica without the
            // shared key: the store says where the attempt stands instead.
            None => metrics::counter!("sluice_queue_tickets_refused_total").increment(1),
        }
    }
    // Boxed: the store's and the ledger's futures are large, and an answer from the line
    // would otherwise carry (and move) their space on every call.
    Box::pin(from_store(app, attempt, user)).await
}

/// A waiting attempt's answer from this replica's view of its line; `None` when the view
/// cannot say (none yet, or the attempt is no longer waiting in it: admitted, left,
/// abandoned, or the line was numbered anew by other than the lottery's draw the view knows).
pub fn from_line(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    ticket: &str,
    placed: &Ticket,
) -> Option<AttemptView> {
    app.lines.with_line(attempt.sale, |line| {
        answer_from_line(app, line, attempt, user, ticket, placed)
    })
}

/// [`from_line`] with the attempt's line.
fn answer_from_line(
    app: &App,
    line: &Line,
    attempt: AttemptId,
    user: &UserId,
    ticket: &str,
    placed: &Ticket,
) -> Option<AttemptView> {
    let snapshot = line.snapshot();
    let snapshot = snapshot.as_ref()?;
    if line.left_here(attempt) {
        return None;
    }
    let serial = snapshot.serial_now(placed.serial, &placed.epoch)?;
    let position = snapshot.place(serial, &snapshot.figures.epoch)?;
    ANSWERED_FROM_LINE.increment(1);
    let line_now = &snapshot.figures;
    if line_now.sale_closed {
        return Some(ended_waiting(attempt, AttemptEvent::SaleClosed));
    }
    // Asking is a sign of life: the next refresh writes it.
    app.lines.seen(line, serial, &line_now.epoch);
    let rate = best_rate(line_now.measured_rate, line_now.configured_rate);
    let mut view = waiting(app, attempt, position, line_now.waiting, rate);
    view.sold_out = line_now.sold_out;
    view.as_of = Some(snapshot.as_of);
    view.queue_ticket = Some(if placed.epoch == line_now.epoch {
        ticket.to_owned()
    } else {
        // A ticket of before the lottery's draw: the holder's place in the draw's numbering.
        let now = Ticket {
            serial,
            epoch: line_now.epoch.clone(),
        };
        app.tickets.issue(attempt, user, &now)
    });
    Some(view)
}

/// The attempt's status from the queue store (and the ledger past the queue).
pub async fn from_store(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
) -> ServiceResult<AttemptView> {
    metrics::counter!("sluice_status_answers_total", "source" => "store").increment(1);
    let mut view = lookup(app, attempt, user).await?;
    if !view.known_sale && super::sales::restore_in_queue(app, attempt.sale, false).await? {
        view = lookup(app, attempt, user).await?;
    }
    match &view.owner {
        Some(owner) if owner != user => return Err(ServiceError::NotFound("attempt")),
        Some(_) => {
            if let Some(position) = view.position {
                if view.sale_closed {
                    // Its turn can no longer come: the attempt ends here, not in a queue that
                    // never moves again.
                    return Ok(ended_waiting(attempt, AttemptEvent::SaleClosed));
                }
                let rate = best_rate(view.measured_rate, view.configured_rate);
                let mut answer = waiting(app, attempt, position, view.waiting, rate);
                answer.sold_out = view.sold_out;
                answer.as_of = Some(Utc::now());
                answer.queue_ticket = view.serial.map(|serial| {
                    let placed = Ticket {
                        serial,
                        epoch: view.epoch.clone(),
                    };
                    app.tickets.issue(attempt, user, &placed)
                });
                return Ok(answer);
            }
        }
        None => {}
    }
    if let Some(answer) = from_ledger(app, attempt, user).await? {
        return Ok(answer);
    }
    if view.owner.is_some() && view.active {
        // Popped from the queue a moment ago; the ledger row is being written.
        return Ok(AttemptView::queued(attempt, 1, view.waiting, 0.0));
    }
    if view.owner.is_some() {
        // Known to the queue store, neither waiting nor admitted: the user left, or showed no
        // sign of life for too long.
        let ended_by = if view.abandoned {
            AttemptEvent::Abandon
        } else {
            AttemptEvent::Leave
        };
        return Ok(ended_waiting(attempt, ended_by));
    }
    if view.sale_closed {
        // Waiting when the sale closed: the store let go of its entry at the close.
        return Ok(ended_waiting(attempt, AttemptEvent::SaleClosed));
    }
    if created_ms(attempt).is_some_and(|t| t < view.rebuilt_at_ms) {
        // Created before the sale was rebuilt from the ledger: its place was lost with the
        // queue store's data (UUIDv7 ids carry their creation time).
        return Err(ServiceError::RejoinNeeded);
    }
    if created_ms(attempt).is_some_and(|t| placed_here(attempt, t))
        && app.queue.waiting_of(attempt.sale, user).await?.is_none()
    {
        // An id this sale may have given out, which neither store knows, asked about by a user
        // who waits with no other attempt: a failover lost the join's write. (A user who waits
        // with another attempt is asking about someone else's, or an old one: 404.)
        return Err(ServiceError::RejoinNeeded);
    }
    Err(ServiceError::NotFound("attempt"))
}

/// The attempt's status from the ledger, which has it from ADMITTED on; `None` when it has no
/// row for it (waiting, left, or being admitted this moment).
pub async fn from_ledger(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
) -> ServiceResult<Option<AttemptView>> {
    match app.ledger.attempt(attempt).await? {
        Some(record) if record.user == *user => {
            let token = (record.state == AttemptState::Admitted).then(|| {
                app.admission
                    .issue(attempt, user, record.admission_expires_at.timestamp())
            });
            Ok(Some(AttemptView::from_record(&record, token)))
        }
        Some(_) => Err(ServiceError::NotFound("attempt")),
        None => Ok(None),
    }
}

/// One queue-store lookup for a status answer, counted as such.
async fn lookup(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
) -> ServiceResult<crate::queue::QueueView> {
    metrics::counter!("sluice_status_store_calls_total", "call" => "lookup").increment(1);
    Ok(app.queue.view(attempt, user).await?)
}

/// A waiting attempt that `event` ended (the sale's close, a leave, abandonment), in the state
/// the machine says it went to.
fn ended_waiting(attempt: AttemptId, event: AttemptEvent) -> AttemptView {
    let state = decide(AttemptState::Queued, event).map_or(AttemptState::Queued, |d| d.to);
    AttemptView::bare(attempt, state)
}

/// Status answers from the line, the hottest count there is: its handle is looked up once
/// (the recorder is installed when the app is made, before any answer).
static ANSWERED_FROM_LINE: LazyLock<metrics::Counter> =
    LazyLock::new(|| metrics::counter!("sluice_status_answers_total", "source" => "line"));

/// A waiting attempt's answer. With abandonment on, the client is told to come back at least
/// three times within the abandonment time, so a client that does as told never loses its place.
pub(super) fn waiting(
    app: &App,
    attempt: AttemptId,
    position: u64,
    waiting: u64,
    rate: f64,
) -> AttemptView {
    let mut view = AttemptView::queued(attempt, position, waiting, rate);
    let abandon_ms = app.config.workers.abandon_after_secs.millis();
    if abandon_ms > 0 {
        view.poll_after_ms = view.poll_after_ms.min(abandon_ms / 3);
    }
    view
}

/// The measured admission rate once there is one, else the configured one.
pub fn best_rate(measured: f64, configured: f64) -> f64 {
    if measured > 0.0 {
        measured
    } else {
        configured
    }
}

/// Whether an attempt created at `created` (ms) may be one this sale gave out: after the sale
/// was created (its id is a UUIDv7 too) and not in the future. Any other id names nothing.
fn placed_here(attempt: AttemptId, created: i64) -> bool {
    v7_ms(&attempt.sale.0).is_some_and(|sale| sale <= created)
        && created <= Utc::now().timestamp_millis()
}

fn created_ms(attempt: AttemptId) -> Option<i64> {
    v7_ms(&attempt.local)
}

/// The creation time (ms) a UUIDv7 carries.
fn v7_ms(id: &uuid::Uuid) -> Option<i64> {
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    Some(secs as i64 * 1000 + nanos as i64 / 1_000_000)
}
