//! The JSON shapes of the API (request and response bodies), and their conversions from the
//! service types. Field docs become the OpenAPI schema descriptions.

use chrono::{DateTime, Utc};
use poem_openapi::{Enum, Object};

use super::text::Text;
use crate::domain::valve::Change;
use crate::domain::{AdmissionMode, AttemptState, ExpiryReason, Opening, SaleStatus, Stock};
use crate::ledger::SaleRecord;
use crate::service::offer::Offer;
use crate::service::payment::WebhookResult;
use crate::service::sales::{AdmissionState, SaleStats};
use crate::service::AttemptView;

/// The instant the examples of the spec show.
fn example_time() -> DateTime<Utc> {
    DateTime::from_timestamp(1_785_000_000, 0).unwrap_or_default()
}

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
            created_at: example_time(),
        }
    }
}

impl From<SaleRecord> for SaleOut {
    fn from(r: SaleRecord) -> Self {
        let s = r.sale;
        let status = match s.status {
            SaleStatus::Open if s.opens_at > Utc::now() => SaleStatusName::Scheduled,
            SaleStatus::Open => SaleStatusName::Open,
            SaleStatus::Paused => SaleStatusName::Paused,
            SaleStatus::Closed => SaleStatusName::Closed,
        };
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
            remaining: r.remaining,
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
            created_at: s.created_at,
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
        }
    }
}

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttemptStateName {
    Queued,
    Admitted,
    Hold,
    PaymentPending,
    Confirmed,
    Expired,
}

/// Why an attempt expired (present on EXPIRED attempts only).
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum ExpiryReasonName {
    Left,
    Abandoned,
    AdmissionTimeout,
    HoldTimeout,
    Released,
    PaymentFailed,
    PaymentTimeout,
    SaleClosed,
}

impl From<AttemptState> for AttemptStateName {
    fn from(state: AttemptState) -> Self {
        match state {
            AttemptState::Queued => AttemptStateName::Queued,
            AttemptState::Admitted => AttemptStateName::Admitted,
            AttemptState::Hold => AttemptStateName::Hold,
            AttemptState::PaymentPending => AttemptStateName::PaymentPending,
            AttemptState::Confirmed => AttemptStateName::Confirmed,
            AttemptState::Expired { .. } => AttemptStateName::Expired,
        }
    }
}

impl From<ExpiryReason> for ExpiryReasonName {
    fn from(reason: ExpiryReason) -> Self {
        match reason {
            ExpiryReason::Left => ExpiryReasonName::Left,
            ExpiryReason::Abandoned => ExpiryReasonName::Abandoned,
            ExpiryReason::AdmissionTimeout => ExpiryReasonName::AdmissionTimeout,
            ExpiryReason::HoldTimeout => ExpiryReasonName::HoldTimeout,
            ExpiryReason::Released => ExpiryReasonName::Released,
            ExpiryReason::PaymentFailed => ExpiryReasonName::PaymentFailed,
            ExpiryReason::PaymentTimeout => ExpiryReasonName::PaymentTimeout,
            ExpiryReason::SaleClosed => ExpiryReasonName::SaleClosed,
        }
    }
}

/// What an attempt holds.
#[derive(Debug, Clone, Object)]
pub struct HoldOut {
    pub quantity: u32,
    /// The seats held (empty for units of identical stock). Always present: the schema
    /// requires it, so a generated client reads it.
    pub seat_ids: Vec<String>,
    /// Check out before this, or the units go back (while HOLD).
    #[oai(skip_serializing_if_is_none)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// The payment the provider is expected to report on.
#[derive(Debug, Clone, Object)]
pub struct PaymentOut {
    /// Pass it to the payment provider; its webhook names it.
    pub reference: String,
    /// Sandbox only: POST `{"outcome": "approve"}` (or `"decline"`) here to pay.
    #[oai(skip_serializing_if_is_none)]
    pub sandbox_url: Option<String>,
    /// The provider must report before this (while PAYMENT_PENDING).
    #[oai(skip_serializing_if_is_none)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// The status of an attempt.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct AttemptOut {
    pub attempt_id: String,
    pub sale_id: String,
    pub state: AttemptStateName,
    #[oai(skip_serializing_if_is_none)]
    pub reason: Option<ExpiryReasonName>,
    /// 1-based place in the queue (QUEUED only).
    #[oai(skip_serializing_if_is_none)]
    pub position: Option<u64>,
    /// How many wait in the sale (QUEUED only).
    #[oai(skip_serializing_if_is_none)]
    pub waiting: Option<u64>,
    /// Estimated seconds until admission, from the measured admission rate.
    #[oai(skip_serializing_if_is_none)]
    pub estimated_wait_secs: Option<u64>,
    /// QUEUED only, and only when true: nothing is left to hold and nothing is held or being
    /// paid for (which could come back), so the user's turn would find it sold out. Tell them
    /// now rather than at their turn; leaving (`DELETE /v1/attempts/{attempt_id}`) ends the
    /// wait.
    #[oai(skip_serializing_if_is_none)]
    pub sold_out: Option<bool>,
    /// Ask again after this many milliseconds (jittered; long when far, short when near).
    pub poll_after_ms: u64,
    /// While ADMITTED: an Ed25519 JWT proving admission; send it with the hold. Verifiable
    /// with `/.well-known/jwks.json`.
    #[oai(skip_serializing_if_is_none)]
    pub admission_token: Option<String>,
    /// While ADMITTED: hold before this.
    #[oai(skip_serializing_if_is_none)]
    pub admission_expires_at: Option<DateTime<Utc>>,
    #[oai(skip_serializing_if_is_none)]
    pub hold: Option<HoldOut>,
    #[oai(skip_serializing_if_is_none)]
    pub payment: Option<PaymentOut>,
    /// QUEUED only: when `position` and `waiting` were exact (the replica's view of the queue
    /// is refreshed every `queue.line_refresh_ms`).
    #[oai(skip_serializing_if_is_none)]
    pub as_of: Option<DateTime<Utc>>,
    /// QUEUED only: send it as `ticket` with the next status question (`getAttempt`,
    /// `streamAttempt`), so the answer needs no lookup in the queue store. Bound to this
    /// attempt and user; opaque.
    #[oai(skip_serializing_if_is_none)]
    pub queue_ticket: Option<String>,
}

impl poem_openapi::types::Example for AttemptOut {
    fn example() -> Self {
        AttemptOut {
            attempt_id: "0193a0c4e1b27c3d9f0a1b2c3d4e5f600193a0c4e1b27c3d9f0a1b2c3d4e5f61".into(),
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            state: AttemptStateName::Queued,
            reason: None,
            position: Some(1204),
            waiting: Some(48210),
            estimated_wait_secs: Some(121),
            sold_out: None,
            poll_after_ms: 12000,
            admission_token: None,
            admission_expires_at: None,
            hold: None,
            payment: None,
            as_of: Some(
                DateTime::parse_from_rfc3339("2026-12-02T10:00:00.250Z")
                    .expect("a literal time")
                    .with_timezone(&Utc),
            ),
            queue_ticket: Some(
                "1204.1764669600000000.q1Jm0XhT4vR6Yb8Zk2Wc3AVs9pLd7Fn5Ge1Hi3Jk4Mo".into(),
            ),
        }
    }
}

impl From<AttemptView> for AttemptOut {
    fn from(v: AttemptView) -> Self {
        let state = v.state.into();
        let reason = v.state.reason().map(Into::into);
        AttemptOut {
            attempt_id: v.attempt.to_string(),
            sale_id: v.attempt.sale.to_string(),
            state,
            reason,
            position: v.position,
            waiting: v.waiting,
            estimated_wait_secs: v.estimated_wait_secs,
            sold_out: v.sold_out.then_some(true),
            poll_after_ms: v.poll_after_ms,
            admission_token: v.admission_token,
            admission_expires_at: v.admission_expires_at,
            hold: v.hold.map(|h| HoldOut {
                quantity: h.quantity,
                seat_ids: h.seats,
                expires_at: v.hold_expires_at,
            }),
            payment: v.payment_reference.map(|r| PaymentOut {
                reference: r.to_string(),
                sandbox_url: v.sandbox.then(|| crate::service::sandbox::payment_path(r)),
                expires_at: v.payment_expires_at,
            }),
            as_of: v.as_of,
            queue_ticket: v.queue_ticket,
        }
    }
}

/// What to hold: exactly one of `quantity` or `seat_ids`.
#[derive(Debug, Clone, Object, serde::Serialize)]
#[oai(example)]
pub struct HoldRequest {
    /// The `admission_token` of the attempt's status.
    #[oai(validator(min_length = 1, max_length = 4096))]
    pub admission_token: Text,
    /// Units to hold (1 to the sale's per-user limit, at most 1,000).
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "1"), maximum(value = "1000"))
    )]
    pub quantity: Option<u32>,
    /// Seats to hold: 1 to 100 unique seat ids.
    #[oai(
        skip_serializing_if_is_none,
        validator(
            min_items = 1,
            max_items = 100,
            unique_items,
            pattern = r"^[A-Za-z0-9_:-]{1,64}$"
        )
    )]
    pub seat_ids: Option<Vec<Text>>,
}

impl poem_openapi::types::Example for HoldRequest {
    fn example() -> Self {
        HoldRequest {
            admission_token: "eyJhbGciOiJFZERTQSIsImtpZCI6ImFkbWlzc2lvbi0xIn0.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJl".into(),
            quantity: Some(2),
            seat_ids: None,
        }
    }
}

/// The webhook's answer.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct WebhookAckOut {
    pub result: WebhookResultName,
    pub attempt_state: AttemptStateName,
}

impl poem_openapi::types::Example for WebhookAckOut {
    fn example() -> Self {
        WebhookAckOut {
            result: WebhookResultName::Applied,
            attempt_state: AttemptStateName::Confirmed,
        }
    }
}

/// What a webhook did: `applied` (the attempt moved: CONFIRMED, or EXPIRED with its stock
/// back), `duplicate` (this event id was seen before; nothing changed), `ignored` (a new event
/// that changes nothing, such as a failure after a success) or `refund_required` (money arrived
/// for an attempt that had expired; the attempt stays EXPIRED and a
/// `sluice.payment.refund_required` event is emitted).
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum WebhookResultName {
    Applied,
    Duplicate,
    Ignored,
    RefundRequired,
}

impl From<WebhookResult> for WebhookResultName {
    fn from(result: WebhookResult) -> Self {
        match result {
            WebhookResult::Applied => WebhookResultName::Applied,
            WebhookResult::Duplicate => WebhookResultName::Duplicate,
            WebhookResult::Ignored => WebhookResultName::Ignored,
            WebhookResult::RefundRequired => WebhookResultName::RefundRequired,
        }
    }
}

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, serde::Serialize)]
#[oai(rename_all = "snake_case")]
pub enum SandboxOutcome {
    Approve,
    Decline,
}

/// What the sandbox provider should report.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SandboxPayment {
    pub outcome: SandboxOutcome,
    /// Wait this long before sending the webhook (0 to 60000 ms).
    #[oai(default, validator(maximum(value = "60000")))]
    pub delay_ms: u64,
}

impl poem_openapi::types::Example for SandboxPayment {
    fn example() -> Self {
        SandboxPayment {
            outcome: SandboxOutcome::Approve,
            delay_ms: 500,
        }
    }
}

/// The webhook the sandbox will send.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SandboxAccepted {
    pub event_id: String,
    pub payment_reference: String,
}

impl poem_openapi::types::Example for SandboxAccepted {
    fn example() -> Self {
        SandboxAccepted {
            event_id: "sandbox-evt-0193a0c4e1b27c3d".into(),
            payment_reference: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f62".into(),
        }
    }
}

/// A sale as a buyer sees it.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct OfferOut {
    pub sale_id: String,
    pub name: String,
    pub status: SaleStatusName,
    pub opens_at: DateTime<Utc>,
    pub stock_kind: StockKindName,
    /// Most units one user may hold or buy.
    pub per_user_limit: u32,
    /// Units free to hold now.
    pub remaining: u32,
    /// Seats still free (seated sales only).
    #[oai(skip_serializing_if_is_none)]
    pub free_seats: Option<Vec<String>>,
    #[oai(skip_serializing_if_is_none)]
    pub proof_of_work: Option<ProofOfWorkOut>,
}

/// The work a join must show, when the sale asks for it (`getOffer` only): find a nonce making SHA-256 of `<salt>:<sale id>:<user id>:<nonce>`
/// start with `difficulty_bits` zero bits; send it as `Sluice-Proof-Of-Work`.
#[derive(Debug, Clone, Object)]
pub struct ProofOfWorkOut {
    pub difficulty_bits: u32,
    pub salt: String,
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

impl poem_openapi::types::Example for OfferOut {
    fn example() -> Self {
        OfferOut {
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            name: "Summer tour — Berlin".into(),
            status: SaleStatusName::Open,
            opens_at: example_time(),
            stock_kind: StockKindName::Seats,
            per_user_limit: 4,
            remaining: 3,
            free_seats: Some(vec!["A-1".into(), "A-2".into(), "B-7".into()]),
            proof_of_work: Some(ProofOfWorkOut {
                difficulty_bits: 16,
                salt: "9f2c41d07be35a18c6e0f4a2d1b87c3e".into(),
            }),
        }
    }
}

impl From<Offer> for OfferOut {
    fn from(offer: Offer) -> Self {
        let pow = offer.sale.proof_of_work.clone();
        let record = SaleRecord {
            sale: offer.sale,
            remaining: offer.remaining,
        };
        let sale = SaleOut::from(record);
        OfferOut {
            sale_id: sale.id,
            name: sale.name,
            status: sale.status,
            opens_at: sale.opens_at,
            stock_kind: sale.stock_kind,
            per_user_limit: sale.per_user_limit,
            remaining: sale.remaining,
            free_seats: offer.free_seats,
            proof_of_work: pow.is_on().then(|| ProofOfWorkOut {
                difficulty_bits: u32::from(pow.bits),
                salt: pow.salt,
            }),
        }
    }
}
