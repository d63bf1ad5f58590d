//! Toss Payments' section of the settings, `[payments.toss]`: read and checked only when
//! `payments.provider = "toss"`.

use serde::{Deserialize, Serialize};

use crate::setting::{Problems, Secret};

/// Toss Payments (`payments.provider = "toss"`): the buyer pays in Toss's payment window, comes
/// back to sluice, and sluice confirms the payment with the secret key.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TossSettings {
    /// The secret key (`live_sk_…`, `test_sk_…`; or a payment widget's `live_gsk_…`,
    /// `test_gsk_…`): confirms, looks up and cancels payments.
    pub secret_key: Secret,
    /// The client key the page's SDK takes (`live_ck_…`, `test_ck_…`, `…_gck_…`).
    pub client_key: String,
    /// Toss's API (the tests point it at a stand-in).
    pub api_base: String,
    /// Where the waiting page loads Toss's SDK (v2 standard) from.
    pub js_url: String,
}

impl Default for TossSettings {
    fn default() -> Self {
        TossSettings {
            secret_key: Secret::default(),
            client_key: String::new(),
            api_base: "https://api.tosspayments.com".into(),
            js_url: "https://js.tosspayments.com/v2/standard".into(),
        }
    }
}

impl TossSettings {
    /// Adds each setting that cannot be used.
    pub fn check(&self, p: &mut Problems) {
        p.unless(
            is_key(self.secret_key.expose(), "sk"),
            "payments.toss.secret_key",
            "must be set: a secret key (live_sk_…, test_sk_…, or a widget's …_gsk_…)",
        );
        p.unless(
            is_key(&self.client_key, "ck"),
            "payments.toss.client_key",
            "must be set: a client key (live_ck_…, test_ck_…, or a widget's …_gck_…)",
        );
        p.http_urls([
            ("payments.toss.api_base", self.api_base.as_str()),
            ("payments.toss.js_url", self.js_url.as_str()),
        ]);
    }
}

/// `mode_kind_…` or a widget's `mode_gkind_…` (`test_sk_…`, `live_gck_…`).
fn is_key(key: &str, kind: &str) -> bool {
    ["live_", "test_"].iter().any(|mode| {
        key.strip_prefix(mode).is_some_and(|rest| {
            rest.starts_with(&format!("{kind}_")) || rest.starts_with(&format!("g{kind}_"))
        })
    })
}
