//! The `[gate]` section of the settings: what every gate shares (the gates themselves are an
//! operator's, kept in the ledger).

use serde::{Deserialize, Serialize};

use crate::setting::{HttpUrl, Millis, Problems, Secret};

/// Gates: sluice as the forward-auth service of the proxy a site already runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// When the queue store is down: `open` lets every guarded request through (counted in
    /// `sluice_gate_checks_total{outcome="store_down_open"}`), `closed` sends it to the page.
    pub on_store_down: String,
    /// The path prefix the site's proxy sends to sluice on the guarded host (`/.sluice`): the
    /// waiting page is reached there, so the gate's cookies are the site's own.
    pub path_prefix: String,
    /// How often each replica reads the gates and the sessions ended early (ms).
    pub refresh_ms: Millis,
    /// How often each replica asks whether the queue store answers (ms).
    pub store_probe_ms: Millis,
    /// Cloudflare Turnstile: the shop's site key (shown to the page) and secret.
    pub turnstile_site_key: String,
    pub turnstile_secret: Secret,
    /// Turnstile's `siteverify` endpoint.
    pub turnstile_verify_url: HttpUrl,
    /// Turnstile's widget script, rendered explicitly by the waiting page (its origin joins
    /// the page's content policy when Turnstile is set up).
    pub turnstile_script_url: HttpUrl,
    /// hCaptcha: the shop's site key and secret.
    pub hcaptcha_site_key: String,
    pub hcaptcha_secret: Secret,
    /// hCaptcha's `siteverify` endpoint.
    pub hcaptcha_verify_url: HttpUrl,
    /// hCaptcha's widget script, rendered explicitly by the waiting page.
    pub hcaptcha_script_url: HttpUrl,
    /// How long a `siteverify` call may take (ms); past it the challenge fails.
    pub verify_timeout_ms: Millis,
}

/// A default's URL, written here and so known to parse.
fn url(text: &str) -> HttpUrl {
    HttpUrl::parse(text).expect("a default URL")
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            on_store_down: "closed".into(),
            path_prefix: "/.sluice".into(),
            refresh_ms: Millis(1000),
            store_probe_ms: Millis(1000),
            turnstile_site_key: String::new(),
            turnstile_secret: Secret::default(),
            turnstile_verify_url: url("https://challenges.cloudflare.com/turnstile/v0/siteverify"),
            turnstile_script_url: url(
                "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit",
            ),
            hcaptcha_site_key: String::new(),
            hcaptcha_secret: Secret::default(),
            hcaptcha_verify_url: url("https://api.hcaptcha.com/siteverify"),
            hcaptcha_script_url: url("https://js.hcaptcha.com/1/api.js?render=explicit"),
            verify_timeout_ms: Millis(3000),
        }
    }
}

impl GateConfig {
    /// Whether a guarded request passes while the queue store is down.
    pub fn opens_on_store_down(&self) -> bool {
        self.on_store_down == "open"
    }

    pub fn check(&self, p: &mut Problems) {
        p.unless(
            ["open", "closed"].contains(&self.on_store_down.as_str()),
            "gate.on_store_down",
            "must be open or closed",
        );
        let prefix = &self.path_prefix;
        p.unless(
            prefix.starts_with('/')
                && prefix.len() > 1
                && !prefix.ends_with('/')
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
            "gate.path_prefix",
            "a path such as /.sluice (no trailing slash)",
        );
        for (ms, key) in [
            (self.refresh_ms, "gate.refresh_ms"),
            (self.store_probe_ms, "gate.store_probe_ms"),
            (self.verify_timeout_ms, "gate.verify_timeout_ms"),
        ] {
            p.unless(!ms.is_off(), key, "must be positive");
        }
        p.unless(
            self.turnstile_site_key.is_empty() == self.turnstile_secret.is_empty(),
            "gate.turnstile_secret",
            "Turnstile needs both its site key and its secret",
        );
        p.unless(
            self.hcaptcha_site_key.is_empty() == self.hcaptcha_secret.is_empty(),
            "gate.hcaptcha_secret",
            "hCaptcha needs both its site key and its secret",
        );
    }
}
