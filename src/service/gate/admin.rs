//! The operators' gates: checked whole, kept with the operator's entry in the admin audit log,
//! and read into this replica's set at once (the others read them at their next refresh).

use uuid::Uuid;

use super::refresh;
use crate::domain::gate::Gate;
use crate::domain::{AdminAction, NewSale, Operator, Stock, Target};
use crate::service::sales::SaleAudit;
use crate::service::{App, ServiceError, ServiceResult};

/// What the audit log shows of a gate: all of it (a secret header is kept as its digest).
fn shown(gate: &Gate) -> serde_json::Value {
    serde_json::to_value(gate).unwrap_or_default()
}

/// Checks a gate and the sale it names: a quantity sale, not instant (its line admits; its
/// stock is never held).
async fn checked(app: &App, gate: &Gate) -> ServiceResult<()> {
    gate.check()
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    let sale = app
        .ledger
        .sale_settings(gate.sale)
        .await?
        .ok_or_else(|| ServiceError::validation("sale_id", "no such sale"))?;
    if !matches!(sale.stock, Stock::Quantity(_)) || sale.instant {
        return Err(ServiceError::validation(
            "sale_id",
            "a gate's line is a quantity sale that is not instant",
        ));
    }
    Ok(())
}

/// A new gate; with `line`, over a new sale of its own made from it (`gate.sale` is then
/// that sale's), with `sale_audit`'s entry.
pub async fn create(
    app: &App,
    mut gate: Gate,
    line: Option<(NewSale, &SaleAudit<'_>)>,
    operator: &Operator,
) -> ServiceResult<Gate> {
    gate.id = Uuid::now_v7();
    if let Some((new, sale_audit)) = line {
        // The rules first: a gate refused makes no sale.
        gate.check()
            .map_err(|e| ServiceError::validation(e.field, e.message))?;
        gate.sale = crate::service::sales::create_line(app, new, sale_audit)
            .await?
            .sale
            .id;
    }
    checked(app, &gate).await?;
    let entry = AdminAction::new(
        operator,
        "createGate",
        &Target::Gate(gate.id),
        None,
        Some(shown(&gate)),
    );
    app.ledger.put_gate(&gate, false, &entry).await?;
    refresh(app).await?;
    Ok(gate)
}

/// Replaces a gate's rules (its line stays the same sale).
pub async fn update(app: &App, gate: Gate, operator: &Operator) -> ServiceResult<Gate> {
    let before = app
        .gates
        .gate(gate.id)
        .ok_or(ServiceError::NotFound("gate"))?;
    if before.sale != gate.sale {
        return Err(ServiceError::validation(
            "sale_id",
            "a gate's line cannot change",
        ));
    }
    checked(app, &gate).await?;
    let entry = AdminAction::new(
        operator,
        "updateGate",
        &Target::Gate(gate.id),
        Some(shown(&before)),
        Some(shown(&gate)),
    );
    app.ledger.put_gate(&gate, true, &entry).await?;
    refresh(app).await?;
    Ok(gate)
}

pub async fn delete(app: &App, id: Uuid, operator: &Operator) -> ServiceResult<()> {
    let before = app.gates.gate(id).ok_or(ServiceError::NotFound("gate"))?;
    let entry = AdminAction::new(
        operator,
        "deleteGate",
        &Target::Gate(id),
        Some(shown(&before)),
        None,
    );
    if !app.ledger.delete_gate(id, &entry).await? {
        return Err(ServiceError::NotFound("gate"));
    }
    refresh(app).await
}
