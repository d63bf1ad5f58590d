//! PortOne's section of the settings, `[payments.portone]`: read and checked only when
//! `payments.provider = "portone"`.

use serde::{Deserialize, Serialize};

use crate::setting::{is_origin, Problems, Secret};

/// PortOne V2 (`payments.provider = "portone"`): the buyer pays in PortOne's window; PortOne
/// reports by a Standard Webhooks-signed webhook, and sluice reads the payment from its API.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortOneSettings {
    /// The V2 API secret (console → 결제 연동 → 연동 정보 → V2 API).
    pub api_secret: Secret,
    /// The webhook's signing secret (`whsec_…`, or its base64 without the prefix).
    pub webhook_secret: Secret,
    /// The store id (`store-…`) the page's SDK pays into.
    pub store_id: String,
    /// The channel key (`channel-key-…`) of the PG channel the page's SDK pays through.
    pub channel_key: String,
    /// PortOne's API (the tests point it at a stand-in).
    pub api_base: String,
    /// Where the waiting page loads PortOne's browser SDK from.
    pub js_url: String,
    /// Origins of the PG windows PortOne's SDK opens in a frame on the waiting page, which its
    /// policy then lets in (`frame-src`), e.g. `https://stdpay.inicis.com` for KG Inicis:
    /// `scheme://host[:port]`, the host may start with `*.`. PortOne's own hosts are in already.
    pub frame_origins: Vec<String>,
}

impl Default for PortOneSettings {
    fn default() -> Self {
        PortOneSettings {
            api_secret: Secret::default(),
            webhook_secret: Secret::default(),
            store_id: String::new(),
            channel_key: String::new(),
            api_base: "https://api.portone.io".into(),
            js_url: "https://cdn.portone.io/v2/browser-sdk.js".into(),
            frame_origins: Vec::new(),
        }
    }
}

impl PortOneSettings {
    /// Adds each setting that cannot be used.
    pub fn check(&self, p: &mut Problems) {
        p.unless(
            self.api_secret.len() >= 16,
            "payments.portone.api_secret",
            "must be set: the store's V2 API secret",
        );
        p.unless(
            crate::payments::standard_webhooks::secret_bytes(self.webhook_secret.expose())
                .is_some(),
            "payments.portone.webhook_secret",
            "must be set: the webhook's secret (whsec_… or its base64)",
        );
        for (key, value) in [
            ("payments.portone.store_id", &self.store_id),
            ("payments.portone.channel_key", &self.channel_key),
        ] {
            p.unless(
                !value.is_empty(),
                key,
                "must be set (PortOne's console names it)",
            );
        }
        p.http_urls([
            ("payments.portone.api_base", self.api_base.as_str()),
            ("payments.portone.js_url", self.js_url.as_str()),
        ]);
        // (`*.` stands for any subdomain in a page's policy)
        let framed = |o: &&String| is_origin(&o.replacen("://*.", "://", 1));
        for origin in self.frame_origins.iter().filter(|o| !framed(o)) {
            p.add(
                "payments.portone.frame_origins",
                format!(
                    "`{origin}` is not an origin: scheme://host[:port], no path, e.g. https://stdpay.inicis.com"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_origins_are_origins_or_any_subdomain_of_one() {
        let problems = |origins: &[&str]| {
            let settings = PortOneSettings {
                api_secret: "portone-api-secret-0123".into(),
                webhook_secret: "whsec_c2x1aWNlLXBvcnRvbmUtdGVzdA==".into(),
                store_id: "store-1".into(),
                channel_key: "channel-key-1".into(),
                frame_origins: origins.iter().map(|o| o.to_string()).collect(),
                ..PortOneSettings::default()
            };
            let mut p = Problems::default();
            settings.check(&mut p);
            p.into_vec()
        };
        assert_eq!(problems(&[]), vec![]);
        assert_eq!(
            problems(&["https://stdpay.inicis.com", "https://*.nicepay.co.kr"]),
            vec![]
        );
        for origin in [
            "https://stdpay.inicis.com/pay",
            "stdpay.inicis.com",
            "https://*",
            "https://pg.example; script-src *",
        ] {
            let found = problems(&[origin]);
            assert!(
                found.len() == 1 && found[0].key == "payments.portone.frame_origins",
                "{origin}: {found:?}"
            );
        }
    }
}
