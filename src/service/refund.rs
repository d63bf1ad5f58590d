//! An operator's refund of a purchase: the machine's `Refund` event ends the CONFIRMED attempt
//! EXPIRED (`refunded`), the ledger gives its units back and writes `refund_required` in the
//! same transaction (`data.refund`: `taken` when the provider took the refund first, else
//! `owed`: the shop gives the money back), and the queue store gets the units back (for the
//! queue's next users, while the sale is open); its admin audit entry is written in the same
//! transaction. A second refund is the machine's repeat: it changes nothing and is not logged
//! again.

use serde_json::{json, Value};

use super::operators::require;
use super::support::{file_of, AttemptFile};
use super::transition::{settle, settle_refusal};
use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, AttemptState, Operator, Refunding, Role, SaleId};
use crate::ledger::{AttemptRecord, Audit, LedgerError};
use crate::payments::ProviderError;

/// What the audit log shows of the attempt before and after.
fn attempt_json(record: &AttemptRecord) -> Value {
    json!({
        "state": record.state.name(),
        "reason": record.state.reason().map(|r| r.as_str()),
        "user_id": record.user.as_str(),
        "quantity": record.hold.as_ref().map(|h| h.quantity),
        "seat_ids": record.hold.as_ref().map(|h| &h.seats),
        "payment_reference": record.payment_reference,
    })
}

pub async fn refund(
    app: &App,
    actor: &Operator,
    sale: SaleId,
    id: AttemptId,
) -> ServiceResult<AttemptFile> {
    require(actor, Role::Operator)?;
    if id.sale != sale {
        return Err(ServiceError::NotFound("attempt"));
    }
    // The money goes back through the provider first, where it has an API; else the shop
    // gives it back, told by the `refund_required` event.
    let mut refunding = Refunding::Owed;
    if app.provider.has_api() {
        let record = app
            .ledger
            .attempt(id)
            .await?
            .ok_or(ServiceError::NotFound("attempt"))?;
        if record.state == AttemptState::Confirmed {
            refund_at_provider(app, &record).await?;
            refunding = Refunding::Taken;
        }
    }
    let audit = Audit {
        actor,
        action: "refundAttempt",
        show: &|record| Some(attempt_json(record)),
    };
    let applied = match app.ledger.refund(id, &audit, refunding).await {
        Ok(applied) => applied,
        Err(LedgerError::NotFound) => return Err(ServiceError::NotFound("attempt")),
        Err(e) => return Err(settle_refusal(app, e).await.into()),
    };
    settle(app, &applied).await;
    file_of(app, applied.record).await
}

/// The purchase's money back through the provider, before the ledger ends the attempt: it ends
/// EXPIRED (`refunded`) only once the provider took the refund. A refusal is answered (502),
/// noted in the attempt's file and counted, and changes nothing else.
async fn refund_at_provider(app: &App, record: &AttemptRecord) -> ServiceResult<()> {
    let (Some(amount), Some(reference)) = (
        record.hold.as_ref().and_then(|h| h.amount.as_ref()),
        record.payment_reference,
    ) else {
        return Err(ServiceError::validation(
            "attempt",
            "the purchase has no amount or payment to refund at the provider",
        ));
    };
    let provider = app.provider.name();
    let key = format!("operator-{}", record.id);
    let answer = app
        .provider
        .refund(record.provider_payment_id.as_deref(), amount.amount, &key)
        .await;
    let outcome = match &answer {
        Ok(_) => "taken",
        Err(ProviderError::Refused(_)) => "refused",
        Err(ProviderError::Unavailable(_)) => "unavailable",
    };
    metrics::counter!("sluice_refunds_total", "provider" => provider, "kind" => "operator",
        "outcome" => outcome)
    .increment(1);
    match answer {
        Ok(taken) => {
            let noted = taken.id.clone().unwrap_or_else(|| key.clone());
            if let Some(id) = taken.id.as_deref() {
                app.ledger.set_provider_refund(record.id, id).await?;
            }
            app.ledger
                .note_payment(&format!("refund:{noted}"), reference, "refund_taken")
                .await?;
            Ok(())
        }
        Err(e) => {
            if let ProviderError::Refused(detail) = &e {
                tracing::warn!(attempt = %record.id, %detail, "the provider refused a refund");
                super::payment::note_refund_refused(app, reference).await?;
            }
            Err(super::checkout::provider_error(e))
        }
    }
}
