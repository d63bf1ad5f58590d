//! An identity provider's signing keys, published as a JWKS (RFC 7517) at its `jwks_uri`,
//! found by OpenID Connect discovery (`<issuer>/.well-known/openid-configuration`) or given.
//!
//! The keys live in memory ([`Jwks::key`] is a lock-free read, so a status poll pays what it
//! pays with a configured key). They are fetched at start, again when the JWKS's
//! `Cache-Control: max-age` runs out (at least a minute, at most a day apart), and again when a
//! token names a `kid` they do not have (a rotation at the provider) — at most once per
//! [`MIN_REFETCH`], so forged `kid`s cannot make sluice hammer the provider. While the
//! provider cannot be reached, the keys fetched last stay in use; `sluice_user_jwks_fetches_total`
//! counts each fetch by outcome, and a warning says so.
//!
//! Each key's algorithm is its `alg`, or the one its type names (RSA: RS256; EC P-256: ES256;
//! OKP Ed25519: EdDSA); a token must name that algorithm. Symmetric keys are never taken from a
//! JWKS.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// The shortest time between two fetches of the JWKS for unknown `kid`s.
pub const MIN_REFETCH: Duration = Duration::from_secs(10);
/// Bounds of the time between two scheduled fetches.
const MIN_MAX_AGE: Duration = Duration::from_secs(60);
const MAX_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// One usable key.
pub struct Key {
    pub kid: Option<String>,
    pub alg: Algorithm,
    pub key: DecodingKey,
    /// The tokens this key has verified, so that the same token is not verified again.
    pub verified: super::verified::Verified,
}

/// Where the keys come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The JWKS at this URL.
    Url(String),
    /// The `jwks_uri` of this issuer's OpenID configuration.
    Issuer(String),
}

pub struct Jwks {
    source: Source,
    http: reqwest::Client,
    keys: ArcSwap<Vec<Arc<Key>>>,
    /// When the last fetch was tried (ms since the epoch; 0: never).
    tried_ms: AtomicI64,
    /// When the next scheduled fetch is due (ms since the epoch).
    due_ms: AtomicI64,
}

#[derive(Deserialize)]
struct Discovery {
    jwks_uri: String,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Jwks {
    pub fn new(source: Source) -> anyhow::Result<Arc<Self>> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(5))
            .build()?;
        Ok(Arc::new(Jwks {
            source,
            http,
            keys: ArcSwap::from_pointee(Vec::new()),
            tried_ms: AtomicI64::new(0),
            due_ms: AtomicI64::new(0),
        }))
    }

    /// The key a token's header names: by `kid`, or the only key when the token names none.
    pub fn key(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        let keys = self.keys.load();
        match kid {
            Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
            None if keys.len() == 1 => keys.first().cloned(),
            None => None,
        }
    }

    /// Fetches the keys again for a `kid` they do not have, unless a fetch was tried within
    /// [`MIN_REFETCH`]; whether the keys were fetched now.
    pub async fn refetch_for_unknown_kid(&self) -> bool {
        let now = now_ms();
        let last = self.tried_ms.load(Ordering::Relaxed);
        if now - last < MIN_REFETCH.as_millis() as i64
            || self
                .tried_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            metrics::counter!("sluice_user_jwks_fetches_total", "outcome" => "rate_limited")
                .increment(1);
            return false;
        }
        self.fetch().await
    }

    /// Fetches the keys now; on failure the keys in use stay. Whether new keys were taken.
    pub async fn fetch(&self) -> bool {
        self.tried_ms.store(now_ms(), Ordering::Relaxed);
        match self.read().await {
            Ok((keys, max_age)) => {
                let count = keys.len();
                self.keys.store(Arc::new(keys));
                self.due_ms
                    .store(now_ms() + max_age.as_millis() as i64, Ordering::Relaxed);
                metrics::counter!("sluice_user_jwks_fetches_total", "outcome" => "ok").increment(1);
                metrics::gauge!("sluice_user_jwks_keys").set(count as f64);
                tracing::debug!(keys = count, "user token keys fetched");
                true
            }
            Err(e) => {
                metrics::counter!("sluice_user_jwks_fetches_total", "outcome" => "failed")
                    .increment(1);
                tracing::warn!(error = %e, kept = self.keys.load().len(),
                    "the identity provider's keys could not be fetched: the keys fetched last stay in use");
                // Tried again at the next check, not hammered meanwhile.
                self.due_ms
                    .store(now_ms() + MIN_REFETCH.as_millis() as i64, Ordering::Relaxed);
                false
            }
        }
    }

    /// Keeps the keys fresh: fetches whenever the last fetch's max-age runs out (or, after a
    /// failed fetch, [`MIN_REFETCH`] later). The first fetch is the server's, at start.
    pub async fn run(self: Arc<Self>) {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if now_ms() >= self.due_ms.load(Ordering::Relaxed) {
                self.fetch().await;
            }
        }
    }

    async fn read(&self) -> anyhow::Result<(Vec<Arc<Key>>, Duration)> {
        let url = match &self.source {
            Source::Url(url) => url.clone(),
            Source::Issuer(issuer) => {
                let discovery = format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                );
                let found: Discovery = self
                    .http
                    .get(discovery)
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                found.jwks_uri
            }
        };
        let response = self.http.get(url).send().await?.error_for_status()?;
        let max_age = max_age(
            response
                .headers()
                .get(reqwest::header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok()),
        );
        let set: serde_json::Value = response.json().await?;
        let keys: Vec<Arc<Key>> = set["keys"]
            .as_array()
            .map(|keys| keys.iter().filter_map(usable).map(Arc::new).collect())
            .unwrap_or_default();
        if keys.is_empty() {
            anyhow::bail!("the JWKS holds no key sluice can verify with");
        }
        Ok((keys, max_age))
    }
}

/// A JWK sluice verifies with: a public signing key of a type it knows.
fn usable(jwk: &serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(jwk.clone()).ok()?;
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
    {
        return None;
    }
    let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
        (AlgorithmParameters::OctetKey(_), _) => return None,
        (_, Some(named)) => algorithm_of(named)?,
        (AlgorithmParameters::RSA(_), None) => Algorithm::RS256,
        (AlgorithmParameters::EllipticCurve(ec), None) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        (AlgorithmParameters::EllipticCurve(_), None) => return None,
        (AlgorithmParameters::OctetKeyPair(_), None) => Algorithm::EdDSA,
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key: DecodingKey::from_jwk(&jwk).ok()?,
        verified: Default::default(),
    })
}

/// The signature algorithms sluice takes from a JWKS.
fn algorithm_of(named: KeyAlgorithm) -> Option<Algorithm> {
    Some(match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        KeyAlgorithm::HS256
        | KeyAlgorithm::HS384
        | KeyAlgorithm::HS512
        | KeyAlgorithm::RSA1_5
        | KeyAlgorithm::RSA_OAEP
        | KeyAlgorithm::RSA_OAEP_256 => return None,
    })
}

/// How long a JWKS may be kept, from its `Cache-Control` (`max-age`), within a minute and a day;
/// an hour when it says nothing.
fn max_age(cache_control: Option<&str>) -> Duration {
    let secs = cache_control
        .into_iter()
        .flat_map(|v| v.split(','))
        .find_map(|d| d.trim().strip_prefix("max-age=")?.parse::<u64>().ok());
    match secs {
        Some(secs) => Duration::from_secs(secs).clamp(MIN_MAX_AGE, MAX_MAX_AGE),
        None => Duration::from_secs(3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_and_bounded() {
        assert_eq!(
            max_age(Some("public, max-age=600")),
            Duration::from_secs(600)
        );
        assert_eq!(max_age(Some("max-age=5")), MIN_MAX_AGE);
        assert_eq!(max_age(Some("max-age=9999999")), MAX_MAX_AGE);
        assert_eq!(max_age(None), Duration::from_secs(3600));
    }

    #[test]
    fn symmetric_and_encryption_keys_are_not_taken_and_types_name_their_algorithm() {
        let oct = serde_json::json!({ "kty": "oct", "k": "c2VjcmV0", "kid": "s" });
        assert!(
            usable(&oct).is_none(),
            "an HMAC key from a JWKS would let anyone sign"
        );
        let ed = serde_json::json!({ "kty": "OKP", "crv": "Ed25519", "kid": "e",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" });
        assert_eq!(usable(&ed).map(|k| k.alg), Some(Algorithm::EdDSA));
        let enc = serde_json::json!({ "kty": "OKP", "crv": "Ed25519", "kid": "x", "use": "enc",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" });
        assert!(usable(&enc).is_none());
    }
}
