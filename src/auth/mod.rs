//! Who may do what: the customer's user tokens, sluice's own admission tokens, the admin key.

pub mod admin_key;
pub mod admission_token;
pub mod user_token;

pub use admin_key::AdminKey;
pub use admission_token::{AdmissionClaims, AdmissionTokens};
pub use user_token::UserTokens;
