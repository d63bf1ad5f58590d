//! A waiting user's page asks to be told by Web Push when the turn comes: its subscription is
//! kept by attempt until then (`crate::notify` sends and forgets it).

use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, UserId};
use crate::notify::web_push::Subscription;

/// Keeps `subscription` for the caller's waiting attempt. Refused when Web Push is off (404),
/// when the subscription's form or push service is not acceptable (422), and when the
/// attempt no longer waits (409).
pub async fn subscribe(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    subscription: Subscription,
) -> ServiceResult<()> {
    if app.config.notify.vapid_private_key.is_empty() {
        return Err(ServiceError::NotFound("web push on this sluice"));
    }
    if let Err(e) = subscription.check(&app.config.notify.web_push_hosts) {
        return Err(ServiceError::Validation {
            field: e.field().into(),
            message: e.to_string(),
        });
    }
    // The caller's own attempt, and still waiting (someone else's answers 404).
    let view = super::status::status(app, attempt, user, None).await?;
    match view.state {
        AttemptState::Queued => {}
        AttemptState::Admitted
        | AttemptState::Hold
        | AttemptState::PaymentPending
        | AttemptState::Confirmed
        | AttemptState::Expired { .. } => return Err(ServiceError::NotWaiting),
    }
    app.ledger
        .save_push_subscription(attempt, &subscription)
        .await?;
    Ok(())
}
