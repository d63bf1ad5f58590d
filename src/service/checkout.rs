//! Checkout: HOLD → PAYMENT_PENDING with a payment reference for the provider.

use super::transition::settle;
use super::{App, AttemptView, ServiceResult};
use crate::domain::{AttemptEvent, AttemptId, UserId};

pub async fn checkout(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    let applied = app
        .ledger
        .apply(attempt, Some(user), AttemptEvent::Checkout, None)
        .await?;
    settle(app, &applied).await;
    Ok(AttemptView::from_record(&applied.record, None))
}
