//! The provider's side of payments: its id of each attempt's payment, the failures and refunds
//! it reported, and the payments still open, for the deadline check and the reconciler.

use async_trait::async_trait;
use uuid::Uuid;

use super::LedgerResult;
use crate::domain::{AttemptId, Money};

/// A payment still PAYMENT_PENDING, as the deadline check and the reconciler ask the provider
/// about it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenPayment {
    pub attempt: AttemptId,
    pub reference: Uuid,
    /// The provider's id of it (none when its start failed).
    pub provider_payment_id: Option<String>,
    /// The hold's amount (none when the sale is not priced).
    pub amount: Option<Money>,
}

#[async_trait]
pub trait PaymentLedger: Send + Sync {
    /// Records `provider`'s id of the attempt's payment; the first id recorded stands, and is
    /// the answer.
    async fn set_provider_payment(
        &self,
        attempt: AttemptId,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<String>>;

    /// The trace the payment `reference` was checked out in (W3C `traceparent`), if one was
    /// recorded.
    async fn payment_trace(&self, reference: Uuid) -> LedgerResult<Option<String>>;

    /// The attempt and the reference of `provider`'s payment `id`, if sluice started it.
    async fn payment_by_provider_id(
        &self,
        provider: &str,
        id: &str,
    ) -> LedgerResult<Option<(AttemptId, Uuid)>>;

    /// The provider's last failed try of the payment `reference` (the attempt stays payable).
    async fn set_payment_failure(&self, reference: Uuid, failure: &str) -> LedgerResult<()>;

    /// Notes what the provider said of the payment `reference` in its file's payment events
    /// (`kind`: `failed_try`, `refund_taken`, `refund_refused`), once per `event_id`.
    async fn note_payment(&self, event_id: &str, reference: Uuid, kind: &str) -> LedgerResult<()>;

    /// The provider's id of the refund it took for the attempt's payment.
    async fn set_provider_refund(&self, attempt: AttemptId, refund_id: &str) -> LedgerResult<()>;

    /// Up to `limit` payments PAYMENT_PENDING whose deadline has passed (`due`), or that have
    /// been pending `older_than_secs` or more, by the database's clock, oldest first.
    async fn open_payments(
        &self,
        due: bool,
        older_than_secs: u64,
        limit: u32,
    ) -> LedgerResult<Vec<OpenPayment>>;
}
