//! Checkout: HOLD → PAYMENT_PENDING with a payment reference for the provider.

use super::{App, AttemptView, ServiceResult};
use crate::domain::{AttemptEvent, AttemptId, UserId};

pub async fn checkout(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    super::attempt_event::apply_event(app, attempt, user, AttemptEvent::Checkout).await
}
