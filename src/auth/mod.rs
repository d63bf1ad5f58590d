//! Who may do what: the customer's user tokens (and its identity provider's published keys),
//! sluice's own admission tokens and queue tickets, the admin key.

pub mod admin_key;
pub mod admission_token;
pub mod gate_cookies;
pub mod jwks;
pub mod queue_ticket;
pub mod user_token;
pub mod verified;

pub use admin_key::AdminKey;
pub use admission_token::{AdmissionClaims, AdmissionTokens};
pub use queue_ticket::{QueueTickets, Ticket};
pub use user_token::UserTokens;
