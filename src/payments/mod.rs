//! Payments: the provider's signed webhooks.

pub mod signature;
pub mod webhook;

pub use signature::{SignatureError, WebhookSigner};
pub use webhook::{PaymentWebhook, WebhookKind};
