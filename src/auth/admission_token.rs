//! Admission tokens: sluice's proof that an attempt was let in. An Ed25519-signed JWT bound to
//! the attempt, the user, the sale and the admission deadline; `/.well-known/jwks.json`
//! publishes the public key so a merchant's services can verify admission offline.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{AttemptId, SaleId, UserId};

const ISSUER: &str = "sluice";
const AUDIENCE: &str = "sluice-admission";

/// The claims of an admission token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionClaims {
    pub sub: String,
    /// The attempt id (64 hex digits).
    pub att: String,
    pub sale: String,
    pub exp: i64,
    pub iat: i64,
    pub iss: String,
    pub aud: String,
}

#[derive(Clone)]
pub struct AdmissionTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// The public key, base64url: the JWK's `x`.
    x: String,
    kid: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdmissionTokenError {
    #[error("the admission token is not valid")]
    Invalid,
    #[error("the admission token has expired")]
    Expired,
    #[error("the admission token was issued for another attempt")]
    WrongAttempt,
}

impl AdmissionTokens {
    /// From a 32-byte seed (every replica must share it), or a fresh random key.
    pub fn new(seed: Option<[u8; 32]>) -> Self {
        let seed = seed.unwrap_or_else(rand::random);
        // PKCS#8 v1 of an Ed25519 key is a fixed 16-byte prefix and the seed.
        let mut pkcs8 = hex::decode("302e020100300506032b657004220420").expect("static hex");
        pkcs8.extend_from_slice(&seed);
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are a seed");
        let public = pair.public_key().as_ref().to_vec();
        let x = URL_SAFE_NO_PAD.encode(&public);
        let kid = hex::encode(&Sha256::digest(&public)[..8]);
        AdmissionTokens {
            encoding: EncodingKey::from_ed_der(&pkcs8),
            decoding: DecodingKey::from_ed_components(&x).expect("valid base64url"),
            x,
            kid,
        }
    }

    pub fn issue(&self, attempt: AttemptId, user: &UserId, expires_at_unix: i64) -> String {
        let claims = AdmissionClaims {
            sub: user.as_str().to_owned(),
            att: attempt.to_string(),
            sale: attempt.sale.to_string(),
            exp: expires_at_unix,
            iat: chrono::Utc::now().timestamp(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .expect("Ed25519 signing does not fail")
    }

    /// Checks signature, expiry, and that the token names this attempt, user and sale.
    pub fn verify(
        &self,
        token: &str,
        attempt: AttemptId,
        user: &UserId,
    ) -> Result<AdmissionClaims, AdmissionTokenError> {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.leeway = 0;
        let data = jsonwebtoken::decode::<AdmissionClaims>(token, &self.decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => AdmissionTokenError::Expired,
                _ => AdmissionTokenError::Invalid,
            })?;
        let c = data.claims;
        let sale: SaleId = attempt.sale;
        if c.att != attempt.to_string() || c.sub != user.as_str() || c.sale != sale.to_string() {
            return Err(AdmissionTokenError::WrongAttempt);
        }
        Ok(c)
    }

    /// The JSON Web Key Set with the public key.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({
            "keys": [{
                "kty": "OKP", "crv": "Ed25519", "x": self.x, "kid": self.kid,
                "alg": "EdDSA", "use": "sig"
            }]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_for_its_attempt_user_and_key() {
        let tokens = AdmissionTokens::new(Some([7; 32]));
        let sale = SaleId::new();
        let attempt = AttemptId::new(sale);
        let user = UserId::parse("alice").unwrap();
        let exp = chrono::Utc::now().timestamp() + 60;
        let token = tokens.issue(attempt, &user, exp);
        assert_eq!(
            tokens.verify(&token, attempt, &user).unwrap().att,
            attempt.to_string()
        );

        let other_attempt = AttemptId::new(sale);
        assert_eq!(
            tokens.verify(&token, other_attempt, &user),
            Err(AdmissionTokenError::WrongAttempt)
        );
        let bob = UserId::parse("bob").unwrap();
        assert_eq!(
            tokens.verify(&token, attempt, &bob),
            Err(AdmissionTokenError::WrongAttempt)
        );

        let other_key = AdmissionTokens::new(Some([8; 32]));
        assert_eq!(
            other_key.verify(&token, attempt, &user),
            Err(AdmissionTokenError::Invalid)
        );

        let mut altered = token.clone();
        altered.replace_range(
            token.len() - 5..token.len() - 4,
            if token.ends_with('A') { "B" } else { "A" },
        );
        let tampered_payload = {
            let parts: Vec<&str> = token.split('.').collect();
            let mut claims: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
            claims["exp"] = serde_json::json!(exp + 3600);
            format!(
                "{}.{}.{}",
                parts[0],
                URL_SAFE_NO_PAD.encode(claims.to_string()),
                parts[2]
            )
        };
        assert_eq!(
            tokens.verify(&tampered_payload, attempt, &user),
            Err(AdmissionTokenError::Invalid)
        );

        let expired = tokens.issue(attempt, &user, chrono::Utc::now().timestamp() - 10);
        assert_eq!(
            tokens.verify(&expired, attempt, &user),
            Err(AdmissionTokenError::Expired)
        );
    }

    #[test]
    fn the_jwks_key_verifies_tokens_offline() {
        let tokens = AdmissionTokens::new(None);
        let attempt = AttemptId::new(SaleId::new());
        let user = UserId::parse("alice").unwrap();
        let token = tokens.issue(attempt, &user, chrono::Utc::now().timestamp() + 60);
        let jwks = tokens.jwks();
        let x = jwks["keys"][0]["x"].as_str().unwrap();
        let key = DecodingKey::from_ed_components(x).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&[AUDIENCE]);
        assert!(jsonwebtoken::decode::<AdmissionClaims>(&token, &key, &validation).is_ok());
    }
}
