//! User tokens: JWTs from the customer's identity provider, verified with an HS256 secret or an
//! Ed25519 / RSA public key from configuration, or with the provider's published keys (a JWKS
//! by URL or by OpenID Connect discovery, [`super::jwks`], chosen by the token's `kid`). `sub` is
//! the user id.
//!
//! Every status poll of every waiting user carries one, so a token is read once: the signature
//! over `header.payload` first (with an HS256 secret, under an HMAC key set up once at start;
//! with a public key, by jsonwebtoken), then the header's `alg` (one of the configured key's
//! algorithms, so a token cannot choose a weaker check), then the claims, parsed once:
//! - `exp` and `sub` are required; a token expired more than [`LEEWAY_SECS`] ago is refused;
//! - `iss`, when an issuer is configured, is required and must name it (a string, or an array
//!   that contains it);
//! - `aud`, when an audience is configured, is required and must name it; without one, a token
//!   with an `aud` is refused: sluice names no audience of its own (RFC 7519 4.1.3).
//!
//! Minting (`sluice dev-token`, the tests) goes through jsonwebtoken.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use ring::hmac;
use serde::{Deserialize, Serialize};

use super::jwks::{Jwks, Source};
use crate::config::AuthConfig;
use crate::domain::UserId;

/// How long past its `exp` a token is still taken: the identity provider's clock and ours
/// may differ by this much.
pub const LEEWAY_SECS: i64 = 5;

/// What `mint` writes.
#[derive(Debug, Serialize)]
struct MintedClaims<'a> {
    sub: &'a str,
    exp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
}

/// The header fields a check reads.
#[derive(Deserialize)]
struct TokenHeader {
    alg: Algorithm,
    #[serde(default)]
    kid: Option<String>,
}

/// The claims a check reads; strings are borrowed from the decoded payload where they have no
/// escapes.
#[derive(Deserialize)]
struct TokenClaims<'a> {
    #[serde(borrow)]
    sub: Option<Cow<'a, str>>,
    /// NumericDate: seconds, possibly fractional (RFC 7519 2).
    exp: Option<f64>,
    #[serde(borrow)]
    iss: Option<Issuer<'a>>,
    /// One audience or several (RFC 7519 4.1.3): read as the issuer's names are.
    #[serde(borrow)]
    aud: Option<Issuer<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Issuer<'a> {
    One(#[serde(borrow)] Cow<'a, str>),
    Many(#[serde(borrow)] Vec<Cow<'a, str>>),
}

impl Issuer<'_> {
    fn names(&self, expected: &str) -> bool {
        match self {
            Issuer::One(iss) => iss == expected,
            Issuer::Many(all) => all.iter().any(|iss| iss == expected),
        }
    }
}

/// How a token's signature is checked.
#[derive(Clone)]
enum SignatureCheck {
    /// HS256 under a key whose HMAC state ring computed once.
    Hs256(hmac::Key),
    /// Ed25519 or RSA, by jsonwebtoken, with the tokens it verified.
    PublicKey(DecodingKey, Arc<crate::auth::verified::Verified>),
    /// The identity provider's published keys, by the token's `kid`; each key's algorithm is
    /// the only one a token signed with it may name.
    Jwks(Arc<Jwks>),
}

#[derive(Clone)]
pub struct UserTokens {
    /// The issuers trusted: the one of the simple settings first (if any), then
    /// `auth.user_issuers`. With one, every token is its; with several, a token's `iss` picks.
    issuers: Vec<Trusted>,
    /// Present with an HS256 secret: lets `sluice dev-token` and the tests mint tokens.
    encoding: Option<EncodingKey>,
}

/// One trusted issuer: how its tokens are checked and whose users they name.
#[derive(Clone)]
struct Trusted {
    check: SignatureCheck,
    /// The algorithms a token's header may name: those of the configured key.
    algorithms: &'static [Algorithm],
    /// The `iss` every token must carry, when configured.
    issuer: Option<String>,
    /// The `aud` every token must carry, when configured.
    audience: Option<String>,
    /// Put before `sub` to make the user id, so two issuers' users cannot collide.
    prefix: String,
    /// The first header segment a token verified with, its algorithm and key id: an identity
    /// provider writes the same header on every token (until it rotates its key), so a token
    /// with that segment skips its decoding.
    usual_header: Arc<OnceLock<UsualHeader>>,
}

/// A header segment as it came, with the algorithm and the key id it names.
type UsualHeader = (Box<str>, Algorithm, Option<String>);

#[derive(Debug, thiserror::Error)]
pub enum UserTokenError {
    #[error("the token is not valid: {0}")]
    Invalid(&'static str),
    #[error("the token's subject is not a valid user id")]
    BadSubject,
    #[error("this deployment verifies user tokens with a public key and cannot mint them")]
    CannotMint,
    /// Signed with a key (`kid`) the keys in memory of the issuer (its index among the trusted)
    /// do not hold: fetching them again may find it (a rotation).
    #[error("the token is not valid: signed with a key sluice does not know (kid)")]
    UnknownKey(usize),
}

use UserTokenError::Invalid;

impl UserTokens {
    pub fn from_config(auth: &AuthConfig) -> anyhow::Result<Self> {
        const HS256: &[Algorithm] = &[Algorithm::HS256];
        const EDDSA: &[Algorithm] = &[Algorithm::EdDSA];
        const RSA: &[Algorithm] = &[Algorithm::RS256, Algorithm::RS384, Algorithm::RS512];
        const PUBLISHED: &[Algorithm] = &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
            Algorithm::ES256,
            Algorithm::ES384,
            Algorithm::EdDSA,
        ];
        let published = match (&auth.user_oidc_issuer, &auth.user_jwks_url) {
            (Some(issuer), _) => Some(Source::Issuer(issuer.to_string())),
            (None, Some(url)) => Some(Source::Url(url.to_string())),
            (None, None) => None,
        };
        let simple = match (
            &auth.user_jwt_hs256_secret,
            &auth.user_jwt_public_key_pem,
            published,
        ) {
            (_, _, Some(source)) => {
                Some((SignatureCheck::Jwks(Jwks::new(source)?), PUBLISHED, None))
            }
            (Some(secret), _, None) => Some((
                SignatureCheck::Hs256(hmac::Key::new(
                    hmac::HMAC_SHA256,
                    secret.expose().as_bytes(),
                )),
                HS256,
                Some(EncodingKey::from_secret(secret.expose().as_bytes())),
            )),
            (None, Some(pem), None) => Some(match DecodingKey::from_ed_pem(pem.as_bytes()) {
                Ok(key) => (SignatureCheck::PublicKey(key, Arc::default()), EDDSA, None),
                Err(_) => (
                    SignatureCheck::PublicKey(
                        DecodingKey::from_rsa_pem(pem.as_bytes())
                            .map_err(|e| anyhow::anyhow!("auth.user_jwt_public_key_pem: {e}"))?,
                        Arc::default(),
                    ),
                    RSA,
                    None,
                ),
            }),
            (None, None, None) => None,
        };
        let mut issuers = Vec::new();
        let mut encoding = None;
        if let Some((check, algorithms, minting)) = simple {
            encoding = minting;
            issuers.push(Trusted {
                check,
                algorithms,
                // Discovery names the issuer: its tokens must say so.
                issuer: auth
                    .user_jwt_issuer
                    .clone()
                    .or_else(|| auth.user_oidc_issuer.as_ref().map(ToString::to_string)),
                audience: auth.user_jwt_audience.clone(),
                prefix: String::new(),
                usual_header: Arc::default(),
            });
        }
        for more in &auth.user_issuers {
            let source = match &more.jwks_url {
                Some(url) => Source::Url(url.to_string()),
                None => Source::Issuer(more.issuer.to_string()),
            };
            issuers.push(Trusted {
                check: SignatureCheck::Jwks(Jwks::new(source)?),
                algorithms: PUBLISHED,
                issuer: Some(more.issuer.to_string()),
                audience: more.audience.clone(),
                prefix: more.user_prefix.clone(),
                usual_header: Arc::default(),
            });
        }
        if issuers.is_empty() {
            anyhow::bail!(
                "auth.user_jwt_hs256_secret, auth.user_jwt_public_key_pem, auth.user_jwks_url, auth.user_oidc_issuer or auth.user_issuers is required"
            );
        }
        Ok(UserTokens { issuers, encoding })
    }

    /// The published keys of each trusted issuer whose tokens are checked with them: the server
    /// keeps them fresh ([`Jwks::run`]).
    pub fn jwks(&self) -> Vec<Arc<Jwks>> {
        (0..self.issuers.len())
            .filter_map(|i| self.jwks_of(i))
            .collect()
    }

    /// The published keys of the trusted issuer `index`, if its tokens are checked with them.
    pub fn jwks_of(&self, index: usize) -> Option<Arc<Jwks>> {
        match &self.issuers.get(index)?.check {
            SignatureCheck::Jwks(jwks) => Some(Arc::clone(jwks)),
            SignatureCheck::Hs256(_) | SignatureCheck::PublicKey(..) => None,
        }
    }

    /// The user a token names, if it is signed by the configured key and its claims hold now.
    pub fn verify(&self, token: &str) -> Result<UserId, UserTokenError> {
        self.verify_at(token, chrono::Utc::now().timestamp())
    }

    fn verify_at(&self, token: &str, now: i64) -> Result<UserId, UserTokenError> {
        let (signed, signature) = token.rsplit_once('.').ok_or(Invalid("malformed"))?;
        let (header, payload) = signed.split_once('.').ok_or(Invalid("malformed"))?;
        match self.issuers.as_slice() {
            // One issuer: the signature first, so a forged token costs no claims' parsing.
            [one] => {
                one.check_signature(header, signed, signature, 0)?;
                let payload = decoded(payload)?;
                one.accept(claims_of(&payload)?, now)
            }
            // Several: the token's own `iss` says whose keys check it.
            many => {
                let payload = decoded(payload)?;
                let claims = claims_of(&payload)?;
                let named = |t: &Trusted| match (&t.issuer, &claims.iss) {
                    (Some(expected), Some(iss)) => iss.names(expected),
                    _ => false,
                };
                let index = many
                    .iter()
                    .position(named)
                    .or_else(|| many.iter().position(|t| t.issuer.is_none()))
                    .ok_or(Invalid("not from a trusted issuer (iss)"))?;
                many[index].check_signature(header, signed, signature, index)?;
                many[index].accept(claims, now)
            }
        }
    }

    /// Mints a token for `user` valid for `ttl_secs` (HS256 deployments only).
    pub fn mint(&self, user: &UserId, ttl_secs: i64) -> Result<String, UserTokenError> {
        let key = self.encoding.as_ref().ok_or(UserTokenError::CannotMint)?;
        let claims = MintedClaims {
            sub: user.as_str(),
            exp: chrono::Utc::now().timestamp() + ttl_secs,
            iss: self.issuers.first().and_then(|t| t.issuer.as_deref()),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, key)
            .map_err(|_| Invalid("could not be minted"))
    }
}

impl Trusted {
    /// Whether the token (its `header` segment, the `signed` part and the `signature`) is
    /// signed by this issuer's key (`index`: its place among the trusted).
    fn check_signature(
        &self,
        header: &str,
        signed: &str,
        signature: &str,
        index: usize,
    ) -> Result<(), UserTokenError> {
        let (alg, kid) = match self.usual_header.get() {
            Some((usual, alg, kid)) if **usual == *header => (*alg, kid.clone()),
            _ => header_of(header)?,
        };
        if !self.algorithms.contains(&alg) {
            return Err(Invalid("its algorithm is not the configured key's"));
        }
        if !self.signature_holds(signed, signature, alg, kid.as_deref(), index)? {
            return Err(Invalid("the signature does not verify"));
        }
        if self.usual_header.get().is_none() {
            let _ = self.usual_header.set((header.into(), alg, kid));
        }
        Ok(())
    }

    /// The user a signed token's claims name, if they hold now for this issuer.
    fn accept(&self, claims: TokenClaims, now: i64) -> Result<UserId, UserTokenError> {
        let exp = claims
            .exp
            .filter(|exp| exp.is_finite() && *exp >= 0.0)
            .ok_or(Invalid("no expiry (exp)"))?;
        if (exp.round() as i64) < now - LEEWAY_SECS {
            return Err(Invalid("expired"));
        }
        if let Some(expected) = &self.issuer {
            if !claims.iss.is_some_and(|iss| iss.names(expected)) {
                return Err(Invalid("not from the expected issuer (iss)"));
            }
        }
        match (&self.audience, claims.aud) {
            (Some(expected), Some(aud)) if aud.names(expected) => {}
            (Some(_), _) => return Err(Invalid("not for sluice's audience (aud)")),
            (None, Some(_)) => return Err(Invalid("meant for an audience (aud) sluice is not")),
            (None, None) => {}
        }
        let sub = claims.sub.ok_or(Invalid("no subject (sub)"))?;
        if self.prefix.is_empty() {
            UserId::parse(&sub)
        } else {
            UserId::parse(&format!("{}{sub}", self.prefix))
        }
        .map_err(|_| UserTokenError::BadSubject)
    }

    fn signature_holds(
        &self,
        signed: &str,
        signature: &str,
        alg: Algorithm,
        kid: Option<&str>,
        index: usize,
    ) -> Result<bool, UserTokenError> {
        Ok(match &self.check {
            SignatureCheck::Hs256(key) => URL_SAFE_NO_PAD
                .decode(signature)
                .is_ok_and(|mac| hmac::verify(key, signed.as_bytes(), &mac).is_ok()),
            SignatureCheck::PublicKey(key, verified) => verified.check(signed, signature, || {
                jsonwebtoken::crypto::verify(signature, signed.as_bytes(), key, alg)
                    .unwrap_or(false)
            }),
            SignatureCheck::Jwks(jwks) => {
                let key = jwks.key(kid).ok_or(UserTokenError::UnknownKey(index))?;
                if key.alg != alg {
                    return Err(Invalid("its algorithm is not its key's"));
                }
                key.verified.check(signed, signature, || {
                    jsonwebtoken::crypto::verify(signature, signed.as_bytes(), &key.key, alg)
                        .unwrap_or(false)
                })
            }
        })
    }
}

/// A base64url segment's bytes.
fn decoded(segment: &str) -> Result<Vec<u8>, UserTokenError> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| Invalid("malformed"))
}

/// The claims of a decoded payload.
fn claims_of(payload: &[u8]) -> Result<TokenClaims<'_>, UserTokenError> {
    serde_json::from_slice(payload).map_err(|_| Invalid("malformed claims"))
}

/// The algorithm and key id a token's base64url JSON header names.
fn header_of(header: &str) -> Result<(Algorithm, Option<String>), UserTokenError> {
    let bytes = decoded(header)?;
    let header: TokenHeader =
        serde_json::from_slice(&bytes).map_err(|_| Invalid("malformed header"))?;
    Ok((header.alg, header.kid))
}

#[cfg(test)]
#[path = "user_token_tests.rs"]
mod tests;
