//! Checkout: HOLD → PAYMENT_PENDING with a payment reference for the provider; a hold that
//! costs nothing (a free claim) is CONFIRMED at once, with no provider.

use super::{App, AttemptView, ServiceResult};
use crate::domain::{AttemptEvent, AttemptId, UserId};

pub async fn checkout(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    // The hold's amount is fixed when it is taken, so reading it ahead of the transition
    // cannot race a change.
    let free = app
        .ledger
        .attempt(attempt)
        .await?
        .and_then(|record| record.hold?.amount)
        .is_some_and(|m| m.amount == 0);
    let event = if free {
        AttemptEvent::ClaimFree
    } else {
        AttemptEvent::Checkout
    };
    super::attempt_event::apply_event(app, attempt, user, event).await
}
