//! The status of an attempt. A waiting attempt is answered from the queue store alone; from
//! ADMITTED on, the ledger answers (that traffic is bounded by the admission rate).

use super::join::best_rate;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, ExpiryReason, UserId};

pub async fn status(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    let view = app.queue.view(attempt).await?;
    match &view.owner {
        Some(owner) if owner != user => return Err(ServiceError::NotFound("attempt")),
        Some(_) => {
            if let Some(position) = view.position {
                let rate = best_rate(view.measured_rate, view.configured_rate);
                return Ok(AttemptView::queued(attempt, position, view.waiting, rate));
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
        // Known to the queue store, neither waiting nor admitted: the user left.
        None if view.owner.is_some() => Ok(AttemptView::bare(
            attempt,
            AttemptState::expired_because(ExpiryReason::Left),
        )),
        None => Err(ServiceError::NotFound("attempt")),
    }
}
