//! A user's event for their own attempt (leave, release, checkout, a refused hold): through
//! the ledger when it has the attempt, through the queue store's view when the attempt only
//! waited; either way the machine's answer.

use super::transition::settle;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{decide, AttemptEvent, AttemptId, UserId};
use crate::ledger::{EventAsk, LedgerError};

/// `event` for the user's attempt, through the ledger, settled, and answered with the
/// attempt after it; for an attempt without a ledger row, see [`unrecorded`].
pub async fn apply_event(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    event: AttemptEvent,
) -> ServiceResult<AttemptView> {
    let ask = EventAsk {
        id: attempt,
        user: Some(user.clone()),
        event,
        take: None,
    };
    match app.batches.apply(ask).await {
        Ok(applied) => {
            settle(app, &applied).await;
            Ok(AttemptView::from_record(&applied.record, None))
        }
        Err(LedgerError::NotFound) => unrecorded(app, attempt, user, event).await,
        Err(e) => Err(super::transition::settle_refusal(app, e).await.into()),
    }
}

/// The answer to `event` for an attempt the ledger has no row of: a waiting attempt, or one
/// that ended waiting, lives in the queue store, and the machine decides on the state it has
/// there — refused (409, or 410 once EXPIRED) or, for a repeat of how it ended, the state as
/// it is. An attempt neither knows is not found.
pub async fn unrecorded(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    event: AttemptEvent,
) -> ServiceResult<AttemptView> {
    let view = super::status::from_store(app, attempt, user).await?;
    match decide(view.state, event) {
        Ok(decision) if !decision.changed => Ok(view),
        // Only the queue store changes a waiting attempt (join, leave, admission).
        Ok(_) => Err(ServiceError::NotFound("attempt")),
        Err(rejected) => Err(LedgerError::Rejected(rejected).into()),
    }
}
