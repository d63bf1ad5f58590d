//! The payment provider's webhook: verify the signature over the raw body, then apply the event
//! once per provider event id. Succeeded → CONFIRMED; failed → EXPIRED with stock back; success
//! after expiry → `refund_required` (the attempt stays EXPIRED).

use super::transition::settle;
use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, Effect, Money, Refunding};
use crate::ledger::{AttemptRecord, PaymentApplied};
use crate::payments::{Found, PaymentWebhook, WebhookKind};

/// What a webhook did, as the provider is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookResult {
    /// The attempt moved: CONFIRMED, or EXPIRED with its stock back.
    Applied,
    /// This provider event id was processed before: nothing changed.
    Duplicate,
    /// A new event that changes nothing (a failure after a success, a second success).
    Ignored,
    /// Money arrived for an attempt that had expired: a refund is owed.
    RefundRequired,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookAck {
    pub result: WebhookResult,
    pub state: AttemptState,
}

/// What a provider's word did (its webhook, or a buyer's return from its window).
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderAck {
    /// It moved (or, repeated, had moved) an attempt.
    Attempt(WebhookAck),
    /// Recorded on the payment: a failed try, a refund.
    Recorded,
    /// Not about a payment sluice started, or of a kind sluice does not act on.
    Ignored,
}

impl ProviderAck {
    /// What [`apply`] or [`apply_paid`] answered; `None` (no such payment, or not the hold's
    /// amount) is ignored.
    pub fn of(ack: Option<WebhookAck>) -> Self {
        ack.map(ProviderAck::Attempt)
            .unwrap_or(ProviderAck::Ignored)
    }

    /// The attempt's state after it, when it was about one.
    pub fn state(&self) -> Option<AttemptState> {
        match self {
            ProviderAck::Attempt(ack) => Some(ack.state),
            ProviderAck::Recorded | ProviderAck::Ignored => None,
        }
    }

    /// The answer's word for it.
    pub fn result(&self) -> &'static str {
        match self {
            ProviderAck::Attempt(ack) => match ack.result {
                WebhookResult::Applied => "applied",
                WebhookResult::Duplicate => "duplicate",
                WebhookResult::Ignored => "ignored",
                WebhookResult::RefundRequired => "refund_required",
            },
            ProviderAck::Recorded => "recorded",
            ProviderAck::Ignored => "ignored",
        }
    }

    /// Its outcome in `sluice_provider_webhooks_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            ProviderAck::Attempt(_) => "applied",
            ProviderAck::Recorded => "recorded",
            ProviderAck::Ignored => "ignored",
        }
    }
}

/// Counts one webhook of `provider` by what it did (`sluice_provider_webhooks_total`).
pub fn count_webhook(provider: &'static str, outcome: &'static str) {
    metrics::counter!("sluice_provider_webhooks_total", "provider" => provider,
        "outcome" => outcome)
    .increment(1);
}

pub async fn receive(app: &App, signature: &str, body: &[u8]) -> ServiceResult<WebhookAck> {
    // A provider with an API of its own reports at its own route, in its own format.
    if app.provider.has_api() {
        return Err(ServiceError::NotFound(
            "the Sluice-Signature webhook (payments.provider is not sandbox or webhook)",
        ));
    }
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = app.webhooks.verify(signature, body, now) {
        metrics::counter!("sluice_webhooks_total", "outcome" => "bad_signature").increment(1);
        return Err(ServiceError::BadSignature(e.to_string()));
    }
    let hook = PaymentWebhook::parse(body).map_err(|m| ServiceError::validation("body", m))?;
    let succeeded = hook.kind == WebhookKind::Succeeded;
    match apply(app, &hook.id, hook.payment_reference, succeeded).await? {
        Some(ack) => Ok(ack),
        None => Err(ServiceError::NotFound("payment")),
    }
}

/// A provider's word on the payment `reference`, applied once per provider event id (as a span
/// of the trace its checkout was in, when traces are on): see [`apply_now`].
pub async fn apply(
    app: &App,
    event_id: &str,
    reference: uuid::Uuid,
    succeeded: bool,
) -> ServiceResult<Option<WebhookAck>> {
    use tracing::Instrument;
    if !crate::telemetry::traces::on() {
        return apply_now(app, event_id, reference, succeeded).await;
    }
    let make = || tracing::info_span!("payment.apply", %reference, succeeded);
    // The trace the payment was checked out in, when it was kept; else within the webhook's.
    let span = match app.ledger.payment_trace(reference).await {
        Ok(Some(traceparent)) => {
            let span = make();
            crate::telemetry::traces::continue_from(&span, &traceparent);
            span
        }
        _ => crate::telemetry::traces::span(make),
    };
    apply_now(app, event_id, reference, succeeded)
        .instrument(span)
        .await
}

/// A provider's word on the payment `reference`, applied once per provider event id:
/// success → CONFIRMED (or, after the attempt expired, a refund: [`refund_late`]); failure →
/// EXPIRED with the stock back. `None`: no payment of that reference.
async fn apply_now(
    app: &App,
    event_id: &str,
    reference: uuid::Uuid,
    succeeded: bool,
) -> ServiceResult<Option<WebhookAck>> {
    let outcome = app
        .ledger
        .payment_event(event_id, reference, succeeded, late_refunding(app))
        .await?;
    match outcome {
        PaymentApplied::Applied(applied) => {
            settle(app, &applied).await;
            metrics::counter!("sluice_webhooks_total", "outcome" => "applied").increment(1);
            let result = if succeeded { "succeeded" } else { "failed" };
            metrics::counter!("sluice_payments_total", "result" => result).increment(1);
            let result = if applied.decision().effects.contains(&Effect::RefundRequired) {
                refund_late(app, &applied.record).await;
                WebhookResult::RefundRequired
            } else if applied.decision().changed {
                WebhookResult::Applied
            } else {
                WebhookResult::Ignored
            };
            Ok(Some(WebhookAck {
                result,
                state: applied.record.state,
            }))
        }
        PaymentApplied::Duplicate { record } => {
            metrics::counter!("sluice_webhooks_total", "outcome" => "duplicate").increment(1);
            Ok(Some(WebhookAck {
                result: WebhookResult::Duplicate,
                state: record.state,
            }))
        }
        PaymentApplied::UnknownReference => {
            metrics::counter!("sluice_webhooks_total", "outcome" => "unknown_reference")
                .increment(1);
            Ok(None)
        }
    }
}

/// The provider's word that the payment `reference` of `attempt` was paid `paid`: applied as a
/// success (as [`apply`]) when it is the hold's amount `held`; any other amount is logged and
/// changes nothing (`None`): an amount is always the hold's.
pub async fn apply_paid(
    app: &App,
    event_id: &str,
    reference: uuid::Uuid,
    attempt: AttemptId,
    held: Option<&Money>,
    paid: &Money,
) -> ServiceResult<Option<WebhookAck>> {
    if held != Some(paid) {
        tracing::error!(%attempt, ?held, ?paid,
            "a payment's amount is not the hold's: the attempt is not confirmed");
        return Ok(None);
    }
    apply(app, event_id, reference, true).await
}

/// What the provider says of the payment `reference` of `attempt`, applied once per
/// `event_id`: paid → CONFIRMED when it is the hold's amount ([`apply_paid`]); canceled →
/// EXPIRED with the stock back; a failed try → recorded on the payment (the buyer may try
/// again until the deadline); still open → nothing.
pub async fn apply_found(
    app: &App,
    event_id: &str,
    found: Found,
    attempt: AttemptId,
    reference: uuid::Uuid,
) -> ServiceResult<ProviderAck> {
    Ok(match found {
        Found::Paid(paid) => {
            let record = app.ledger.attempt(attempt).await?;
            let held = record
                .as_ref()
                .and_then(|r| r.hold.as_ref()?.amount.as_ref());
            ProviderAck::of(apply_paid(app, event_id, reference, attempt, held, &paid).await?)
        }
        Found::Canceled => ProviderAck::of(apply(app, event_id, reference, false).await?),
        Found::Open {
            last_failure: Some(failure),
        } => {
            app.ledger.set_payment_failure(reference, &failure).await?;
            app.ledger
                .note_payment(event_id, reference, "failed_try")
                .await?;
            ProviderAck::Recorded
        }
        Found::Open { last_failure: None } => ProviderAck::Ignored,
    })
}

/// Notes on the payment `reference` (the attempt's file) that the provider refused a refund.
pub async fn note_refund_refused(app: &App, reference: uuid::Uuid) -> ServiceResult<()> {
    let event = format!("refund_refused:{}", uuid::Uuid::new_v4().simple());
    app.ledger
        .note_payment(&event, reference, "refund_refused")
        .await?;
    Ok(())
}

/// Who gives back money that arrives after its attempt expired: sluice, through the provider
/// ([`refund_late`]), when `payments.refund_late_payments` is on and the provider has an API;
/// else the shop.
fn late_refunding(app: &App) -> Refunding {
    if app.config.payments.refund_late_payments && app.provider.has_api() {
        Refunding::Asked
    } else {
        Refunding::Owed
    }
}

/// Money that arrived after its attempt expired goes back through the provider when
/// `late_refunding` says sluice asks for it (the `refund_required` event is written either
/// way, its `data.refund` saying which). A refund the provider does not take is logged, counted
/// and noted in the attempt's file: the shop refunds it by hand.
pub async fn refund_late(app: &App, record: &AttemptRecord) {
    let provider = app.provider.name();
    if late_refunding(app) != Refunding::Asked {
        return;
    }
    let amount = record.hold.as_ref().and_then(|h| h.amount.as_ref());
    let Some(amount) = amount else { return };
    let key = format!("late-{}", record.id);
    let outcome = match app
        .provider
        .refund(record.provider_payment_id.as_deref(), amount.amount, &key)
        .await
    {
        Ok(taken) => {
            if let Some(id) = taken.id.as_deref() {
                if let Err(e) = app.ledger.set_provider_refund(record.id, id).await {
                    tracing::warn!(attempt = %record.id, error = %e, "a late payment's refund is not recorded");
                }
            }
            tracing::info!(attempt = %record.id, "a payment that came after its attempt expired is refunded");
            "taken"
        }
        Err(e) => {
            tracing::error!(attempt = %record.id, error = %e,
                "a payment that came after its attempt expired is not refunded: refund it by hand");
            // In the attempt's file too, where support looks.
            if let Some(reference) = record.payment_reference {
                if let Err(e) = note_refund_refused(app, reference).await {
                    tracing::warn!(attempt = %record.id, error = %e, "a refused refund is not noted");
                }
            }
            "refused"
        }
    };
    metrics::counter!("sluice_refunds_total", "provider" => provider, "kind" => "late",
        "outcome" => outcome)
    .increment(1);
}
