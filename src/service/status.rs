//! The status of an attempt. A waiting attempt is answered from the queue store alone; from
//! ADMITTED on, the ledger answers (that traffic is bounded by the admission rate).

use super::join::best_rate;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, ExpiryReason, UserId};

pub async fn status(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    let mut view = app.queue.view(attempt, user).await?;
    if !view.known_sale && super::sales::restore_in_queue(app, attempt.sale, false).await? {
        view = app.queue.view(attempt, user).await?;
    }
    match &view.owner {
        Some(owner) if owner != user => return Err(ServiceError::NotFound("attempt")),
        Some(_) => {
            if let Some(position) = view.position {
                if view.sale_closed {
                    // Its turn can no longer come: the attempt ends here, not in a queue that
                    // never moves again.
                    return Ok(AttemptView::bare(
                        attempt,
                        AttemptState::expired_because(ExpiryReason::SaleClosed),
                    ));
                }
                let rate = best_rate(view.measured_rate, view.configured_rate);
                let mut answer = waiting(app, attempt, position, view.waiting, rate);
                answer.sold_out = view.sold_out;
                return Ok(answer);
            }
        }
        None => {}
    }
    match app.ledger.attempt(attempt).await? {
        Some(record) if record.user == *user => {
            let token = (record.state == AttemptState::ADMITTED).then(|| {
                app.admission
                    .issue(attempt, user, record.admission_expires_at.timestamp())
            });
            Ok(AttemptView::from_record(&record, token))
        }
        Some(_) => Err(ServiceError::NotFound("attempt")),
        // Popped from the queue a moment ago; the ledger row is being written.
        None if view.owner.is_some() && view.active => {
            Ok(AttemptView::queued(attempt, 1, view.waiting, 0.0))
        }
        // Known to the queue store, neither waiting nor admitted: the user left, or showed no
        // sign of life for too long.
        None if view.owner.is_some() => {
            let reason = if view.abandoned {
                ExpiryReason::Abandoned
            } else {
                ExpiryReason::Left
            };
            Ok(AttemptView::bare(
                attempt,
                AttemptState::expired_because(reason),
            ))
        }
        // Waiting when the sale closed: the store let go of its entry at the close.
        None if view.sale_closed => Ok(AttemptView::bare(
            attempt,
            AttemptState::expired_because(ExpiryReason::SaleClosed),
        )),
        // Created before the sale was rebuilt from the ledger: its place was lost with the
        // queue store's data (UUIDv7 ids carry their creation time).
        None if created_ms(attempt).is_some_and(|t| t < view.rebuilt_at_ms) => {
            Err(ServiceError::RejoinNeeded)
        }
        None => Err(ServiceError::NotFound("attempt")),
    }
}

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
    let abandon_ms = app.config.workers.abandon_after_secs * 1000;
    if abandon_ms > 0 {
        view.poll_after_ms = view.poll_after_ms.min(abandon_ms / 3);
    }
    view
}

fn created_ms(attempt: AttemptId) -> Option<i64> {
    let (secs, nanos) = attempt.local.get_timestamp()?.to_unix();
    Some(secs as i64 * 1000 + nanos as i64 / 1_000_000)
}
