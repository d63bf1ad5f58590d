//! An operator's change to a running sale's stock: units added to or withdrawn from a quantity
//! sale, seats added or withdrawn by name. Only free units can be withdrawn (the ledger checks
//! it in the change's transaction); a sale keeps at least one unit.

use super::sale::{parse_seats_of, SaleError, StockKind};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StockChange {
    Add(u32),
    Withdraw(u32),
    AddSeats(Vec<String>),
    WithdrawSeats(Vec<String>),
}

/// The most units one change adds or withdraws: one change is one transaction, kept short.
pub const MAX_UNITS_A_CHANGE: u32 = 100_000;

/// The most units a sale has, as at its creation.
pub const MAX_UNITS_A_SALE: u32 = 1_000_000;

impl StockChange {
    /// The change one of the four fields asks for, for a sale of `kind`: exactly one given.
    pub fn parse(
        kind: StockKind,
        add: Option<u32>,
        withdraw: Option<u32>,
        add_seats: Option<Vec<String>>,
        withdraw_seats: Option<Vec<String>>,
    ) -> Result<StockChange, SaleError> {
        let units = |field, n: u32| {
            if (1..=MAX_UNITS_A_CHANGE).contains(&n) {
                Ok(n)
            } else {
                Err(SaleError::new(field, "must be between 1 and 100000"))
            }
        };
        let change = match (add, withdraw, add_seats, withdraw_seats) {
            (Some(n), None, None, None) => StockChange::Add(units("add", n)?),
            (None, Some(n), None, None) => StockChange::Withdraw(units("withdraw", n)?),
            (None, None, Some(s), None) => StockChange::AddSeats(parse_seats_of("add_seats", s)?),
            (None, None, None, Some(s)) => {
                StockChange::WithdrawSeats(parse_seats_of("withdraw_seats", s)?)
            }
            _ => {
                return Err(SaleError::new(
                    "add",
                    "give exactly one of add, withdraw, add_seats and withdraw_seats",
                ))
            }
        };
        if change.kind() != kind {
            return Err(SaleError::new(
                change.field(),
                match kind {
                    StockKind::Quantity => "this sale sells a quantity: use add or withdraw",
                    StockKind::Seats => "this sale sells seats: use add_seats or withdraw_seats",
                },
            ));
        }
        Ok(change)
    }

    /// The kind of stock it changes.
    pub fn kind(&self) -> StockKind {
        match self {
            StockChange::Add(_) | StockChange::Withdraw(_) => StockKind::Quantity,
            StockChange::AddSeats(_) | StockChange::WithdrawSeats(_) => StockKind::Seats,
        }
    }

    /// The request field that asks for it.
    pub fn field(&self) -> &'static str {
        match self {
            StockChange::Add(_) => "add",
            StockChange::Withdraw(_) => "withdraw",
            StockChange::AddSeats(_) => "add_seats",
            StockChange::WithdrawSeats(_) => "withdraw_seats",
        }
    }

    /// How many units it adds or withdraws.
    pub fn units(&self) -> u32 {
        match self {
            StockChange::Add(n) | StockChange::Withdraw(n) => *n,
            StockChange::AddSeats(s) | StockChange::WithdrawSeats(s) => s.len() as u32,
        }
    }

    pub fn adds(&self) -> bool {
        match self {
            StockChange::Add(_) | StockChange::AddSeats(_) => true,
            StockChange::Withdraw(_) | StockChange::WithdrawSeats(_) => false,
        }
    }

    /// Refuses a change that would take the sale past [`MAX_UNITS_A_SALE`].
    pub fn fits_in(&self, total: u32) -> Result<(), SaleError> {
        if self.adds() && u64::from(total) + u64::from(self.units()) > u64::from(MAX_UNITS_A_SALE) {
            return Err(SaleError::new(
                self.field(),
                "a sale has at most 1000000 units",
            ));
        }
        Ok(())
    }

    /// The sale's total after it, from `total` before.
    pub fn total_after(&self, total: u32) -> u32 {
        match self.adds() {
            true => total.saturating_add(self.units()),
            false => total.saturating_sub(self.units()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_change_of_the_sales_kind_is_taken() {
        let q = StockKind::Quantity;
        assert_eq!(
            StockChange::parse(q, Some(5), None, None, None),
            Ok(StockChange::Add(5))
        );
        assert_eq!(
            StockChange::parse(q, None, Some(2), None, None).map(|c| c.total_after(10)),
            Ok(8)
        );
        let none = StockChange::parse(q, None, None, None, None).unwrap_err();
        assert_eq!(none.field, "add");
        assert!(StockChange::parse(q, Some(1), Some(1), None, None).is_err());
        assert!(StockChange::parse(q, Some(0), None, None, None).is_err());
        assert!(StockChange::parse(q, Some(100_001), None, None, None).is_err());
        assert!(StockChange::Add(10).fits_in(999_990).is_ok());
        assert_eq!(
            StockChange::Add(11).fits_in(999_990).unwrap_err().field,
            "add"
        );
        assert!(StockChange::Withdraw(11).fits_in(999_990).is_ok());
        let seats = Some(vec!["A1".to_owned()]);
        let wrong = StockChange::parse(q, None, None, seats.clone(), None).unwrap_err();
        assert_eq!(wrong.field, "add_seats");
        let s = StockKind::Seats;
        assert_eq!(
            StockChange::parse(s, None, None, None, seats),
            Ok(StockChange::WithdrawSeats(vec!["A1".into()]))
        );
        let twice = Some(vec!["A1".to_owned(), "A1".to_owned()]);
        assert_eq!(
            StockChange::parse(s, None, None, twice, None)
                .unwrap_err()
                .field,
            "add_seats"
        );
    }
}
