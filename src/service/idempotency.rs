//! `Idempotency-Key`: the first successful answer to a (user, key) is saved with a hash of the
//! request; a retry with the same request gets that answer again, the same key with a different
//! request gets 422. The key is claimed before the work starts, so a duplicate sent while the
//! first is running waits for its answer (409 if it takes over 5 s); a failed request frees
//! the key, and a claim left by a crashed process is taken over after 10 s.

use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{App, ServiceError, ServiceResult};
use crate::domain::UserId;
use crate::ledger::SavedResponse;

/// The saved status of a key whose first request is still running.
const IN_PROGRESS: u16 = 0;
/// A claim this old was left by a process that died mid-request (no request runs this long:
/// store calls time out in seconds): a retry may take it over.
const STALE_CLAIM_SECS: u64 = 10;
/// How long a duplicate waits for the first request's answer before answering 409.
const WAIT_FOR_FIRST: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

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
    // A retry of a finished request: its answer, in one read.
    let saved = app.ledger.saved_response(user, &key.0).await?;
    if let Some(answer) = settled(saved, &request_hash) {
        return answer;
    }
    // Claim the key before working, so concurrent duplicates (a double click, a retry racing
    // the original) wait for the first answer instead of doing the work again.
    let deadline = Instant::now() + WAIT_FOR_FIRST;
    while !app
        .ledger
        .reserve_key(user, &key.0, &request_hash, STALE_CLAIM_SECS)
        .await?
    {
        let saved = app.ledger.saved_response(user, &key.0).await?;
        if let Some(answer) = settled(saved, &request_hash) {
            return answer;
        }
        // In progress elsewhere, or just released: ask again shortly.
        if Instant::now() >= deadline {
            return Err(ServiceError::IdempotencyKeyInProgress);
        }
        tokio::time::sleep(POLL).await;
    }
    let answer = match work.await {
        Ok(answer) => answer,
        Err(e) => {
            // Errors are not saved: free the key so a retry runs the request again. If even
            // that fails (the ledger is down), the claim goes stale and is taken over later;
            // the caller gets the request's own error either way.
            if let Err(release) = app.ledger.release_key(user, &key.0).await {
                tracing::warn!(error = %release, "idempotency key not released");
            }
            return Err(e);
        }
    };
    let body = serde_json::to_value(&answer).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let saved = SavedResponse {
        request_hash,
        status: 200,
        body,
    };
    app.ledger.save_response(user, &key.0, &saved).await?;
    Ok(answer)
}

/// What a saved key settles: its answer (same request, finished), 422 (another request), or
/// nothing yet (no key, or its first request still running).
fn settled<T: DeserializeOwned>(
    saved: Option<SavedResponse>,
    request_hash: &str,
) -> Option<ServiceResult<T>> {
    let saved = saved?;
    if saved.request_hash != request_hash {
        return Some(Err(ServiceError::IdempotencyKeyReused));
    }
    (saved.status != IN_PROGRESS).then(|| {
        serde_json::from_value(saved.body).map_err(|e| ServiceError::Internal(e.to_string()))
    })
}
