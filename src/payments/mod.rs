//! Payments: the seam to the provider that takes the money ([`connector`]), the providers
//! there are ([`registry`], and what the page needs to pay with each: [`pay`]), the calls made
//! to them ([`calls`]), and the signed webhooks of the providers sluice does not call
//! ([`signature`], [`webhook`]).
//!
//! Layout: one module per provider, with its API client and its [`Connector`]: Stripe
//! ([`stripe`]), Toss Payments ([`toss`]), PortOne ([`portone`], its webhooks signed by
//! [`standard_webhooks`]); `sandbox` and `webhook` ([`no_api`]).

pub mod calls;
pub mod connector;
pub mod no_api;
pub mod page_sources;
pub mod pay;
pub mod portone;
pub mod registry;
pub mod signature;
pub mod standard_webhooks;
pub mod stripe;
pub mod toss;
pub mod webhook;

pub use calls::ProviderError;
pub use connector::{Connector, Found, Order, Started};
pub use pay::PayWith;
pub use signature::{SignatureError, WebhookSigner};
pub use webhook::{PaymentWebhook, WebhookKind};

/// Whether `id` is a provider's id that goes in a URL path as it is: `lengths` characters of
/// `[A-Za-z0-9_-]` (Toss's order ids and payment keys, PortOne's payment ids).
pub fn is_url_safe_id(id: &str, lengths: std::ops::RangeInclusive<usize>) -> bool {
    lengths.contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
