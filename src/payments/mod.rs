//! Payments: the seam to the provider that takes the money ([`provider`]), the calls made to
//! it ([`calls`]), Stripe ([`stripe`]), and the signed webhooks of the `sandbox` and `webhook`
//! providers ([`signature`], [`webhook`]).

pub mod calls;
pub mod provider;
pub mod signature;
pub mod stripe;
pub mod webhook;

pub use calls::ProviderError;
pub use provider::{Found, Order, PayWith, Provider, Started};
pub use signature::{SignatureError, WebhookSigner};
pub use webhook::{PaymentWebhook, WebhookKind};
