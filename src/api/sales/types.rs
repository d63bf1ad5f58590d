//! The sales API's JSON shapes (request and response bodies) and their conversions from the
//! service's types. Field docs become the OpenAPI schema descriptions.

use chrono::{DateTime, Utc};
use poem_openapi::{Enum, Object};

use crate::api::spec::example_time;
use crate::api::text::Text;
use crate::domain::valve::Change;
use crate::domain::ExpiryReason;
use crate::domain::StockKind;
use crate::domain::{AdmissionMode, Opening, SaleStatus, Stock};
use crate::ledger::SaleRecord;
use crate::ledger::SaleSummary;
use crate::service::figures::Point;
use crate::service::sales::{AdmissionState, SaleStats};
use crate::service::support::Page;

fn default_per_user_limit() -> u32 {
    4
}

fn default_admission_ttl() -> u32 {
    120
}

fn default_hold_ttl() -> u32 {
    300
}

fn default_payment_ttl() -> u32 {
    600
}

fn default_rate() -> u32 {
    600
}

fn default_max_active() -> u32 {
    1000
}

/// A new sale. Give exactly one of `quantity` or `seats`.
#[derive(Debug, Clone, Object, serde::Serialize)]
#[oai(example)]
pub struct CreateSale {
    /// Shown to users (1 to 200 characters, no control or bidirectional-override characters).
    #[oai(validator(min_length = 1, max_length = 200))]
    pub name: Text,
    /// When admission starts; joins before it wait in the queue. Default: now.
    #[oai(skip_serializing_if_is_none)]
    pub opens_at: Option<DateTime<Utc>>,
    /// After it, joins are refused; those already waiting are still admitted in turn, and once
    /// nobody waits the sale closes by itself (closing it earlier stops admission).
    #[oai(skip_serializing_if_is_none)]
    pub closes_at: Option<DateTime<Utc>>,
    /// Units of identical stock (1 to 1,000,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub quantity: Option<u32>,
    /// Named seats, each sold at most once: 1 to 100,000 unique ids, each 1 to 64 of
    /// `A-Z a-z 0-9 - _ :`.
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100000,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub seats: Option<Vec<Text>>,
    /// Most units one user may hold or buy (1 to 1,000).
    #[oai(
        default = "default_per_user_limit",
        validator(minimum(value = "1"), maximum(value = "1000"))
    )]
    pub per_user_limit: u32,
    /// How long an admitted user has to hold, in seconds (1 to 86,400).
    #[oai(
        default = "default_admission_ttl",
        validator(minimum(value = "1"), maximum(value = "86400"))
    )]
    pub admission_ttl_secs: u32,
    /// How long a hold lasts before checkout, in seconds (1 to 86,400).
    #[oai(
        default = "default_hold_ttl",
        validator(minimum(value = "1"), maximum(value = "86400"))
    )]
    pub hold_ttl_secs: u32,
    /// How long a payment may take, in seconds (1 to 86,400).
    #[oai(
        default = "default_payment_ttl",
        validator(minimum(value = "1"), maximum(value = "86400"))
    )]
    pub payment_ttl_secs: u32,
    /// Users admitted per minute (1 to 1,000,000).
    #[oai(
        default = "default_rate",
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub rate_per_minute: u32,
    /// Cap on admitted + holding + paying users (1 to 1,000,000).
    #[oai(
        default = "default_max_active",
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub max_active: u32,
    // Who sets the admission rate (the enum's description is the field's, a plain $ref).
    #[oai(default)]
    pub admission_mode: AdmissionModeName,
    /// Adaptive mode: the lowest rate the controller goes to (users per minute, 1 to
    /// 1,000,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub min_rate_per_minute: Option<u32>,
    /// Adaptive mode: the highest rate the controller climbs to (users per minute, 1 to
    /// 1,000,000, not below the lowest).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub max_rate_per_minute: Option<u32>,
    #[oai(default)]
    pub opening: OpeningName,
    /// A lottery's seed (up to 128 printable characters), published with the sale so anyone
    /// can re-derive the order (default: drawn now). Publish it before the opening, e.g. a
    /// value announced in advance.
    #[oai(
        skip_serializing_if_is_none,
        validator(max_length = 128, pattern = r"^[!-~]*$")
    )]
    pub lottery_seed: Option<Text>,
    /// The currency of the sale's prices: an ISO 4217 code in capitals (`KRW`, `USD`). With
    /// it, `unit_price` is required; a sale with neither is not priced (its holds carry no
    /// amount, and only the `sandbox` and `webhook` providers take its payments).
    #[oai(skip_serializing_if_is_none, validator(pattern = r"^[A-Z]{3}$"))]
    pub currency: Option<Text>,
    /// The price of a unit (or of a seat in no category), in the currency's smallest unit as
    /// payment providers count it (KRW: won; USD: cents), 0 to 1,000,000,000,000. 0 is a free
    /// claim: checkout confirms at once, with no provider.
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "0"), maximum(value = "1000000000000"))
    )]
    pub unit_price: Option<u64>,
    /// A named-seat sale's categories (VIP, R, S), each with its price and its seats (up to
    /// 100; a seat in one at most).
    #[oai(skip_serializing_if_is_none, validator(max_items = 100))]
    pub categories: Option<Vec<CategoryIn>>,
    /// A named-seat sale of a venue layout (`createLayout`): its seats are the layout's, and
    /// each category's seats the layout's seats of that category (give `categories` with a
    /// price and no seats). Not with `quantity` or `seats`.
    #[oai(
        skip_serializing_if_is_none,
        validator(
            pattern = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
        )
    )]
    pub layout_id: Option<Text>,
    /// A coupon drop, or any free first-come sale: a join (`joinSale`) is the claim. It
    /// answers CONFIRMED with one unit (201), the user's claim again for a user who claimed
    /// (200), `409 /problems/sold-out`, or, while the line fronts the sale (before it opens,
    /// while others wait, or while claims come faster than the ledger records them), 202
    /// QUEUED: the waiting user is claimed for in turn, and their status then says CONFIRMED
    /// (or `sold_out`). A quantity sale whose `unit_price` is 0 (or that has no price).
    #[oai(default)]
    pub instant: bool,
}

/// A seat category of a new sale.
#[derive(Debug, Clone, Object, serde::Serialize)]
pub struct CategoryIn {
    /// 1 to 32 printable characters, unique in the sale.
    #[oai(validator(min_length = 1, max_length = 32))]
    pub name: Text,
    /// A seat's price in the category, in the currency's smallest unit.
    #[oai(validator(minimum(value = "0"), maximum(value = "1000000000000")))]
    pub unit_price: u64,
    /// Its seats, each one of the sale's (a sale of a layout: none, the layout's of the
    /// category).
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100000,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub seats: Option<Vec<Text>>,
}

/// A seat category of a sale.
#[derive(Debug, Clone, Object)]
pub struct CategoryOut {
    pub name: String,
    /// A seat's price in the category, in the currency's smallest unit.
    pub unit_price: u64,
    pub seats: Vec<String>,
}

/// How a sale's queue opens. Default: `fifo`.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, Default, serde::Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum OpeningName {
    /// Join order.
    #[default]
    Fifo,
    /// Everyone who joined before `opens_at` in the order of SHA-1 (hex) of
    /// `<lottery_seed>:<user id>`; later joins after them, in join order.
    LotteryAtOpen,
}

/// Who sets a sale's admission rate. Default: `manual`.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, Default, serde::Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum AdmissionModeName {
    /// The admin: `rate_per_minute` as set.
    #[default]
    Manual,
    /// The controller: it moves the rate between `min_rate_per_minute` and
    /// `max_rate_per_minute` with the back end's pressure, starting from `rate_per_minute`.
    Adaptive,
}

/// The adaptive bounds a request asks for (`None`: manual). A missing bound reads 0, which the
/// domain refuses with a message naming both fields.
pub fn adaptive_bounds(
    mode: AdmissionModeName,
    min: Option<u32>,
    max: Option<u32>,
) -> Option<(u32, u32)> {
    match mode {
        AdmissionModeName::Manual => None,
        AdmissionModeName::Adaptive => Some((min.unwrap_or(0), max.unwrap_or(0))),
    }
}

impl From<AdmissionMode> for AdmissionModeName {
    fn from(mode: AdmissionMode) -> Self {
        match mode {
            AdmissionMode::Manual => AdmissionModeName::Manual,
            AdmissionMode::Adaptive { .. } => AdmissionModeName::Adaptive,
        }
    }
}

fn bounds(mode: AdmissionMode) -> (Option<u32>, Option<u32>) {
    match mode {
        AdmissionMode::Manual => (None, None),
        AdmissionMode::Adaptive { min, max } => (Some(min), Some(max)),
    }
}

impl poem_openapi::types::Example for CreateSale {
    fn example() -> Self {
        CreateSale {
            name: "Summer tour — Berlin".into(),
            opens_at: None,
            closes_at: None,
            quantity: Some(3000),
            seats: None,
            per_user_limit: 4,
            admission_ttl_secs: 120,
            hold_ttl_secs: 300,
            payment_ttl_secs: 600,
            rate_per_minute: 600,
            max_active: 1000,
            admission_mode: AdmissionModeName::Manual,
            min_rate_per_minute: None,
            max_rate_per_minute: None,
            opening: OpeningName::Fifo,
            lottery_seed: None,
            currency: Some("KRW".into()),
            unit_price: Some(99_000),
            categories: None,
            layout_id: None,
            instant: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum SaleStatusName {
    /// Open, but `opens_at` is still ahead: joins wait, nobody is admitted yet.
    Scheduled,
    Open,
    /// Joins are taken, admission is stopped.
    Paused,
    /// Joins are refused and admission is stopped, for good.
    Closed,
}

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum StockKindName {
    Quantity,
    Seats,
}

/// A sale.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SaleOut {
    pub id: String,
    pub name: String,
    pub status: SaleStatusName,
    pub opens_at: DateTime<Utc>,
    #[oai(skip_serializing_if_is_none)]
    pub closes_at: Option<DateTime<Utc>>,
    pub stock_kind: StockKindName,
    pub total: u32,
    /// Units free to hold now.
    pub remaining: u32,
    /// Every seat of a seated sale.
    #[oai(skip_serializing_if_is_none)]
    pub seats: Option<Vec<String>>,
    pub per_user_limit: u32,
    pub admission_ttl_secs: u32,
    pub hold_ttl_secs: u32,
    pub payment_ttl_secs: u32,
    pub rate_per_minute: u32,
    pub max_active: u32,
    pub admission_mode: AdmissionModeName,
    #[oai(skip_serializing_if_is_none)]
    pub min_rate_per_minute: Option<u32>,
    #[oai(skip_serializing_if_is_none)]
    pub max_rate_per_minute: Option<u32>,
    /// Zero bits a join's proof of work needs (0: none asked).
    pub proof_of_work_bits: u32,
    pub opening: OpeningName,
    /// The lottery's seed (lottery sales): the order at the opening is SHA-1 (hex) of
    /// `<lottery_seed>:<user id>`, ascending.
    #[oai(skip_serializing_if_is_none)]
    pub lottery_seed: Option<String>,
    /// The currency of its prices (ISO 4217); absent when the sale is not priced.
    #[oai(skip_serializing_if_is_none)]
    pub currency: Option<String>,
    /// A unit's price (or a seat's in no category), in the currency's smallest unit.
    #[oai(skip_serializing_if_is_none)]
    pub unit_price: Option<u64>,
    #[oai(skip_serializing_if_is_none)]
    pub categories: Option<Vec<CategoryOut>>,
    /// The venue layout its seats are drawn from (`getSeatMap` draws them).
    #[oai(skip_serializing_if_is_none)]
    pub layout_id: Option<String>,
    /// A join is the claim (see `createSale`).
    pub instant: bool,
    pub created_at: DateTime<Utc>,
}

impl poem_openapi::types::Example for SaleOut {
    fn example() -> Self {
        SaleOut {
            id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            name: "Summer tour — Berlin".into(),
            status: SaleStatusName::Open,
            opens_at: example_time(),
            closes_at: None,
            stock_kind: StockKindName::Quantity,
            total: 3000,
            remaining: 2712,
            seats: None,
            per_user_limit: 4,
            admission_ttl_secs: 120,
            hold_ttl_secs: 300,
            payment_ttl_secs: 600,
            rate_per_minute: 600,
            max_active: 1000,
            admission_mode: AdmissionModeName::Adaptive,
            min_rate_per_minute: Some(60),
            max_rate_per_minute: Some(3000),
            proof_of_work_bits: 0,
            opening: OpeningName::Fifo,
            lottery_seed: None,
            currency: Some("KRW".into()),
            unit_price: Some(99_000),
            categories: None,
            created_at: example_time(),
            layout_id: None,
            instant: false,
        }
    }
}

impl SaleStatusName {
    /// The status a sale shows: its stored one, and `scheduled` while an open sale's
    /// `opens_at` is ahead.
    pub fn of(status: SaleStatus, opens_at: DateTime<Utc>) -> Self {
        match status {
            SaleStatus::Open if opens_at > Utc::now() => SaleStatusName::Scheduled,
            SaleStatus::Open => SaleStatusName::Open,
            SaleStatus::Paused => SaleStatusName::Paused,
            SaleStatus::Closed => SaleStatusName::Closed,
        }
    }
}

impl From<SaleRecord> for SaleOut {
    fn from(r: SaleRecord) -> Self {
        SaleOut::of(r.sale, r.remaining)
    }
}

impl SaleOut {
    /// The sale with `remaining` units free.
    pub fn of(s: crate::domain::Sale, remaining: u32) -> Self {
        let status = SaleStatusName::of(s.status, s.opens_at);
        let (stock_kind, seats) = match &s.stock {
            Stock::Quantity(_) => (StockKindName::Quantity, None),
            Stock::Seats(seats) => (StockKindName::Seats, Some(seats.clone())),
        };
        SaleOut {
            id: s.id.to_string(),
            name: s.name.clone(),
            status,
            opens_at: s.opens_at,
            closes_at: s.closes_at,
            stock_kind,
            total: s.stock.total(),
            remaining,
            seats,
            per_user_limit: s.per_user_limit,
            admission_ttl_secs: s.ttls.admission_secs,
            hold_ttl_secs: s.ttls.hold_secs,
            payment_ttl_secs: s.ttls.payment_secs,
            rate_per_minute: s.admission.rate_per_minute,
            max_active: s.admission.max_active,
            admission_mode: s.admission.mode.into(),
            min_rate_per_minute: bounds(s.admission.mode).0,
            max_rate_per_minute: bounds(s.admission.mode).1,
            proof_of_work_bits: u32::from(s.proof_of_work.bits),
            opening: match s.opening {
                Opening::Fifo => OpeningName::Fifo,
                Opening::LotteryAtOpen { .. } => OpeningName::LotteryAtOpen,
            },
            lottery_seed: s.opening.seed().map(str::to_owned),
            currency: s.price.as_ref().map(|p| p.currency.to_string()),
            unit_price: s.price.as_ref().map(|p| p.unit_price),
            categories: s.price.as_ref().map(|p| {
                p.categories
                    .iter()
                    .map(|c| CategoryOut {
                        name: c.name.clone(),
                        unit_price: c.unit_price,
                        seats: c.seats.clone(),
                    })
                    .collect()
            }),
            created_at: s.created_at,
            layout_id: s.layout.map(|l| l.to_string()),
            instant: s.instant,
        }
    }
}

/// New admission settings.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AdmissionSettings {
    /// Users admitted per minute (1 to 1,000,000); in adaptive mode, where the controller
    /// starts.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000000")))]
    pub rate_per_minute: u32,
    /// Cap on admitted + holding + paying users (1 to 1,000,000).
    #[oai(validator(minimum(value = "1"), maximum(value = "1000000")))]
    pub max_active: u32,
    // Who sets the rate from now on.
    #[oai(default)]
    pub mode: AdmissionModeName,
    /// Adaptive mode (required there): the lowest rate, users per minute (1 to 1,000,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub min_rate_per_minute: Option<u32>,
    /// Adaptive mode (required there): the highest rate, users per minute (1 to 1,000,000,
    /// not below the lowest).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub max_rate_per_minute: Option<u32>,
}

impl poem_openapi::types::Example for AdmissionSettings {
    fn example() -> Self {
        AdmissionSettings {
            rate_per_minute: 600,
            max_active: 1000,
            mode: AdmissionModeName::Adaptive,
            min_rate_per_minute: Some(60),
            max_rate_per_minute: Some(3000),
        }
    }
}

/// A sale's admission: its settings and, in adaptive mode, what the controller is doing.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AdmissionOut {
    pub mode: AdmissionModeName,
    /// The manual rate, or where the controller started.
    pub rate_per_minute: u32,
    #[oai(skip_serializing_if_is_none)]
    pub min_rate_per_minute: Option<u32>,
    #[oai(skip_serializing_if_is_none)]
    pub max_rate_per_minute: Option<u32>,
    pub max_active: u32,
    /// The rate in force now, users per minute: the controller's in adaptive mode, else
    /// `rate_per_minute`.
    pub current_rate_per_minute: f64,
    #[oai(skip_serializing_if_is_none)]
    pub controller: Option<ControllerOut>,
    #[oai(skip_serializing_if_is_none)]
    pub admitter: Option<AdmitterOut>,
}

/// Which sluice process admits for a sale now (it holds the sale's admission lease): one at a
/// time, across all replicas. Absent while none does, e.g. before the opening or for up to a
/// lease's life after its admitter stopped without draining.
#[derive(Debug, Clone, Object)]
pub struct AdmitterOut {
    /// The process's instance id (each sluice logs its own when it starts serving).
    pub instance: String,
    /// The lease's fencing token: it grows with every change of admitter, and a replaced
    /// admitter's late writes are refused by it.
    pub fence: u64,
}

impl poem_openapi::types::Example for AdmissionOut {
    fn example() -> Self {
        AdmissionOut {
            mode: AdmissionModeName::Adaptive,
            rate_per_minute: 600,
            min_rate_per_minute: Some(60),
            max_rate_per_minute: Some(3000),
            max_active: 1000,
            current_rate_per_minute: 1470.0,
            controller: Some(ControllerOut {
                last_change: RateChange::Decrease,
                signal: Some("outbox_pending_age".into()),
                signals: vec![
                    SignalOut {
                        name: "outbox_pending_age".into(),
                        value: Some(14.2),
                        target: 10.0,
                        stale: false,
                    },
                    SignalOut {
                        name: "ledger_commit_p99".into(),
                        value: Some(0.031),
                        target: 0.25,
                        stale: false,
                    },
                ],
                updated_at: example_time(),
            }),
            admitter: Some(AdmitterOut {
                instance: "0192f0c4a1b27c3e9d4f5a6b7c8d9e0f".into(),
                fence: 3,
            }),
        }
    }
}

/// What the controller's last tick did to the rate.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum RateChange {
    /// Every signal comfortably under its target: one step up.
    Increase,
    /// A signal over its target: backed off.
    Decrease,
    /// A signal near its target: unchanged.
    Hold,
    /// A signal could not be read: unchanged until it can.
    Stale,
}

/// The adaptive controller of a sale, as the sale's admitter last published it. Absent in
/// manual mode, and before the first controller tick.
#[derive(Debug, Clone, Object)]
pub struct ControllerOut {
    pub last_change: RateChange,
    /// The signal behind a decrease or a stale hold.
    #[oai(skip_serializing_if_is_none)]
    pub signal: Option<String>,
    /// Each signal's reading against its target at the last tick.
    pub signals: Vec<SignalOut>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Object)]
pub struct SignalOut {
    pub name: String,
    /// Absent when it could not be read.
    #[oai(skip_serializing_if_is_none)]
    pub value: Option<f64>,
    pub target: f64,
    pub stale: bool,
}

impl AdmissionOut {
    pub fn new(state: AdmissionState) -> Self {
        let AdmissionState {
            admission,
            controller,
            admitter,
        } = state;
        let (min, max) = bounds(admission.mode);
        let controller = match admission.mode {
            AdmissionMode::Manual => None,
            AdmissionMode::Adaptive { .. } => controller,
        };
        AdmissionOut {
            mode: admission.mode.into(),
            rate_per_minute: admission.rate_per_minute,
            min_rate_per_minute: min,
            max_rate_per_minute: max,
            max_active: admission.max_active,
            current_rate_per_minute: controller
                .as_ref()
                .map_or(admission.rate_per_minute as f64, |c| c.rate),
            controller: controller.map(|c| ControllerOut {
                last_change: match c.last {
                    Change::Increase => RateChange::Increase,
                    Change::Decrease { .. } => RateChange::Decrease,
                    Change::Hold => RateChange::Hold,
                    Change::Stale { .. } => RateChange::Stale,
                },
                signal: c.last.signal().map(str::to_owned),
                signals: c
                    .readings
                    .into_iter()
                    .map(|r| SignalOut {
                        stale: r.value.is_none(),
                        name: r.name,
                        value: r.value,
                        target: r.target,
                    })
                    .collect(),
                updated_at: DateTime::from_timestamp_millis(c.updated_at_ms).unwrap_or_default(),
            }),
            admitter: admitter.map(|lease| AdmitterOut {
                instance: lease.holder().to_owned(),
                fence: lease.fence,
            }),
        }
    }
}

/// Attempts that ended EXPIRED, by reason.
#[derive(Debug, Clone, Object)]
pub struct ExpiredCounts {
    pub left: u64,
    pub abandoned: u64,
    pub admission_timeout: u64,
    pub hold_timeout: u64,
    pub released: u64,
    pub payment_failed: u64,
    pub payment_timeout: u64,
    /// Purchases an operator refunded.
    pub refunded: u64,
}

/// A sale's counters: attempts (people) by state, and `units` (stock) by state. One attempt
/// may hold several units, so the two do not add up to each other.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SaleStatsOut {
    /// Attempts waiting in the queue.
    pub waiting: u64,
    /// Attempts admitted and not yet holding.
    pub admitted: u64,
    /// Attempts holding stock.
    pub holding: u64,
    /// Attempts whose payment is pending.
    pub paying: u64,
    /// Attempts that bought.
    pub confirmed: u64,
    pub expired: ExpiredCounts,
    /// Units free to hold (as `units.free`).
    pub remaining: u32,
    /// Units the sale has (as `units.total`).
    pub total: u32,
    pub units: UnitCounts,
    /// Absent when the sale is not priced.
    #[oai(skip_serializing_if_is_none)]
    pub money: Option<MoneyCounts>,
}

/// A priced sale's money by state, in `currency`'s smallest unit: the amounts of the holds of
/// attempts in HOLD (`held`), PAYMENT_PENDING (`paying`), CONFIRMED (`sold`), and refunded.
#[derive(Debug, Clone, Object)]
pub struct MoneyCounts {
    pub currency: String,
    pub held: u64,
    pub paying: u64,
    pub sold: u64,
    pub refunded: u64,
}

/// A sale's units by state: `free + held + paying + sold = total`.
#[derive(Debug, Clone, Object)]
pub struct UnitCounts {
    /// Free to hold.
    pub free: u64,
    /// Held by attempts in HOLD.
    pub held: u64,
    /// Held by attempts whose payment is pending.
    pub paying: u64,
    /// Sold (their attempts are CONFIRMED).
    pub sold: u64,
    pub total: u64,
}

impl poem_openapi::types::Example for SaleStatsOut {
    fn example() -> Self {
        SaleStatsOut {
            waiting: 48210,
            admitted: 212,
            holding: 96,
            paying: 41,
            confirmed: 2563,
            expired: ExpiredCounts {
                left: 310,
                abandoned: 0,
                admission_timeout: 88,
                hold_timeout: 17,
                released: 5,
                payment_failed: 12,
                payment_timeout: 3,
                refunded: 0,
            },
            remaining: 300,
            total: 3000,
            units: UnitCounts {
                free: 300,
                held: 150,
                paying: 61,
                sold: 2489,
                total: 3000,
            },
            money: Some(MoneyCounts {
                currency: "KRW".into(),
                held: 14_850_000,
                paying: 6_039_000,
                sold: 246_411_000,
                refunded: 0,
            }),
        }
    }
}

impl From<SaleStats> for SaleStatsOut {
    fn from(stats: SaleStats) -> Self {
        let s = stats.ledger;
        let count = |reason: ExpiryReason| {
            s.expired
                .iter()
                .find(|(r, _)| *r == reason)
                .map(|(_, n)| *n)
                .unwrap_or(0)
        };
        SaleStatsOut {
            waiting: stats.waiting,
            admitted: s.admitted,
            holding: s.holding,
            paying: s.paying,
            confirmed: s.confirmed,
            expired: ExpiredCounts {
                left: count(ExpiryReason::Left),
                abandoned: count(ExpiryReason::Abandoned),
                admission_timeout: count(ExpiryReason::AdmissionTimeout),
                hold_timeout: count(ExpiryReason::HoldTimeout),
                released: count(ExpiryReason::Released),
                payment_failed: count(ExpiryReason::PaymentFailed),
                payment_timeout: count(ExpiryReason::PaymentTimeout),
                refunded: count(ExpiryReason::Refunded),
            },
            remaining: s.remaining,
            total: s.total,
            units: UnitCounts {
                free: u64::from(s.remaining),
                held: s.units_held,
                paying: s.units_paying,
                sold: s.units_sold,
                total: u64::from(s.total),
            },
            money: s.currency.as_ref().map(|currency| MoneyCounts {
                currency: currency.to_string(),
                held: s.money_held,
                paying: s.money_paying,
                sold: s.money_sold,
                refunded: s.money_refunded,
            }),
        }
    }
}

/// A change to a running sale's stock: exactly one of the four. Units or seats added are on sale
/// at once; only free ones can be withdrawn (all asked or none), and a sale keeps one.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct StockChangeIn {
    /// Units to add to a quantity sale (1 to 100,000 a change; a sale has at most 1,000,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "100000"))
    )]
    pub add: Option<u32>,
    /// Free units to withdraw from a quantity sale (1 to 100,000 a change).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "100000"))
    )]
    pub withdraw: Option<u32>,
    /// Seats to add to a seated sale, each new to it (1 to 100,000 a change).
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100000,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub add_seats: Option<Vec<Text>>,
    /// Free seats to withdraw from a seated sale.
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100000,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub withdraw_seats: Option<Vec<Text>>,
}

impl poem_openapi::types::Example for StockChangeIn {
    fn example() -> Self {
        StockChangeIn {
            add: Some(500),
            withdraw: None,
            add_seats: None,
            withdraw_seats: None,
        }
    }
}

/// A sale's new name or end to joins; what is not given stays.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct UpdateSale {
    /// Shown to users (1 to 200 characters, no control or bidirectional-override characters).
    #[oai(
        skip_serializing_if_is_none,
        validator(min_length = 1, max_length = 200)
    )]
    pub name: Option<Text>,
    /// After it, joins are refused (after `opens_at`).
    #[oai(skip_serializing_if_is_none)]
    pub closes_at: Option<DateTime<Utc>>,
}

impl poem_openapi::types::Example for UpdateSale {
    fn example() -> Self {
        UpdateSale {
            name: Some(Text::from("Spring tour: Seoul, second night")),
            closes_at: Some(example_time() + chrono::Duration::hours(2)),
        }
    }
}

/// A sale's figures over recent time, one point a sampling interval, oldest first.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SaleFiguresOut {
    /// Seconds between two points (`workers.figures_ms`; 0 when sampling is off).
    pub interval_secs: f64,
    pub points: Vec<FigurePoint>,
}

/// One sample of a sale's figures.
#[derive(Debug, Clone, Object)]
pub struct FigurePoint {
    /// The start of the sample's interval.
    pub at: DateTime<Utc>,
    pub waiting: u64,
    /// Attempts admitted, holding or paying.
    pub active: u64,
    /// Admissions a minute since the point before (absent on the first).
    #[oai(skip_serializing_if_is_none)]
    pub admitted_per_minute: Option<f64>,
    pub holding_units: u64,
    pub paying_units: u64,
    pub sold_units: u64,
    pub remaining: u64,
    /// The admission rate in force (the controller's, in adaptive mode).
    pub rate_per_minute: f64,
    /// The adaptive controller's last decision: `increase`, `decrease`, `hold` or `stale`.
    #[oai(skip_serializing_if_is_none)]
    pub decision: Option<String>,
}

impl From<Point> for FigurePoint {
    fn from(p: Point) -> Self {
        let f = p.figures;
        FigurePoint {
            at: f.at,
            waiting: f.waiting,
            active: f.active,
            admitted_per_minute: p.admitted_per_minute,
            holding_units: f.holding_units,
            paying_units: f.paying_units,
            sold_units: f.sold_units,
            remaining: f.remaining,
            rate_per_minute: f.rate_per_minute,
            decision: f.decision,
        }
    }
}

impl poem_openapi::types::Example for SaleFiguresOut {
    fn example() -> Self {
        let point = |secs: i64, waiting, sold| FigurePoint {
            at: example_time() + chrono::Duration::seconds(secs),
            waiting,
            active: 120,
            admitted_per_minute: (secs > 0).then_some(600.0),
            holding_units: 80,
            paying_units: 30,
            sold_units: sold,
            remaining: 2_000 - sold,
            rate_per_minute: 600.0,
            decision: Some("hold".into()),
        };
        SaleFiguresOut {
            interval_secs: 10.0,
            points: vec![point(0, 41_000, 890), point(10, 40_900, 910)],
        }
    }
}

/// A new proof-of-work difficulty.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct ProofOfWorkSettings {
    /// Zero bits a join's hash needs: 0 (off) to 32. Each step doubles a join's work.
    #[oai(validator(maximum(value = "32")))]
    pub difficulty_bits: u32,
}

impl poem_openapi::types::Example for ProofOfWorkSettings {
    fn example() -> Self {
        ProofOfWorkSettings {
            difficulty_bits: 16,
        }
    }
}

/// A sale's stored status, to list by.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum StoredSaleStatus {
    /// Open (scheduled ones included: their `opens_at` is ahead).
    Open,
    Paused,
    Closed,
}

impl From<StoredSaleStatus> for SaleStatus {
    fn from(status: StoredSaleStatus) -> Self {
        match status {
            StoredSaleStatus::Open => SaleStatus::Open,
            StoredSaleStatus::Paused => SaleStatus::Paused,
            StoredSaleStatus::Closed => SaleStatus::Closed,
        }
    }
}

/// A sale in a list (its figures: `getSaleStats`).
#[derive(Debug, Clone, Object)]
pub struct SaleSummaryOut {
    pub id: String,
    pub name: String,
    pub status: SaleStatusName,
    pub stock_kind: StockKindName,
    /// Units (or seats) the sale has.
    pub total: u32,
    pub opens_at: DateTime<Utc>,
    #[oai(skip_serializing_if_is_none)]
    pub closes_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<SaleSummary> for SaleSummaryOut {
    fn from(s: SaleSummary) -> Self {
        SaleSummaryOut {
            id: s.id.to_string(),
            name: s.name,
            status: SaleStatusName::of(s.status, s.opens_at),
            stock_kind: match s.stock_kind {
                StockKind::Quantity => StockKindName::Quantity,
                StockKind::Seats => StockKindName::Seats,
            },
            total: s.total,
            opens_at: s.opens_at,
            closes_at: s.closes_at,
            created_at: s.created_at,
        }
    }
}

/// A page of sales, newest first.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SalePage {
    pub sales: Vec<SaleSummaryOut>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

impl From<Page<SaleSummary>> for SalePage {
    fn from(page: Page<SaleSummary>) -> Self {
        SalePage {
            sales: page.items.into_iter().map(Into::into).collect(),
            next_cursor: page.next,
        }
    }
}

impl poem_openapi::types::Example for SalePage {
    fn example() -> Self {
        SalePage {
            sales: vec![SaleSummaryOut {
                id: "0190a5c2-7d4e-7c3a-9b1f-2e4d6a8c0b12".into(),
                name: "Spring tour, Berlin".into(),
                status: SaleStatusName::Open,
                stock_kind: StockKindName::Seats,
                total: 3000,
                opens_at: example_time(),
                closes_at: None,
                created_at: example_time(),
            }],
            next_cursor: Some("0190a5c2-7d4e-7c3a-9b1f-2e4d6a8c0b12".into()),
        }
    }
}
