//! `Idempotency-Key`: the first successful answer to a (user, key) is saved with a hash of the
//! request; a retry with the same request gets that answer again, the same key with a different
//! request gets 422.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{App, ServiceError, ServiceResult};
use crate::domain::UserId;
use crate::ledger::SavedResponse;

/// A client's key: 1..=255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(key: &str) -> ServiceResult<Self> {
        if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ServiceError::validation(
                "Idempotency-Key",
                "1 to 255 printable ASCII characters",
            ));
        }
        Ok(IdempotencyKey(key.to_owned()))
    }
}

/// Runs `work` once per (user, key); `request` identifies the request (operation + body).
pub async fn idempotent<T, F>(
    app: &App,
    user: &UserId,
    key: Option<&IdempotencyKey>,
    request: &impl Serialize,
    work: F,
) -> ServiceResult<T>
where
    T: Serialize + DeserializeOwned,
    F: std::future::Future<Output = ServiceResult<T>>,
{
    let Some(key) = key else { return work.await };
    let request_hash = hex::encode(Sha256::digest(
        serde_json::to_vec(request).map_err(|e| ServiceError::Internal(e.to_string()))?,
    ));
    if let Some(saved) = app.ledger.saved_response(user, &key.0).await? {
        if saved.request_hash != request_hash {
            return Err(ServiceError::IdempotencyKeyReused);
        }
        return serde_json::from_value(saved.body)
            .map_err(|e| ServiceError::Internal(e.to_string()));
    }
    let answer = work.await?;
    let body = serde_json::to_value(&answer).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let saved = SavedResponse {
        request_hash,
        status: 200,
        body,
    };
    app.ledger.save_response(user, &key.0, &saved).await?;
    Ok(answer)
}
