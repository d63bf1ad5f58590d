//! The configuration checked whole: every setting that cannot be used is reported at once,
//! each by its TOML key and its `SLUICE__…` variable, so a deployment is fixed in one start.

use std::fmt;

use super::{Config, ConfigError, ProviderName};

/// One setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The TOML key, e.g. `queue.timeout_ms`; the environment's name is derived from it.
    pub key: String,
    /// What the key must be.
    pub message: String,
}

impl Problem {
    /// The environment variable that sets the key: `SLUICE__QUEUE__TIMEOUT_MS`.
    pub fn variable(&self) -> String {
        format!("SLUICE__{}", self.key.replace('.', "__").to_uppercase())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({}): {}", self.key, self.variable(), self.message)
    }
}

/// The problems found so far, in the order of the checks.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn add(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(Problem {
            key: key.to_owned(),
            message: message.into(),
        });
    }

    /// Adds the problem unless `ok`.
    fn unless(&mut self, ok: bool, key: &'static str, message: impl Into<String>) {
        if !ok {
            self.add(key, message);
        }
    }

    /// Each of `urls` that is set must be an http(s) URL.
    fn http_urls<'a>(&mut self, urls: impl IntoIterator<Item = (&'static str, &'a str)>) {
        for (key, url) in urls {
            self.unless(is_http_url(url), key, "must be an http(s) URL");
        }
    }
}

/// Whether `url` parses as an absolute http(s) URL with a host (as reqwest will read it): a
/// prefix alone (`https://`, `https://shop example`) is not one.
fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// `prefix_…` or a widget's `prefix_g…`: Toss's keys (`test_sk_…`, `live_gck_…`).
fn is_toss_key(key: &str, kind: &str) -> bool {
    ["live_", "test_"].iter().any(|mode| {
        key.strip_prefix(mode).is_some_and(|rest| {
            rest.starts_with(&format!("{kind}_")) || rest.starts_with(&format!("g{kind}_"))
        })
    })
}

impl Config {
    /// Every setting that cannot be used, or none.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Every setting that cannot be used, in the order of the checks.
    pub fn problems(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        self.check_stores(&mut p);
        self.check_auth(&mut p);
        self.check_payments(&mut p);
        self.check_http(&mut p);
        self.check_cors(&mut p);
        self.check_page(&mut p);
        self.check_workers(&mut p);
        self.check_notify(&mut p);
        self.check_valve(&mut p);
        self.check_telemetry(&mut p);
        p.0
    }

    fn check_stores(&self, p: &mut Problems) {
        let queue = &self.queue.url;
        let is_redis = |u: &str| u.starts_with("redis://") || u.starts_with("rediss://");
        p.unless(
            queue.is_empty() || queue.split(',').map(str::trim).all(is_redis),
            "queue.url",
            "empty (in-process), redis://…, or (cluster) redis://…,redis://…",
        );
        p.unless(
            !queue.contains(',') || self.queue.cluster,
            "queue.url",
            "several urls name a Redis Cluster: set queue.cluster = true",
        );
        p.unless(
            !(self.queue.cluster && queue.is_empty()),
            "queue.cluster",
            "a cluster needs its nodes in queue.url",
        );
        p.unless(
            !self.queue.key_prefix.is_empty() && !self.queue.key_prefix.contains(['{', '}', ' ']),
            "queue.key_prefix",
            "non-empty, without braces or spaces",
        );
        p.unless(
            self.queue.timeout_ms > 0,
            "queue.timeout_ms",
            "must be positive",
        );
        p.unless(
            (20..=5000).contains(&self.queue.line_refresh_ms),
            "queue.line_refresh_ms",
            "from 20 to 5000",
        );
        let ledger = &self.ledger.url;
        p.unless(
            ledger.is_empty()
                || ledger.starts_with("postgres://")
                || ledger.starts_with("postgresql://"),
            "ledger.url",
            "empty (SQLite in embedded.data_dir) or postgres://…",
        );
        p.unless(
            self.ledger.max_connections > 0,
            "ledger.max_connections",
            "must be positive",
        );
        p.unless(
            (1..=10_000).contains(&self.ledger.batch_max),
            "ledger.batch_max",
            "must be between 1 and 10000",
        );
        p.unless(
            (1..=self.ledger.max_connections.max(1)).contains(&self.ledger.batch_calls),
            "ledger.batch_calls",
            "must be between 1 and ledger.max_connections",
        );
        p.unless(
            self.events.poll_ms >= 10,
            "events.poll_ms",
            "must be at least 10",
        );
        p.unless(self.events.batch > 0, "events.batch", "must be positive");
    }

    fn check_auth(&self, p: &mut Problems) {
        let auth = &self.auth;
        p.unless(
            auth.admin_key.len() >= 16,
            "auth.admin_key",
            "must be set, at least 16 characters",
        );
        for (key, url) in [
            ("auth.user_oidc_issuer", &auth.user_oidc_issuer),
            ("auth.user_jwks_url", &auth.user_jwks_url),
        ] {
            p.http_urls(url.as_deref().map(|u| (key, u)));
        }
        let mut prefixes = std::collections::HashSet::new();
        for more in &auth.user_issuers {
            let mut urls = std::iter::once(&more.issuer).chain(more.jwks_url.as_ref());
            if !urls.all(|u| is_http_url(u)) {
                p.add(
                    "auth.user_issuers",
                    format!(
                        "`{}`: the issuer (and jwks_url) is an http(s) URL",
                        more.issuer
                    ),
                );
            }
            if more.user_prefix.is_empty() || !prefixes.insert(more.user_prefix.as_str()) {
                p.add(
                    "auth.user_issuers",
                    format!(
                        "`{}`: each issuer needs a user_prefix of its own (e.g. \"kakao:\")",
                        more.issuer
                    ),
                );
            }
        }
        let published = auth.user_oidc_issuer.is_some()
            || auth.user_jwks_url.is_some()
            || !auth.user_issuers.is_empty();
        match (&auth.user_jwt_hs256_secret, &auth.user_jwt_public_key_pem) {
            (None, None) if !published => p.add(
                "auth.user_jwt_hs256_secret",
                "set it, auth.user_jwt_public_key_pem, auth.user_jwks_url or auth.user_oidc_issuer to verify user tokens",
            ),
            (Some(s), _) if s.len() < 16 => {
                p.add("auth.user_jwt_hs256_secret", "at least 16 characters")
            }
            _ => {}
        }
        if let Some(seed) = &auth.admission_key_seed_hex {
            p.unless(
                hex::decode(seed.expose()).map(|b| b.len()) == Ok(32),
                "auth.admission_key_seed_hex",
                "must be 64 hex digits",
            );
        }
    }

    /// Only the chosen provider's section is checked: the others are not read.
    fn check_payments(&self, p: &mut Problems) {
        p.unless(
            self.payments.call_timeout_ms > 0,
            "payments.call_timeout_ms",
            "must be at least 1",
        );
        match self.payment_provider() {
            ProviderName::Sandbox | ProviderName::Webhook => p.unless(
                self.payments.webhook_secret.len() >= 16,
                "payments.webhook_secret",
                "must be set, at least 16 characters",
            ),
            ProviderName::Stripe => {
                let stripe = &self.payments.stripe;
                p.unless(
                    ["sk_", "rk_"]
                        .iter()
                        .any(|k| stripe.secret_key.starts_with(k)),
                    "payments.stripe.secret_key",
                    "must be set: a secret key (sk_…) or a restricted one (rk_…)",
                );
                p.unless(
                    stripe.publishable_key.starts_with("pk_"),
                    "payments.stripe.publishable_key",
                    "must be set (pk_…)",
                );
                p.unless(
                    stripe.webhook_secret.starts_with("whsec_"),
                    "payments.stripe.webhook_secret",
                    "must be set: the endpoint's signing secret (whsec_…)",
                );
                p.http_urls([
                    ("payments.stripe.api_base", stripe.api_base.as_str()),
                    ("payments.stripe.js_url", stripe.js_url.as_str()),
                ]);
            }
            ProviderName::Toss => {
                let toss = &self.payments.toss;
                p.unless(
                    is_toss_key(toss.secret_key.expose(), "sk"),
                    "payments.toss.secret_key",
                    "must be set: a secret key (live_sk_…, test_sk_…, or a widget's …_gsk_…)",
                );
                p.unless(
                    is_toss_key(&toss.client_key, "ck"),
                    "payments.toss.client_key",
                    "must be set: a client key (live_ck_…, test_ck_…, or a widget's …_gck_…)",
                );
                p.http_urls([
                    ("payments.toss.api_base", toss.api_base.as_str()),
                    ("payments.toss.js_url", toss.js_url.as_str()),
                ]);
            }
            ProviderName::PortOne => {
                let portone = &self.payments.portone;
                p.unless(
                    portone.api_secret.len() >= 16,
                    "payments.portone.api_secret",
                    "must be set: the store's V2 API secret",
                );
                p.unless(
                    crate::payments::standard_webhooks::secret_bytes(
                        portone.webhook_secret.expose(),
                    )
                    .is_some(),
                    "payments.portone.webhook_secret",
                    "must be set: the webhook's secret (whsec_… or its base64)",
                );
                for (key, value) in [
                    ("payments.portone.store_id", &portone.store_id),
                    ("payments.portone.channel_key", &portone.channel_key),
                ] {
                    p.unless(
                        !value.is_empty(),
                        key,
                        "must be set (PortOne's console names it)",
                    );
                }
                p.http_urls([
                    ("payments.portone.api_base", portone.api_base.as_str()),
                    ("payments.portone.js_url", portone.js_url.as_str()),
                ]);
                // (`*.` stands for any subdomain in a page's policy)
                let framed = |o: &&String| is_origin(&o.replacen("://*.", "://", 1));
                for origin in portone.frame_origins.iter().filter(|o| !framed(o)) {
                    p.add(
                        "payments.portone.frame_origins",
                        format!(
                            "`{origin}` is not an origin: scheme://host[:port], no path, e.g. https://stdpay.inicis.com"
                        ),
                    );
                }
            }
        }
    }

    fn check_telemetry(&self, p: &mut Problems) {
        p.unless(
            ["text", "json"].contains(&self.logging.format.as_str()),
            "logging.format",
            "must be text or json",
        );
        let t = &self.telemetry;
        p.unless(
            t.otlp_endpoint.is_empty() || is_http_url(&t.otlp_endpoint),
            "telemetry.otlp_endpoint",
            "empty (off), or the collector's http(s) URL, e.g. http://otel-collector:4318",
        );
        p.unless(
            t.otlp_protocol == "http/protobuf",
            "telemetry.otlp_protocol",
            "must be http/protobuf (grpc is not built into this sluice)",
        );
        p.unless(
            (0.0..=1.0).contains(&t.trace_sample_ratio),
            "telemetry.trace_sample_ratio",
            "must be between 0 and 1",
        );
        p.unless(
            !t.service_name.trim().is_empty(),
            "telemetry.service_name",
            "must be set",
        );
        p.unless(
            t.max_queued_spans > 0,
            "telemetry.max_queued_spans",
            "must be at least 1",
        );
    }

    fn check_http(&self, p: &mut Problems) {
        let http = &self.http;
        let public = &http.public_url;
        p.unless(
            public.is_empty() || (is_http_url(public) && public.matches('/').count() == 2),
            "http.public_url",
            "empty, or an origin such as https://queue.shop.example (no path)",
        );
        p.unless(
            http.drain_delay_secs == 0 || http.drain_delay_secs < http.shutdown_timeout_secs,
            "http.drain_delay_secs",
            "must be shorter than http.shutdown_timeout_secs, which it is part of",
        );
        p.unless(
            http.body_limit_bytes >= 1024,
            "http.body_limit_bytes",
            "must be at least 1024",
        );
    }

    fn check_cors(&self, p: &mut Problems) {
        const KEY: &str = "http.cors_allowed_origins";
        let origins = &self.http.cors_allowed_origins;
        let any = origins.iter().any(|o| o == "*");
        p.unless(
            !any || origins.len() == 1,
            KEY,
            "`*` stands alone: it already allows every origin",
        );
        p.unless(
            !any || !self.http.cors_allow_credentials,
            KEY,
            "`*` cannot be combined with http.cors_allow_credentials",
        );
        for origin in origins.iter().filter(|o| *o != "*" && !is_origin(o)) {
            p.add(
                KEY,
                format!("`{origin}` is not an origin: scheme://host[:port], no path, e.g. https://shop.example"),
            );
        }
    }

    fn check_page(&self, p: &mut Problems) {
        let page = &self.page;
        let colour = |c: &str| {
            c.is_empty()
                || (c.starts_with('#')
                    && matches!(c.len(), 4 | 7)
                    && c[1..].bytes().all(|b| b.is_ascii_hexdigit()))
        };
        p.unless(
            colour(&page.accent_colour),
            "page.accent_colour",
            "#rgb or #rrggbb",
        );
        p.unless(
            colour(&page.background_colour),
            "page.background_colour",
            "#rgb or #rrggbb",
        );
        let logo = &page.logo_url;
        let plain = logo.bytes().all(|b| b.is_ascii_graphic()) && !logo.contains(['\'', '"', ';']);
        p.unless(
            logo.is_empty() || (plain && (logo.starts_with("https://") || logo.starts_with('/'))),
            "page.logo_url",
            "a path on sluice's origin (/…) or an https:// URL",
        );
    }

    fn check_workers(&self, p: &mut Problems) {
        let w = &self.workers;
        p.unless(
            w.queue_sync_ms >= 10,
            "workers.queue_sync_ms",
            "must be at least 10",
        );
        let replay_ms = w.queue_sync_replay_secs.saturating_mul(1000);
        p.unless(
            (10_000..=crate::domain::holding::SYNCED_KEEP_MS).contains(&replay_ms),
            "workers.queue_sync_replay_secs",
            "must be between 10 and 3600 (the queue store keeps its record of applied changes an hour)",
        );
        p.unless(
            w.admission_tick_ms >= 10,
            "workers.admission_tick_ms",
            "must be at least 10",
        );
        p.unless(
            w.lease_ttl_ms >= 2 * w.admission_tick_ms,
            "workers.lease_ttl_ms",
            "must be at least twice admission_tick_ms",
        );
        p.unless(
            !(1..3).contains(&w.abandon_after_secs),
            "workers.abandon_after_secs",
            "0 (off) or at least 3 seconds",
        );
        p.unless(
            w.reaper_cron.split_whitespace().count() == 6,
            "workers.reaper_cron",
            "needs six fields, seconds first",
        );
    }

    fn check_notify(&self, p: &mut Problems) {
        let n = &self.notify;
        if !n.vapid_private_key.is_empty() {
            // That the two keys are one pair is checked at start, where the sender is made.
            p.unless(
                !n.vapid_public_key.is_empty(),
                "notify.vapid_public_key",
                "the public key of the VAPID pair",
            );
            p.unless(
                n.vapid_subject.starts_with("mailto:") || n.vapid_subject.starts_with("https://"),
                "notify.vapid_subject",
                "mailto:… or https://…",
            );
        }
        if !n.webhook_url.is_empty() {
            p.unless(
                is_http_url(&n.webhook_url),
                "notify.webhook_url",
                "an http(s) URL",
            );
            p.unless(
                n.webhook_secret.len() >= 16,
                "notify.webhook_secret",
                "must be set, at least 16 characters",
            );
        }
        p.unless(n.max_per_second > 0, "notify.max_per_second", "at least 1");
    }

    fn check_valve(&self, p: &mut Problems) {
        let v = &self.valve;
        p.unless(
            v.prometheus_url.is_empty()
                || (is_http_url(&v.prometheus_url) && v.prometheus_url.starts_with("http://")),
            "valve.prometheus_url",
            "empty (own metrics) or http://…",
        );
        p.unless(v.tick_ms >= 100, "valve.tick_ms", "must be at least 100");
        p.unless(
            v.query_timeout_ms > 0,
            "valve.query_timeout_ms",
            "must be positive",
        );
        p.unless(
            v.backoff > 0.0 && v.backoff < 1.0,
            "valve.backoff",
            "must be between 0 and 1",
        );
        p.unless(
            v.hold_band > 0.0 && v.hold_band <= 1.0,
            "valve.hold_band",
            "must be above 0, at most 1",
        );
        p.unless(
            v.increase_fraction > 0.0 && v.increase_fraction <= 1.0,
            "valve.increase_fraction",
            "must be above 0, at most 1",
        );
        for (name, signal) in v.signals.iter().filter(|(_, s)| s.enabled) {
            if !(signal.target.is_finite() && signal.target > 0.0) {
                p.add(
                    "valve.signals",
                    format!("`{name}`: target must be positive"),
                );
            }
            let known = crate::domain::signal_catalogue::builtin(name).is_some();
            if v.prometheus_url.is_empty() && !known {
                p.add(
                    "valve.signals",
                    format!("`{name}` is not built in: it needs valve.prometheus_url"),
                );
            }
            if signal.query.trim().is_empty() {
                p.add("valve.signals", format!("`{name}`: query is empty"));
            }
        }
    }
}

/// `scheme://host[:port]` as a browser sends it in `Origin` (lower-case, no path).
fn is_origin(origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    // `[::1]:8080`: an IPv6 host is bracketed; otherwise the port follows the only colon.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, tail)) if addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') => {
                ("v6", tail)
            }
            _ => return false,
        },
        None => match authority.find(':') {
            Some(at) => (&authority[..at], &authority[at..]),
            None => (authority, ""),
        },
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(p) => (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()),
    };
    matches!(scheme, "http" | "https")
        && !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && port_ok
}
