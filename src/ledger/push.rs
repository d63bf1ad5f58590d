//! The Web Push subscriptions waiting users' pages leave, one per attempt, until the attempt's
//! turn comes (`crate::notify`).

use async_trait::async_trait;

use super::LedgerResult;
use crate::domain::AttemptId;
use crate::notify::web_push::Subscription;

#[async_trait]
pub trait PushLedger: Send + Sync {
    /// Keeps the attempt's subscription; a later one replaces it (the page subscribed again).
    async fn save_push_subscription(
        &self,
        attempt: AttemptId,
        subscription: &Subscription,
    ) -> LedgerResult<()>;

    /// The subscriptions of these attempts, each deleted as it is read: one message per
    /// attempt, whichever replica reads first.
    async fn take_push_subscriptions(
        &self,
        attempts: &[AttemptId],
    ) -> LedgerResult<Vec<(AttemptId, Subscription)>>;

    /// Drops the subscriptions of attempts whose turn never came (they left, or the sale ended).
    async fn purge_push_subscriptions(&self, older_than_secs: u64) -> LedgerResult<u64>;
}
