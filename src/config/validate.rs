//! The configuration checked whole: every setting that cannot be used is reported at once,
//! each by its TOML key and its `SLUICE__…` variable, so a deployment is fixed in one start.

use super::{Config, ConfigError, ProviderName};
use crate::setting::{is_origin, Problem, Problems};

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
        self.gate.check(&mut p);
        p.into_vec()
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
            !self.queue.timeout_ms.is_off(),
            "queue.timeout_ms",
            "must be positive",
        );
        p.unless(
            (20..=5000).contains(&self.queue.line_refresh_ms.0),
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
            (1..=10_000).contains(&self.ledger.batch_max),
            "ledger.batch_max",
            "must be between 1 and 10000",
        );
        p.unless(
            (1..=self.ledger.max_connections.get()).contains(&self.ledger.batch_calls),
            "ledger.batch_calls",
            "must be between 1 and ledger.max_connections",
        );
        p.unless(
            self.events.poll_ms.0 >= 10,
            "events.poll_ms",
            "must be at least 10",
        );
    }

    fn check_auth(&self, p: &mut Problems) {
        let auth = &self.auth;
        p.unless(
            auth.admin_key.len() >= 16,
            "auth.admin_key",
            "must be set, at least 16 characters",
        );
        let mut prefixes = std::collections::HashSet::new();
        for more in &auth.user_issuers {
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
            !self.payments.call_timeout_ms.is_off(),
            "payments.call_timeout_ms",
            "must be at least 1",
        );
        match self.payment_provider() {
            ProviderName::Sandbox | ProviderName::Webhook => p.unless(
                self.payments.webhook_secret.len() >= 16,
                "payments.webhook_secret",
                "must be set, at least 16 characters",
            ),
            chosen => crate::payments::providers::check(&self.payments, chosen, p),
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
            ["", "http/protobuf", "grpc"].contains(&t.otlp_protocol.as_str()),
            "telemetry.otlp_protocol",
            "must be http/protobuf or grpc (or empty: the environment's, else http/protobuf)",
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
    }

    fn check_http(&self, p: &mut Problems) {
        let http = &self.http;
        let public = &http.public_url;
        p.unless(
            public
                .as_ref()
                .is_none_or(|url| url.matches('/').count() == 2),
            "http.public_url",
            "empty, or an origin such as https://queue.shop.example (no path)",
        );
        p.unless(
            http.drain_delay_secs.is_off()
                || http.drain_delay_secs.0 < http.shutdown_timeout_secs.0,
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
            w.queue_sync_ms.0 >= 10,
            "workers.queue_sync_ms",
            "must be at least 10",
        );
        let replay_ms = w.queue_sync_replay_secs.millis();
        p.unless(
            (10_000..=crate::domain::holding::SYNCED_KEEP_MS).contains(&replay_ms),
            "workers.queue_sync_replay_secs",
            "must be between 10 and 3600 (the queue store keeps its record of applied changes an hour)",
        );
        p.unless(
            w.admission_tick_ms.0 >= 10,
            "workers.admission_tick_ms",
            "must be at least 10",
        );
        p.unless(
            w.lease_ttl_ms.0 >= 2 * w.admission_tick_ms.0,
            "workers.lease_ttl_ms",
            "must be at least twice admission_tick_ms",
        );
        p.unless(
            !(1..3).contains(&w.abandon_after_secs.0),
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
        if n.webhook_url.is_some() {
            p.unless(
                n.webhook_secret.len() >= 16,
                "notify.webhook_secret",
                "must be set, at least 16 characters",
            );
        }
    }

    fn check_valve(&self, p: &mut Problems) {
        let v = &self.valve;
        p.unless(
            v.prometheus_url
                .as_ref()
                .is_none_or(|url| url.starts_with("http://")),
            "valve.prometheus_url",
            "empty (own metrics) or http://…",
        );
        p.unless(v.tick_ms.0 >= 100, "valve.tick_ms", "must be at least 100");
        p.unless(
            !v.query_timeout_ms.is_off(),
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
            if v.prometheus_url.is_none() && !known {
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
