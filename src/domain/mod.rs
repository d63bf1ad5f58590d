//! The domain: sales, attempts and their state machine, what a sale holds, events. No I/O
//! lives here.

pub mod attempt;
pub mod best_seats;
pub mod events;
pub mod gate;
pub mod holding;
pub mod ids;
pub mod operator;
pub mod phase;
pub mod price;
pub mod proof_of_work;
pub mod sale;
pub mod signal_catalogue;
pub mod stock_change;
pub mod valve;
pub mod venue;

pub use attempt::{
    decide, AttemptEvent, AttemptState, Decision, Effect, ExpiryReason, Kept, Rejected,
};
pub use events::{DomainEvent, EventType, Refunding};
pub use holding::{Buyer, LiveAttempt, SaleSnapshot, Take};
pub use ids::{AttemptId, IdError, SaleId, UserId};
pub use operator::{AdminAction, Operator, Role, Target};
pub use price::{Category, Currency, Money, NewPrice, Price};
pub use proof_of_work::ProofOfWork;
pub use sale::{
    Admission, AdmissionMode, NewSale, Opening, Sale, SaleError, SaleStatus, Stock, StockKind, Ttls,
};
pub use stock_change::StockChange;
