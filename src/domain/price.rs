//! What a sale charges: its currency and the price of a unit, or of a seat by its category, in
//! the currency's smallest unit as the payment providers count it (KRW: won; USD: cents; JPY:
//! yen). A hold's amount is the sum of its units' prices, fixed when it is taken; a client never
//! names an amount.

use serde::{Deserialize, Serialize};

use super::sale::{is_unprintable, SaleError, Stock};

/// The most a unit may cost: a hold of a thousand such units stays well inside what the
/// ledger's 64-bit amounts and every provider carry.
pub const MAX_UNIT_PRICE: u64 = 1_000_000_000_000;

/// The most categories a sale may have.
pub const MAX_CATEGORIES: usize = 100;

/// An ISO 4217 currency, by its upper-case code (`KRW`, `USD`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency(iso_currency::Currency);

impl Currency {
    pub fn parse(code: &str) -> Result<Self, SaleError> {
        iso_currency::Currency::from_code(code)
            .filter(|c| c.code() == code)
            .map(Currency)
            .ok_or_else(|| {
                SaleError::new(
                    "currency",
                    "must be an ISO 4217 code in capitals, e.g. KRW or USD",
                )
            })
    }

    pub fn code(&self) -> &'static str {
        self.0.code()
    }

    /// Digits after the decimal point of the currency's major unit (KRW: 0, USD: 2): what a
    /// page divides an amount by to show it.
    pub fn exponent(&self) -> u32 {
        self.0.exponent().map(u32::from).unwrap_or(0)
    }
}

impl TryFrom<String> for Currency {
    type Error = &'static str;
    fn try_from(code: String) -> Result<Self, Self::Error> {
        Currency::parse(&code).map_err(|e| e.message)
    }
}

impl From<Currency> for String {
    fn from(c: Currency) -> String {
        c.code().to_owned()
    }
}

impl std::fmt::Display for Currency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// An amount in a currency's smallest unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Money {
    pub amount: u64,
    pub currency: Currency,
}

/// A sale's prices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    pub currency: Currency,
    /// Every unit of a quantity sale, and each seat in no category.
    pub unit_price: u64,
    /// Seat categories (VIP, R, S), each with its price and its seats; a seat is in one at
    /// most (a seat in none, or added later, costs `unit_price`).
    pub categories: Vec<Category>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Category {
    pub name: String,
    pub unit_price: u64,
    pub seats: Vec<String>,
}

impl Price {
    /// Nothing to pay for any unit: checkout confirms with no provider.
    pub fn is_free(&self) -> bool {
        self.unit_price == 0 && self.categories.iter().all(|c| c.unit_price == 0)
    }
}

/// A new sale's prices as an admin gives them.
#[derive(Clone, Debug, Default)]
pub struct NewPrice {
    pub currency: Option<String>,
    pub unit_price: Option<u64>,
    /// (name, price, seats).
    pub categories: Vec<(String, u64, Vec<String>)>,
}

impl NewPrice {
    /// The sale's prices over `stock`; `None` when none are given (the sale is not priced:
    /// its holds have no amount, and only a provider that needs none takes its payments).
    pub fn parse(self, stock: &Stock) -> Result<Option<Price>, SaleError> {
        if self.currency.is_none() && self.unit_price.is_none() && self.categories.is_empty() {
            return Ok(None);
        }
        let currency = Currency::parse(self.currency.as_deref().ok_or_else(|| {
            SaleError::new("currency", "is required with a unit_price or categories")
        })?)?;
        let in_range = |price: u64| price <= MAX_UNIT_PRICE;
        let unit_price = self.unit_price.unwrap_or(0);
        if !in_range(unit_price) {
            return Err(SaleError::new(
                "unit_price",
                "must be between 0 and 1000000000000 (the currency's smallest unit)",
            ));
        }
        if self.unit_price.is_none() {
            return Err(SaleError::new(
                "unit_price",
                "is required with a currency: the price of a unit, or of a seat in no category",
            ));
        }
        let categories = parse_categories(self.categories, stock)?;
        Ok(Some(Price {
            currency,
            unit_price,
            categories,
        }))
    }
}

/// Categories of a seated sale: unique names (1 to 32 printable characters), each with 1 or
/// more seats of the sale, a seat in one at most.
fn parse_categories(
    given: Vec<(String, u64, Vec<String>)>,
    stock: &Stock,
) -> Result<Vec<Category>, SaleError> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    let Stock::Seats(seats) = stock else {
        return Err(SaleError::new(
            "categories",
            "only a sale of named seats has seat categories",
        ));
    };
    if given.len() > MAX_CATEGORIES {
        return Err(SaleError::new("categories", "at most 100 categories"));
    }
    let mut placed = std::collections::HashSet::with_capacity(seats.len());
    let mut names = std::collections::HashSet::new();
    let mut categories = Vec::with_capacity(given.len());
    for (name, unit_price, members) in given {
        let name = name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 32 || name.chars().any(is_unprintable) {
            return Err(SaleError::new(
                "categories",
                "a category's name is 1 to 32 printable characters",
            ));
        }
        if !names.insert(name.clone()) {
            return Err(SaleError::new(
                "categories",
                "category names must be unique",
            ));
        }
        if unit_price > MAX_UNIT_PRICE {
            return Err(SaleError::new(
                "categories",
                "a category's unit_price is between 0 and 1000000000000",
            ));
        }
        if members.is_empty() {
            return Err(SaleError::new(
                "categories",
                "a category lists 1 or more seats",
            ));
        }
        for seat in &members {
            if !placed.insert(seat.clone()) {
                return Err(SaleError::new(
                    "categories",
                    "a seat is in one category only",
                ));
            }
        }
        categories.push(Category {
            name,
            unit_price,
            seats: members,
        });
    }
    let of_sale: std::collections::HashSet<&str> = seats.iter().map(String::as_str).collect();
    if placed.iter().any(|seat| !of_sale.contains(seat.as_str())) {
        return Err(SaleError::new(
            "categories",
            "every seat a category lists is one of the sale's seats",
        ));
    }
    Ok(categories)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(ids: &[&str]) -> Stock {
        Stock::Seats(ids.iter().map(|s| s.to_string()).collect())
    }

    fn category(name: &str, price: u64, ids: &[&str]) -> (String, u64, Vec<String>) {
        (
            name.into(),
            price,
            ids.iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn a_currency_is_an_iso_code_in_capitals() {
        assert_eq!(Currency::parse("KRW").unwrap().exponent(), 0);
        assert_eq!(Currency::parse("USD").unwrap().exponent(), 2);
        for bad in ["krw", "XYZ", "", "US", "USDD"] {
            assert!(Currency::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_price_given_is_an_unpriced_sale_and_a_price_needs_its_currency() {
        let stock = Stock::Quantity(10);
        assert_eq!(NewPrice::default().parse(&stock).unwrap(), None);
        let no_currency = NewPrice {
            unit_price: Some(5000),
            ..Default::default()
        };
        assert_eq!(no_currency.parse(&stock).unwrap_err().field, "currency");
        let free = NewPrice {
            currency: Some("KRW".into()),
            unit_price: Some(0),
            ..Default::default()
        };
        assert!(free.parse(&stock).unwrap().unwrap().is_free());
    }

    #[test]
    fn a_seat_is_in_one_category_at_most_and_one_of_the_sales() {
        let stock = seats(&["A-1", "A-2", "B-1"]);
        let priced = |categories| NewPrice {
            currency: Some("KRW".into()),
            unit_price: Some(90_000),
            categories,
        };
        let ok = priced(vec![
            category("VIP", 150_000, &["A-1", "A-2"]),
            category("R", 0, &["B-1"]),
        ]);
        let price = ok.parse(&stock).unwrap().unwrap();
        assert_eq!(price.categories.len(), 2);
        assert!(!price.is_free());
        for bad in [
            vec![
                category("VIP", 1, &["A-1", "A-2"]),
                category("R", 1, &["B-1", "A-1"]),
            ],
            vec![category("VIP", 1, &["A-1", "A-2", "B-1", "C-9"])],
            vec![
                category("VIP", 1, &["A-1"]),
                category("VIP", 1, &["A-2", "B-1"]),
            ],
        ] {
            assert_eq!(priced(bad).parse(&stock).unwrap_err().field, "categories");
        }
        let on_quantity = priced(vec![category("VIP", 1, &["A-1"])]);
        assert!(on_quantity.parse(&Stock::Quantity(3)).is_err());
    }
}
