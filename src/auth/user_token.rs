//! User tokens: JWTs from the customer's identity provider, verified with an HS256 secret or an
//! Ed25519 / RSA public key from configuration. `sub` is the user id.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::AuthConfig;
use crate::domain::UserId;

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<String>,
}

#[derive(Clone)]
pub struct UserTokens {
    decoding: DecodingKey,
    validation: Validation,
    /// Present with an HS256 secret: lets `sluice dev-token` and the tests mint tokens.
    encoding: Option<EncodingKey>,
    issuer: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UserTokenError {
    #[error("the token is not valid: {0}")]
    Invalid(String),
    #[error("the token's subject is not a valid user id")]
    BadSubject,
    #[error("this deployment verifies user tokens with a public key and cannot mint them")]
    CannotMint,
}

impl UserTokens {
    pub fn from_config(auth: &AuthConfig) -> anyhow::Result<Self> {
        let (decoding, algorithms, encoding) =
            match (&auth.user_jwt_hs256_secret, &auth.user_jwt_public_key_pem) {
                (Some(secret), _) => (
                    DecodingKey::from_secret(secret.as_bytes()),
                    vec![Algorithm::HS256],
                    Some(EncodingKey::from_secret(secret.as_bytes())),
                ),
                (None, Some(pem)) => match DecodingKey::from_ed_pem(pem.as_bytes()) {
                    Ok(key) => (key, vec![Algorithm::EdDSA], None),
                    Err(_) => (
                        DecodingKey::from_rsa_pem(pem.as_bytes())
                            .map_err(|e| anyhow::anyhow!("auth.user_jwt_public_key_pem: {e}"))?,
                        vec![Algorithm::RS256, Algorithm::RS384, Algorithm::RS512],
                        None,
                    ),
                },
                (None, None) => anyhow::bail!(
                    "auth.user_jwt_hs256_secret or auth.user_jwt_public_key_pem is required"
                ),
            };
        let mut validation = Validation::new(algorithms[0]);
        validation.algorithms = algorithms;
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = 5;
        if let Some(iss) = &auth.user_jwt_issuer {
            validation.set_issuer(&[iss]);
        }
        Ok(UserTokens {
            decoding,
            validation,
            encoding,
            issuer: auth.user_jwt_issuer.clone(),
        })
    }

    pub fn verify(&self, token: &str) -> Result<UserId, UserTokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| UserTokenError::Invalid(e.to_string()))?;
        UserId::parse(&data.claims.sub).map_err(|_| UserTokenError::BadSubject)
    }

    /// Mints a token for `user` valid for `ttl_secs` (HS256 deployments only).
    pub fn mint(&self, user: &UserId, ttl_secs: i64) -> Result<String, UserTokenError> {
        let key = self.encoding.as_ref().ok_or(UserTokenError::CannotMint)?;
        let claims = Claims {
            sub: user.as_str().to_owned(),
            exp: chrono::Utc::now().timestamp() + ttl_secs,
            iss: self.issuer.clone(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, key)
            .map_err(|e| UserTokenError::Invalid(e.to_string()))
    }
}
