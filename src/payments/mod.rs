//! Payments: the seam to the provider that takes the money ([`connector`]), the providers
//! there are ([`providers`]: one module each, and the lists of their names, settings and what
//! the page needs to pay with each), the calls made to them ([`calls`]), and the signatures of
//! webhooks ([`signature`], [`standard_webhooks`], [`webhook`]).
//!
//! Layout: general code here names no provider; the providers that sluice does not call,
//! `sandbox` and `webhook`, are [`no_api`].

pub mod calls;
pub mod connector;
pub mod no_api;
pub mod page_sources;
pub mod providers;
pub mod signature;
pub mod standard_webhooks;
pub mod webhook;

pub use calls::ProviderError;
pub use connector::{Connector, Found, Order, Started};
pub use providers::pay::PayWith;
pub use signature::{SignatureError, WebhookSigner};
pub use webhook::{PaymentWebhook, WebhookKind};

/// Whether `id` is a provider's id that goes in a URL path as it is: `lengths` characters of
/// `[A-Za-z0-9_-]` (providers' order ids, payment keys and payment ids).
pub fn is_url_safe_id(id: &str, lengths: std::ops::RangeInclusive<usize>) -> bool {
    lengths.contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
