//! Payments: the seam to the provider that takes the money ([`provider`]), the calls made to
//! it ([`calls`]), Stripe ([`stripe`]), Toss Payments ([`toss`]), PortOne ([`portone`], its
//! webhooks signed by [`standard_webhooks`]), and the signed webhooks of the `sandbox` and
//! `webhook` providers ([`signature`], [`webhook`]).

pub mod calls;
pub mod portone;
pub mod provider;
pub mod signature;
pub mod standard_webhooks;
pub mod stripe;
pub mod toss;
pub mod webhook;

pub use calls::ProviderError;
pub use provider::{Found, Order, PayWith, Provider, Started};
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
