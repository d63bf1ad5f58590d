//! Stripe's section of the settings, `[payments.stripe]`: read and checked only when
//! `payments.provider = "stripe"`.

use serde::{Deserialize, Serialize};

use crate::setting::{Problems, Secret};

/// Stripe, over PaymentIntents (`payments.provider = "stripe"`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StripeSettings {
    /// The secret API key (`sk_live_…`, `sk_test_…`, or a restricted `rk_…`).
    pub secret_key: Secret,
    /// The publishable key the page's Stripe.js takes (`pk_…`).
    pub publishable_key: String,
    /// The signing secret of the webhook endpoint registered at Stripe (`whsec_…`): Stripe
    /// posts to `/v1/webhooks/stripe`.
    pub webhook_secret: Secret,
    /// Stripe's API (the tests point it at a local server).
    pub api_base: String,
    /// Where the waiting page loads Stripe.js from.
    pub js_url: String,
}

impl Default for StripeSettings {
    fn default() -> Self {
        StripeSettings {
            secret_key: Secret::default(),
            publishable_key: String::new(),
            webhook_secret: Secret::default(),
            api_base: "https://api.stripe.com".into(),
            js_url: "https://js.stripe.com/v3/".into(),
        }
    }
}

impl StripeSettings {
    /// Adds each setting that cannot be used.
    pub fn check(&self, p: &mut Problems) {
        p.unless(
            ["sk_", "rk_"]
                .iter()
                .any(|k| self.secret_key.starts_with(k)),
            "payments.stripe.secret_key",
            "must be set: a secret key (sk_…) or a restricted one (rk_…)",
        );
        p.unless(
            self.publishable_key.starts_with("pk_"),
            "payments.stripe.publishable_key",
            "must be set (pk_…)",
        );
        p.unless(
            self.webhook_secret.starts_with("whsec_"),
            "payments.stripe.webhook_secret",
            "must be set: the endpoint's signing secret (whsec_…)",
        );
        p.http_urls([
            ("payments.stripe.api_base", self.api_base.as_str()),
            ("payments.stripe.js_url", self.js_url.as_str()),
        ]);
    }
}
