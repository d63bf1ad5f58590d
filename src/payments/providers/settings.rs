//! The `[payments]` section of the settings: what is general, then one section per provider,
//! each its module's own type. Only the chosen provider's section is checked
//! ([`super::check`]) and read ([`super::from_config`]).

use serde::{Deserialize, Serialize};

use super::portone::PortOneSettings;
use super::stripe::StripeSettings;
use super::toss::TossSettings;
use super::ProviderName;
use crate::setting::{Millis, Seconds, Secret};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentsConfig {
    /// Who takes the payments: `sandbox` (the built-in test provider: pay at
    /// `/sandbox/payments/{reference}`), `webhook` (the shop's own payment service posts
    /// `Sluice-Signature` webhooks to `/v1/webhooks/payments`), `stripe`, `toss` (Toss
    /// Payments) or `portone` (PortOne V2). Unset: `sandbox` when `payments.sandbox` is on,
    /// `webhook` otherwise.
    pub provider: Option<ProviderName>,
    /// Shared HMAC-SHA256 secret of the `sandbox` and `webhook` providers' webhooks (at least
    /// 16 characters).
    pub webhook_secret: Secret,
    /// Webhooks whose timestamp is further than this from now are refused (replays).
    pub tolerance_secs: Seconds,
    /// The sandbox payment provider (`/sandbox/payments/{reference}`) when `provider` is unset:
    /// unset means on in embedded mode and off with PostgreSQL. Never turn it on in
    /// production.
    pub sandbox: Option<bool>,
    /// A payment that succeeds after its attempt expired (a race the provider won) is
    /// refunded through the provider. Off: only a `refund_required` event, for the shop to
    /// refund.
    pub refund_late_payments: bool,
    /// An attempt PAYMENT_PENDING this long is looked up at the provider by the reconciler,
    /// so a webhook that never comes is not waited on.
    pub reconcile_after_secs: Seconds,
    /// The bound of one call to the provider (each retry its own).
    pub call_timeout_ms: Millis,
    pub stripe: StripeSettings,
    pub toss: TossSettings,
    pub portone: PortOneSettings,
}

impl Default for PaymentsConfig {
    fn default() -> Self {
        PaymentsConfig {
            provider: None,
            webhook_secret: Secret::default(),
            tolerance_secs: Seconds(300),
            sandbox: None,
            refund_late_payments: true,
            reconcile_after_secs: Seconds(120),
            call_timeout_ms: Millis(5000),
            stripe: StripeSettings::default(),
            toss: TossSettings::default(),
            portone: PortOneSettings::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_payments_section_shows_no_providers_secret() {
        let mut payments = PaymentsConfig::default();
        payments.stripe.secret_key = "sk_test_0123456789".into();
        payments.stripe.webhook_secret = "whsec_stripe0123456789".into();
        payments.toss.secret_key = "test_sk_toss0123456789".into();
        payments.portone.api_secret = "portone-secret-0123456789".into();
        payments.portone.webhook_secret = "whsec_portone0123456789".into();
        let printed = format!("{payments:?}");
        for secret in [
            "sk_test_0123456789",
            "whsec_stripe0123456789",
            "test_sk_toss0123456789",
            "portone-secret-0123456789",
            "whsec_portone0123456789",
        ] {
            assert!(!printed.contains(secret), "{secret} printed");
        }
    }
}
