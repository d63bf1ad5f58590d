//! What the queue store has followed of the ledger: each sale's settings version it took, and
//! the queue-sync log of the stock changes transitions make.
//!
//! Which mechanism repairs which failure, with its metric and alert: `docs/architecture.md`,
//! "Keeping the stores in line".

use async_trait::async_trait;

use super::{LedgerResult, PendingSync, SyncChange};
use crate::domain::{AttemptId, SaleId};

/// `(sale id, version)` rows as the ledger's types; the version is one of a sale's settings
/// (the ledger's, or the one the queue store took).
pub(crate) fn sale_versions_from(rows: Vec<(uuid::Uuid, i64)>) -> Vec<(SaleId, u64)> {
    rows.into_iter()
        .map(|(id, version)| (SaleId(id), version as u64))
        .collect()
}

/// `(id, sale, attempt, change)` rows of the queue-sync log, pending or applied (rows naming
/// no known change are skipped).
pub(crate) fn sync_rows_from(rows: Vec<(i64, uuid::Uuid, uuid::Uuid, String)>) -> Vec<PendingSync> {
    rows.into_iter()
        .filter_map(|(id, sale, local, change)| {
            Some(PendingSync {
                id,
                attempt: AttemptId {
                    sale: SaleId(sale),
                    local,
                },
                change: SyncChange::parse(&change)?,
            })
        })
        .collect()
}

/// What the queue store has followed of the ledger.
#[async_trait]
pub trait QueueSyncLedger: Send + Sync {
    /// Sales whose settings changed since the queue store last took them, with the version it
    /// is to take (see [`SaleRecord::settings_version`](super::SaleRecord::settings_version)); at most `limit`.
    async fn sales_behind_store(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>>;

    /// The queue store has the sale's settings as of `version` (an older version than one
    /// recorded before changes nothing), as of now.
    async fn store_followed(&self, id: SaleId, version: u64) -> LedgerResult<()>;

    /// The version of each sale's settings, for the drift checker to compare with the version
    /// the queue store holds: every sale not closed first, then the closed ones, the newest
    /// first (a store restored from an old snapshot holds them open again); at most `limit`.
    async fn sales_settings_to_check(&self, limit: u32) -> LedgerResult<Vec<(SaleId, u64)>>;

    /// The sales whose settings the queue store was recorded taking within the last
    /// `within_ms`, with the version it took: what a replay checks the store still has (a
    /// failover or a restart loses the last writes). At most `limit`, the latest first.
    async fn sales_followed_within(
        &self,
        within_ms: u64,
        limit: u32,
    ) -> LedgerResult<Vec<(SaleId, u64)>>;

    /// Queue-sync rows not applied yet and older than `older_than_ms`, oldest first.
    async fn pending_syncs(&self, older_than_ms: u64, limit: u32)
        -> LedgerResult<Vec<PendingSync>>;

    /// Marks queue-sync rows applied.
    async fn mark_synced(&self, ids: &[i64]) -> LedgerResult<()>;

    /// Queue-sync rows not applied yet, and the age of the oldest, in seconds.
    async fn sync_backlog(&self) -> LedgerResult<(u64, f64)>;

    /// Queue-sync rows marked applied within the last `within_ms`, newest first (a failover
    /// loses the last writes): what a replay checks the queue store still has.
    async fn recently_synced(&self, within_ms: u64, limit: u32) -> LedgerResult<Vec<PendingSync>>;

    /// Deletes queue-sync rows applied more than `older_than_ms` ago; returns how many.
    async fn prune_synced(&self, older_than_ms: u64) -> LedgerResult<u64>;
}
