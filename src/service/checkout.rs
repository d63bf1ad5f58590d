//! Checkout: HOLD → PAYMENT_PENDING with a payment reference, then the payment started at the
//! provider for the hold's amount; a hold that costs nothing (a free claim) is CONFIRMED at
//! once, with no provider.

use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{AttemptEvent, AttemptId, AttemptState, UserId};
use crate::payments::{Order, ProviderError};
use crate::telemetry::warn_throttled;

/// The transition (the part a saved idempotent response stands for). The ledger makes the
/// checkout of a hold that costs nothing a claim (`ClaimFree`): CONFIRMED at once.
pub async fn checkout(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    super::attempt_event::apply_event(app, attempt, user, AttemptEvent::Checkout).await
}

/// Starts the payment of a PAYMENT_PENDING attempt at the provider (or finds the one started
/// before) and puts what the page needs to pay it in `view`. Outside any ledger transaction;
/// a provider that is down is a 503 and leaves the attempt as it was, payable by a retry.
pub async fn start_payment(app: &App, view: &mut AttemptView) -> ServiceResult<()> {
    // A provider without an API needs only the reference the answer carries.
    if view.state != AttemptState::PaymentPending || !app.provider.has_api() {
        return Ok(());
    }
    let record = app
        .ledger
        .attempt(view.attempt)
        .await?
        .ok_or(ServiceError::NotFound("attempt"))?;
    let Some(reference) = record.payment_reference else {
        return Ok(());
    };
    let amount = record.hold.as_ref().and_then(|h| h.amount.as_ref());
    if amount.is_none() {
        return Err(ServiceError::validation(
            "sale",
            format!(
                "the sale has no price, and the payment provider ({}) takes only priced payments",
                app.provider.name()
            ),
        ));
    }
    let sale = app
        .ledger
        .sale(view.attempt.sale)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let order = Order {
        attempt: view.attempt,
        reference,
        amount,
        name: sale.sale.name.as_str(),
    };
    let known = record.provider_payment_id.as_deref();
    let mut started = app
        .provider
        .start(&order, known)
        .await
        .map_err(provider_error)?;
    if let (None, Some(id)) = (known, started.id.as_deref()) {
        let provider = app.provider.name();
        let standing = app
            .ledger
            .set_provider_payment(view.attempt, provider, id)
            .await?;
        // A concurrent checkout recorded its payment first: that one is the attempt's, and
        // this one is canceled so that nobody pays it.
        if let Some(standing) = standing.filter(|s| s != id) {
            if let Err(e) = app.provider.cancel(id).await {
                tracing::warn!(attempt = %view.attempt, error = %e,
                    "a second payment started for one attempt is not canceled");
            }
            started = app
                .provider
                .start(&order, Some(&standing))
                .await
                .map_err(provider_error)?;
        }
    }
    view.pay = Some(started.pay);
    Ok(())
}

/// A provider's failure as the caller is answered: try later (503), or what it said no to
/// (502).
pub fn provider_error(e: ProviderError) -> ServiceError {
    match e {
        ProviderError::Unavailable(detail) => {
            warn_throttled!(%detail, "payment provider unavailable");
            ServiceError::Unavailable("the payment provider")
        }
        ProviderError::Refused(detail) => ServiceError::ProviderRefused(detail),
    }
}
