//! The `[gate]` section of the settings: what every gate shares (the gates themselves are an
//! operator's, kept in the ledger).

use serde::{Deserialize, Serialize};

use crate::setting::{is_http_url, Problems, Secret};

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
    pub refresh_ms: u64,
    /// How often each replica asks whether the queue store answers (ms).
    pub store_probe_ms: u64,
    /// Cloudflare Turnstile: the shop's site key (shown to the page) and secret.
    pub turnstile_site_key: String,
    pub turnstile_secret: Secret,
    /// Turnstile's `siteverify` endpoint.
    pub turnstile_verify_url: String,
    /// Turnstile's widget script, rendered explicitly by the waiting page (its origin joins
    /// the page's content policy when Turnstile is set up).
    pub turnstile_script_url: String,
    /// hCaptcha: the shop's site key and secret.
    pub hcaptcha_site_key: String,
    pub hcaptcha_secret: Secret,
    /// hCaptcha's `siteverify` endpoint.
    pub hcaptcha_verify_url: String,
    /// hCaptcha's widget script, rendered explicitly by the waiting page.
    pub hcaptcha_script_url: String,
    /// How long a `siteverify` call may take (ms); past it the challenge fails.
    pub verify_timeout_ms: u64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            on_store_down: "closed".into(),
            path_prefix: "/.sluice".into(),
            refresh_ms: 1000,
            store_probe_ms: 1000,
            turnstile_site_key: String::new(),
            turnstile_secret: Secret::default(),
            turnstile_verify_url: "https://challenges.cloudflare.com/turnstile/v0/siteverify"
                .into(),
            turnstile_script_url:
                "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit".into(),
            hcaptcha_site_key: String::new(),
            hcaptcha_secret: Secret::default(),
            hcaptcha_verify_url: "https://api.hcaptcha.com/siteverify".into(),
            hcaptcha_script_url: "https://js.hcaptcha.com/1/api.js?render=explicit".into(),
            verify_timeout_ms: 3000,
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
        p.unless(self.refresh_ms > 0, "gate.refresh_ms", "must be positive");
        p.unless(
            self.store_probe_ms > 0,
            "gate.store_probe_ms",
            "must be positive",
        );
        p.unless(
            self.verify_timeout_ms > 0,
            "gate.verify_timeout_ms",
            "must be positive",
        );
        p.unless(
            is_http_url(&self.turnstile_verify_url),
            "gate.turnstile_verify_url",
            "an http(s) URL",
        );
        p.unless(
            is_http_url(&self.hcaptcha_verify_url),
            "gate.hcaptcha_verify_url",
            "an http(s) URL",
        );
        for (url, key) in [
            (&self.turnstile_script_url, "gate.turnstile_script_url"),
            (&self.hcaptcha_script_url, "gate.hcaptcha_script_url"),
        ] {
            p.unless(is_http_url(url), key, "an http(s) URL");
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
