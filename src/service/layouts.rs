//! Venue layouts: checked whole, then kept, with the operator's entry in the admin audit log.

use super::{App, ServiceError, ServiceResult};
use crate::domain::venue::Layout;
use crate::domain::{AdminAction, Operator, Target};
use crate::ledger::LayoutSummary;

pub async fn create(
    app: &App,
    layout: Layout,
    operator: &Operator,
) -> ServiceResult<LayoutSummary> {
    layout
        .check()
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    let id = uuid::Uuid::now_v7();
    let seats = layout.seat_ids().len() as u32;
    // The entry says what was made, not every seat of it.
    let shown = serde_json::json!({ "layout_id": id, "name": layout.name, "seats": seats });
    let entry = AdminAction::new(
        operator,
        "createLayout",
        &Target::Layout(id),
        None,
        Some(shown),
    );
    app.ledger.create_layout(id, &layout, &entry).await?;
    Ok(LayoutSummary {
        id,
        name: layout.name,
        seats,
        created_at: chrono::Utc::now(),
    })
}
