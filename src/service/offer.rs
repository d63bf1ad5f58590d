//! What a user may buy in a sale: its name, limits and free stock — for the waiting-room page
//! and any storefront. Free seats come from the ledger (the truth), read only for seated sales.

use super::{App, ServiceError, ServiceResult};
use crate::domain::{Sale, SaleId, Stock};

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub sale: Sale,
    pub remaining: u32,
    /// Seats still free (seated sales only).
    pub free_seats: Option<Vec<String>>,
}

pub async fn offer(app: &App, id: SaleId) -> ServiceResult<Offer> {
    let record = app
        .ledger
        .sale(id)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let free_seats = match &record.sale.stock {
        Stock::Quantity(_) => None,
        Stock::Seats(_) => match app.ledger.snapshot(id).await?.free {
            Stock::Seats(free) => Some(free),
            Stock::Quantity(_) => Some(Vec::new()),
        },
    };
    Ok(Offer {
        sale: record.sale,
        remaining: record.remaining,
        free_seats,
    })
}
