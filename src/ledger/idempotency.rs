//! Saved responses of requests sent with an `Idempotency-Key`, per user.

use async_trait::async_trait;

use super::LedgerResult;
use crate::domain::UserId;

/// A saved response of an idempotent request.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedResponse {
    pub request_hash: String,
    pub status: u16,
    pub body: serde_json::Value,
}

/// Idempotency keys, each kept with its saved response.
#[async_trait]
pub trait IdempotencyLedger: Send + Sync {
    /// The saved answer of (user, key); `status` 0 while its first request is in progress.
    async fn saved_response(&self, user: &UserId, key: &str)
        -> LedgerResult<Option<SavedResponse>>;

    /// Claims (user, key) for a request: true if this caller now runs it — the key was new,
    /// or its earlier claim is older than `stale_after_secs` (its process died).
    async fn reserve_key(
        &self,
        user: &UserId,
        key: &str,
        request_hash: &str,
        stale_after_secs: u64,
    ) -> LedgerResult<bool>;

    /// Drops an unfinished claim (the request failed: a retry may run it again).
    async fn release_key(&self, user: &UserId, key: &str) -> LedgerResult<()>;

    /// Completes the claim with the answer (or saves it, if there was no claim).
    async fn save_response(
        &self,
        user: &UserId,
        key: &str,
        saved: &SavedResponse,
    ) -> LedgerResult<()>;

    async fn purge_saved_responses(&self, older_than_secs: u64) -> LedgerResult<u64>;
}
