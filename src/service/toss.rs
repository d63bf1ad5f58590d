//! Toss Payments' side of a payment. The buyer pays in Toss's window under the attempt's order
//! id and comes back with a `paymentKey`; sluice then confirms the payment with its secret key
//! ([`confirm`]), for the hold's amount only: an amount that is not the hold's is refused
//! before Toss is asked (a tampered amount is the classic attack on this flow). A confirm whose
//! answer is lost is looked up, not guessed. Toss's webhooks are the Toss module's own
//! (`payments/providers/toss/webhook.rs`).
//!
//! Event ids (each applied once): `toss:<paymentKey>:<status>`, the same whether the confirm,
//! a webhook, or one of its resends brings the word.

use uuid::Uuid;

use super::payment::{apply_found, ProviderAck, WebhookAck, WebhookResult};
use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, UserId};
use crate::payments::providers::toss::connector::found as found_at_toss;
use crate::payments::providers::toss::{is_order_id, is_payment_key, Payment, Toss};
use crate::payments::ProviderError;

/// What the buyer came back with from Toss's window.
pub struct Returned<'a> {
    pub payment_key: &'a str,
    pub order_id: &'a str,
    /// As the success URL carries it; must be the hold's.
    pub amount: u64,
}

fn toss(app: &App) -> ServiceResult<&Toss> {
    app.provider
        .as_any()
        .downcast_ref::<Toss>()
        .ok_or(ServiceError::NotFound(
            "the Toss Payments routes (payments.provider is not toss)",
        ))
}

/// The attempt and payment reference of a Toss order id sluice gave out.
async fn order(app: &App, order_id: &str) -> ServiceResult<Option<(AttemptId, Uuid)>> {
    if !is_order_id(order_id) {
        return Ok(None);
    }
    Ok(app.ledger.payment_by_provider_id("toss", order_id).await?)
}

/// Confirms the payment the buyer authorized at Toss, for the attempt whose order it is (when
/// a user asks, `owner`: it must be that user's attempt). Outside any ledger transaction.
pub async fn confirm(
    app: &App,
    returned: &Returned<'_>,
    owner: Option<(&UserId, AttemptId)>,
) -> ServiceResult<(AttemptId, ProviderAck)> {
    let toss = toss(app)?;
    if !is_payment_key(returned.payment_key) {
        return Err(ServiceError::validation(
            "paymentKey",
            "not a Toss payment key: up to 200 characters of A-Z a-z 0-9 _ -",
        ));
    }
    let (attempt, reference) = order(app, returned.order_id)
        .await?
        .ok_or(ServiceError::NotFound("payment"))?;
    let record = app
        .ledger
        .attempt(attempt)
        .await?
        .filter(|r| owner.is_none_or(|(user, id)| &r.user == user && r.id == id))
        .ok_or(ServiceError::NotFound("payment"))?;
    let held = record.hold.as_ref().and_then(|h| h.amount.clone());
    let Some(held) = held else {
        return Err(ServiceError::NotFound("payment"));
    };
    if returned.amount != held.amount {
        tracing::warn!(%attempt, asked = returned.amount, held = held.amount,
            "a Toss return whose amount is not the hold's is refused");
        return Err(ServiceError::validation(
            "amount",
            format!(
                "{} is not the amount held ({} {}): nothing was confirmed",
                returned.amount, held.amount, held.currency
            ),
        ));
    }
    match record.state {
        AttemptState::PaymentPending => {}
        AttemptState::Confirmed => {
            let ack = WebhookAck {
                result: WebhookResult::Duplicate,
                state: AttemptState::Confirmed,
            };
            return Ok((attempt, ProviderAck::Attempt(ack)));
        }
        // Not confirmed at Toss: the buyer's authorization lapses there, nothing is charged.
        expired @ AttemptState::Expired { .. } => {
            return Err(ServiceError::AttemptExpired(expired))
        }
        // Never checked out: no order of it was given to Toss.
        AttemptState::Queued | AttemptState::Admitted | AttemptState::Hold => {
            return Err(ServiceError::NotFound("payment"))
        }
    }
    let key = returned.order_id;
    let answer = toss
        .confirm(returned.payment_key, returned.order_id, held.amount, key)
        .await;
    let payment = match answer {
        Ok(payment) => payment,
        // Lost, or refused because a first try went through: what Toss holds is the answer.
        Err(e) => match toss.payment(returned.payment_key).await {
            Ok(p) if p.status == "DONE" && p.order_id == returned.order_id => p,
            _ => match e {
                ProviderError::Refused(detail) => {
                    app.ledger.set_payment_failure(reference, &detail).await?;
                    let event = format!("toss:{}:refused", returned.payment_key);
                    app.ledger
                        .note_payment(&event, reference, "failed_try")
                        .await?;
                    return Err(ServiceError::ProviderRefused(detail));
                }
                ProviderError::Unavailable(detail) => {
                    tracing::warn!(%attempt, %detail,
                        "a Toss confirm got no answer: the reconciler looks the order up");
                    return Err(ServiceError::Unavailable("the payment provider"));
                }
            },
        },
    };
    let ack = on_payment(app, &payment, attempt, reference).await?;
    Ok((attempt, ack))
}

/// What Toss says a payment of `attempt`'s order is, applied ([`apply_found`]).
async fn on_payment(
    app: &App,
    payment: &Payment,
    attempt: AttemptId,
    reference: Uuid,
) -> ServiceResult<ProviderAck> {
    let event = format!("toss:{}:{}", payment.payment_key, payment.status);
    apply_found(app, &event, found_at_toss(payment), attempt, reference).await
}

/// The buyer came back to the fail URL: Toss's code and message are recorded on the payment
/// (the buyer may try again until the deadline). Returns the attempt, when the order is one.
pub async fn failed(
    app: &App,
    order_id: &str,
    code: &str,
    message: &str,
) -> ServiceResult<Option<AttemptId>> {
    toss(app)?;
    let Some((attempt, reference)) = order(app, order_id).await? else {
        return Ok(None);
    };
    let code: String = code.chars().take(64).collect();
    let message: String = message.chars().take(300).collect();
    let failure = if code.is_empty() {
        message
    } else {
        format!("{code}: {message}")
    };
    if !failure.is_empty() {
        app.ledger.set_payment_failure(reference, &failure).await?;
    }
    Ok(Some(attempt))
}
