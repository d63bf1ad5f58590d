//! A sale: what is sold, when, and how fast people are let in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::SaleId;

/// What is sold: a count of identical units, or named seats (each sold at most once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stock {
    Quantity(u32),
    Seats(Vec<String>),
}

impl Stock {
    pub fn total(&self) -> u32 {
        match self {
            Stock::Quantity(n) => *n,
            Stock::Seats(seats) => seats.len() as u32,
        }
    }
    pub fn kind(&self) -> StockKind {
        match self {
            Stock::Quantity(_) => StockKind::Quantity,
            Stock::Seats(_) => StockKind::Seats,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StockKind {
    Quantity,
    Seats,
}

impl StockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StockKind::Quantity => "quantity",
            StockKind::Seats => "seats",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "quantity" => Some(StockKind::Quantity),
            "seats" => Some(StockKind::Seats),
            _ => None,
        }
    }
}

/// Whether a sale takes joins and admits. `Open` before `opens_at` means "scheduled".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleStatus {
    Open,
    Paused,
    Closed,
}

impl SaleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SaleStatus::Open => "open",
            SaleStatus::Paused => "paused",
            SaleStatus::Closed => "closed",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(SaleStatus::Open),
            "paused" => Some(SaleStatus::Paused),
            "closed" => Some(SaleStatus::Closed),
            _ => None,
        }
    }
}

/// How fast the valve lets people in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// Users admitted per minute while the queue is not empty (manual), or where the adaptive
    /// controller starts from.
    pub rate_per_minute: u32,
    /// Cap on admitted + holding + paying users at once.
    pub max_active: u32,
    pub mode: AdmissionMode,
}

/// Who sets the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdmissionMode {
    /// The admin: `rate_per_minute` as set.
    Manual,
    /// The controller, from the back end's pressure, within these bounds (users per minute).
    Adaptive { min: u32, max: u32 },
}

const RATE_RANGE: std::ops::RangeInclusive<u32> = 1..=1_000_000;

impl Admission {
    /// `adaptive`: the controller's `(min, max)` users per minute; `None`: manual.
    pub fn parse(
        rate_per_minute: u32,
        max_active: u32,
        adaptive: Option<(u32, u32)>,
    ) -> Result<Self, SaleError> {
        for (field, value) in [
            ("rate_per_minute", rate_per_minute),
            ("max_active", max_active),
        ] {
            if !RATE_RANGE.contains(&value) {
                return Err(SaleError::new(field, "must be between 1 and 1000000"));
            }
        }
        let mode = match adaptive {
            None => AdmissionMode::Manual,
            Some((min, max)) => {
                if !RATE_RANGE.contains(&min) || !RATE_RANGE.contains(&max) {
                    return Err(SaleError::new(
                        "min_rate_per_minute",
                        "adaptive mode needs min_rate_per_minute and max_rate_per_minute, \
                         each between 1 and 1000000",
                    ));
                }
                if min > max {
                    return Err(SaleError::new(
                        "min_rate_per_minute",
                        "must not be above max_rate_per_minute",
                    ));
                }
                AdmissionMode::Adaptive { min, max }
            }
        };
        Ok(Admission {
            rate_per_minute,
            max_active,
            mode,
        })
    }

    /// From the ledger's columns (adaptive when both bounds are stored); trusted, not checked.
    pub fn from_stored(
        rate_per_minute: i64,
        max_active: i64,
        adaptive_min: Option<i64>,
        adaptive_max: Option<i64>,
    ) -> Self {
        let mode = match (adaptive_min, adaptive_max) {
            (Some(min), Some(max)) => AdmissionMode::Adaptive {
                min: min as u32,
                max: max as u32,
            },
            _ => AdmissionMode::Manual,
        };
        Admission {
            rate_per_minute: rate_per_minute as u32,
            max_active: max_active as u32,
            mode,
        }
    }

    /// The adaptive bounds as the ledger stores them (`None` in manual mode).
    pub fn stored_bounds(&self) -> (Option<i64>, Option<i64>) {
        match self.mode {
            AdmissionMode::Manual => (None, None),
            AdmissionMode::Adaptive { min, max } => (Some(min as i64), Some(max as i64)),
        }
    }
}

/// Time limits of each step, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ttls {
    pub admission_secs: u32,
    pub hold_secs: u32,
    pub payment_secs: u32,
}

/// A sale as stored in the ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sale {
    pub id: SaleId,
    pub name: String,
    pub opens_at: DateTime<Utc>,
    pub closes_at: Option<DateTime<Utc>>,
    pub stock: Stock,
    pub per_user_limit: u32,
    pub ttls: Ttls,
    pub admission: Admission,
    /// The work a join must show (off unless an admin asks for it).
    pub proof_of_work: super::ProofOfWork,
    pub opening: Opening,
    /// What its units cost; `None`: not priced (holds have no amount).
    pub price: Option<super::Price>,
    pub status: SaleStatus,
    pub created_at: DateTime<Utc>,
    /// The venue layout its seats are drawn from (named-seat sales made from one).
    pub layout: Option<uuid::Uuid>,
    /// A free sale whose join is the claim: one unit, CONFIRMED at once, while nobody waits
    /// and the ledger keeps up; otherwise the line fronts it and the admitter claims for each
    /// in turn.
    pub instant: bool,
}

/// How a sale opens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Opening {
    /// Join order, from the first join to the last.
    Fifo,
    /// Everyone who joined before the opening, in the order of SHA-1 of `<seed>:<user id>`;
    /// later joins after them in join order. The seed is published with the sale.
    LotteryAtOpen { seed: String },
}

impl Opening {
    pub fn as_str(&self) -> &'static str {
        match self {
            Opening::Fifo => "fifo",
            Opening::LotteryAtOpen { .. } => "lottery_at_open",
        }
    }

    /// From the ledger's columns.
    pub fn from_stored(opening: &str, seed: String) -> Self {
        match opening {
            "lottery_at_open" => Opening::LotteryAtOpen { seed },
            _ => Opening::Fifo,
        }
    }

    pub fn seed(&self) -> Option<&str> {
        match self {
            Opening::Fifo => None,
            Opening::LotteryAtOpen { seed } => Some(seed),
        }
    }
}

/// What an admin asks for; [`NewSale::parse`] turns the raw request into a [`Sale`].
pub struct NewSale {
    pub name: String,
    pub opens_at: Option<DateTime<Utc>>,
    pub closes_at: Option<DateTime<Utc>>,
    pub quantity: Option<u32>,
    pub seats: Option<Vec<String>>,
    pub per_user_limit: u32,
    pub ttls: Ttls,
    pub rate_per_minute: u32,
    pub max_active: u32,
    /// The adaptive controller's `(min, max)` users per minute; `None`: manual.
    pub adaptive: Option<(u32, u32)>,
    /// `Some(seed)`: a lottery at the opening (an empty seed draws one); `None`: FIFO.
    pub lottery: Option<String>,
    pub price: super::NewPrice,
    /// The venue layout the seats (and the categories' seats) come from.
    pub layout: Option<uuid::Uuid>,
    /// Joins claim a unit at once ([`Sale::instant`]).
    pub instant: bool,
}

impl NewSale {
    pub fn parse(self, now: DateTime<Utc>) -> Result<Sale, SaleError> {
        let name = self.name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(SaleError::new("name", "must be 1 to 200 characters"));
        }
        if name.chars().any(is_unprintable) {
            return Err(SaleError::new(
                "name",
                "must not hold control characters (NUL, newline, tab), bidirectional \
                 overrides or a byte order mark",
            ));
        }
        let stock = match (self.quantity, self.seats) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(SaleError::new(
                    "stock",
                    "give exactly one of `quantity` or `seats`",
                ))
            }
            (Some(n), None) if (1..=1_000_000).contains(&n) => Stock::Quantity(n),
            (Some(_), None) => {
                return Err(SaleError::new("quantity", "must be between 1 and 1000000"))
            }
            (None, Some(seats)) => Stock::Seats(parse_seats(seats)?),
        };
        if !(1..=1000).contains(&self.per_user_limit) {
            return Err(SaleError::new(
                "per_user_limit",
                "must be between 1 and 1000",
            ));
        }
        for (field, secs) in [
            ("admission_ttl_secs", self.ttls.admission_secs),
            ("hold_ttl_secs", self.ttls.hold_secs),
            ("payment_ttl_secs", self.ttls.payment_secs),
        ] {
            if !(1..=86_400).contains(&secs) {
                return Err(SaleError::new(field, "must be between 1 and 86400 seconds"));
            }
        }
        let admission = Admission::parse(self.rate_per_minute, self.max_active, self.adaptive)?;
        let price = self.price.parse(&stock)?;
        if self.instant {
            if !matches!(stock, Stock::Quantity(_)) {
                return Err(SaleError::new(
                    "instant",
                    "an instant sale sells a quantity, not named seats",
                ));
            }
            if price
                .as_ref()
                .is_some_and(|p| p.unit_price > 0 || !p.categories.is_empty())
            {
                return Err(SaleError::new(
                    "instant",
                    "an instant sale is free: its unit_price is 0 (or it has no price)",
                ));
            }
        }
        let opens_at = self.opens_at.unwrap_or(now);
        if let Some(closes_at) = self.closes_at {
            if closes_at <= opens_at {
                return Err(SaleError::new("closes_at", "must be after opens_at"));
            }
        }
        Ok(Sale {
            id: SaleId::new(),
            name,
            opens_at,
            closes_at: self.closes_at,
            stock,
            per_user_limit: self.per_user_limit,
            ttls: self.ttls,
            admission,
            proof_of_work: super::ProofOfWork::default(),
            opening: match self.lottery {
                None => Opening::Fifo,
                Some(seed) if seed.is_empty() => Opening::LotteryAtOpen {
                    seed: hex::encode(rand::random::<[u8; 16]>()),
                },
                Some(seed) if seed.len() > 128 || !seed.bytes().all(|b| b.is_ascii_graphic()) => {
                    return Err(SaleError::new(
                        "lottery_seed",
                        "1 to 128 printable characters",
                    ))
                }
                Some(seed) => Opening::LotteryAtOpen { seed },
            },
            price,
            status: SaleStatus::Open,
            created_at: now,
            layout: self.layout,
            instant: self.instant,
        })
    }
}

fn parse_seats(seats: Vec<String>) -> Result<Vec<String>, SaleError> {
    parse_seats_of("seats", seats)
}

/// Seat ids as `field` lists them: 1 to 100,000 unique, each a valid seat id.
pub(crate) fn parse_seats_of(
    field: &'static str,
    seats: Vec<String>,
) -> Result<Vec<String>, SaleError> {
    if seats.is_empty() || seats.len() > 100_000 {
        return Err(SaleError::new(field, "must list 1 to 100000 seats"));
    }
    let mut seen = std::collections::HashSet::with_capacity(seats.len());
    for seat in &seats {
        parse_seat_id(seat).map_err(|_| {
            SaleError::new(
                field,
                "seat ids are 1 to 64 letters, digits, '-', '_' or ':'",
            )
        })?;
        if !seen.insert(seat.as_str()) {
            return Err(SaleError::new(field, "seat ids must be unique"));
        }
    }
    Ok(seats)
}

/// A character a name shown to people must not hold: control characters (NUL, newline, tab,
/// C1), the bidirectional embeddings, overrides and isolates (they reorder the text around
/// them on a page), line and paragraph separators, and the byte order mark.
pub fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}')
}

/// A seat id: 1..=64 of `[A-Za-z0-9_:-]` (no characters that need escaping in Redis or URLs).
pub fn parse_seat_id(seat: &str) -> Result<&str, SaleError> {
    let ok = !seat.is_empty()
        && seat.len() <= 64
        && seat
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b':');
    if ok {
        Ok(seat)
    } else {
        Err(SaleError::new(
            "seat_ids",
            "seat ids are 1 to 64 letters, digits, '-', '_' or ':'",
        ))
    }
}

/// A request field that does not parse; `field` names it for the problem+json answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SaleError {
    pub field: &'static str,
    pub message: &'static str,
}

impl SaleError {
    pub fn new(field: &'static str, message: &'static str) -> Self {
        SaleError { field, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_sale() -> NewSale {
        NewSale {
            name: "Concert".into(),
            opens_at: None,
            closes_at: None,
            quantity: Some(100),
            seats: None,
            per_user_limit: 4,
            ttls: Ttls {
                admission_secs: 60,
                hold_secs: 300,
                payment_secs: 600,
            },
            rate_per_minute: 600,
            max_active: 100,
            adaptive: None,
            lottery: None,
            layout: None,
            price: Default::default(),
            instant: false,
        }
    }

    #[test]
    fn a_valid_sale_parses() {
        let sale = new_sale().parse(Utc::now()).unwrap();
        assert_eq!(sale.stock, Stock::Quantity(100));
        assert_eq!(sale.status, SaleStatus::Open);
        for name in ["서울 콘서트 — 2026", "Café \u{200F}שלום", "東京 ドーム"] {
            let mut named = new_sale();
            named.name = name.into();
            assert_eq!(named.parse(Utc::now()).unwrap().name, name);
        }
    }

    /// A change to a valid sale.
    type Tweak = Box<dyn Fn(&mut NewSale)>;

    #[test]
    fn each_bad_field_is_named() {
        let cases: Vec<(Tweak, &str)> = vec![
            (Box::new(|s| s.name = "  ".into()), "name"),
            (Box::new(|s| s.name = "a\u{0}b".into()), "name"),
            (Box::new(|s| s.name = "two\nlines".into()), "name"),
            (Box::new(|s| s.name = "a\tb".into()), "name"),
            (Box::new(|s| s.name = "price \u{202E}0001".into()), "name"),
            (Box::new(|s| s.name = "\u{FEFF}Concert".into()), "name"),
            (Box::new(|s| s.name = "a\u{2066}b".into()), "name"),
            (Box::new(|s| s.seats = Some(vec!["A1".into()])), "stock"),
            (Box::new(|s| s.quantity = Some(0)), "quantity"),
            (
                Box::new(|s| {
                    s.quantity = None;
                    s.seats = Some(vec!["A1".into(), "A1".into()])
                }),
                "seats",
            ),
            (
                Box::new(|s| {
                    s.quantity = None;
                    s.seats = Some(vec!["A 1".into()])
                }),
                "seats",
            ),
            (Box::new(|s| s.per_user_limit = 0), "per_user_limit"),
            (Box::new(|s| s.ttls.hold_secs = 0), "hold_ttl_secs"),
            (Box::new(|s| s.rate_per_minute = 0), "rate_per_minute"),
            (Box::new(|s| s.max_active = 0), "max_active"),
            (
                Box::new(|s| s.adaptive = Some((600, 60))),
                "min_rate_per_minute",
            ),
            (
                Box::new(|s| s.adaptive = Some((0, 60))),
                "min_rate_per_minute",
            ),
            (
                Box::new(|s| {
                    s.opens_at = Some(Utc::now());
                    s.closes_at = Some(Utc::now() - chrono::Duration::hours(1))
                }),
                "closes_at",
            ),
        ];
        let adaptive = NewSale {
            adaptive: Some((60, 6000)),
            ..new_sale()
        };
        assert_eq!(
            adaptive.parse(Utc::now()).unwrap().admission.mode,
            AdmissionMode::Adaptive { min: 60, max: 6000 }
        );
        for (mutate, field) in cases {
            let mut spec = new_sale();
            mutate(&mut spec);
            assert_eq!(spec.parse(Utc::now()).unwrap_err().field, field);
        }
    }
}
