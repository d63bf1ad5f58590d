//! Leave: a waiting user steps out of the queue; an admitted user gives the slot back; a user
//! who holds stock releases it.

use super::transition::{settle, waiting_ended};
use super::{status::from_store, App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{AttemptEvent, AttemptId, UserId};
use crate::queue::LeaveOutcome;

pub async fn leave(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    match app.queue.leave(attempt, user).await? {
        LeaveOutcome::Left => {
            // Out of the queue store only (a waiting attempt has no ledger row to change).
            let left = waiting_ended(AttemptEvent::Leave, 1);
            app.lines.left(attempt);
            Ok(AttemptView::bare(attempt, left))
        }
        LeaveOutcome::NotQueued | LeaveOutcome::NotFound => {
            match app
                .ledger
                .apply(attempt, Some(user), AttemptEvent::Leave, None)
                .await
            {
                Ok(applied) => {
                    settle(app, &applied).await;
                    Ok(AttemptView::from_record(&applied.record, None))
                }
                // Left the queue earlier: leaving again answers the same.
                Err(crate::ledger::LedgerError::NotFound) => from_store(app, attempt, user).await,
                Err(e) => Err(ServiceError::from(e)),
            }
        }
    }
}
