//! Leave: a waiting user steps out of the queue; an admitted user gives the slot back; a user
//! who holds stock releases it.

use super::attempt_event::apply_event;
use super::transition::waiting_ended;
use super::{App, AttemptView, ServiceResult};
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
        // Admitted or later (a ledger row), or left the queue earlier: leaving again
        // answers the same.
        LeaveOutcome::NotQueued | LeaveOutcome::NotFound => {
            apply_event(app, attempt, user, AttemptEvent::Leave).await
        }
    }
}
