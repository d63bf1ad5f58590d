//! An operator's refund of a purchase: the machine's `Refund` event ends the CONFIRMED attempt
//! EXPIRED (`refunded`), the ledger gives its units back and writes `refund_required` for the
//! payment side in the same transaction, and the queue store gets the units back (for the
//! queue's next users, while the sale is open); its admin audit entry is written in the same
//! transaction. A second refund is the machine's repeat: it changes nothing and is not logged
//! again.

use serde_json::{json, Value};

use super::operators::require;
use super::support::{file_of, AttemptFile};
use super::transition::{settle, settle_refusal};
use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, Operator, Role, SaleId};
use crate::ledger::{AttemptRecord, Audit, LedgerError};

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
    let audit = Audit {
        actor,
        action: "refundAttempt",
        show: &|record| Some(attempt_json(record)),
    };
    let applied = match app.ledger.refund(id, &audit).await {
        Ok(applied) => applied,
        Err(LedgerError::NotFound) => return Err(ServiceError::NotFound("attempt")),
        Err(e) => return Err(settle_refusal(app, e).await.into()),
    };
    settle(app, &applied).await;
    file_of(app, applied.record).await
}
