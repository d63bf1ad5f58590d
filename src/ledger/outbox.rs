//! The outbox: events committed with the changes they report, waiting for the relay.

use async_trait::async_trait;
use uuid::Uuid;

use super::LedgerResult;
use crate::domain::SaleId;

/// Held by the one relay that publishes; dropping it lets another take over.
#[async_trait]
pub trait RelayLease: Send {
    /// Whether the lease still holds (its connection may have died).
    async fn alive(&mut self) -> bool;
}

/// One outbox row: a domain event committed with the change it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    pub id: Uuid,
    pub sale_id: SaleId,
    pub event_type: String,
    /// The event's envelope as JSON text, exactly as consumers receive it (passed through
    /// untouched: the relay neither parses nor re-serialises it).
    pub payload: String,
    /// The trace of the change that wrote it (W3C `traceparent`), when one was recorded: the
    /// Kafka record's header of that name.
    pub traceparent: Option<String>,
}

/// The outbox as the relay reads and marks it.
#[async_trait]
pub trait OutboxLedger: Send + Sync {
    /// Unpublished outbox rows, oldest first; with `after`, only those after that row (the
    /// relay reads the next batch while the previous one is still being published).
    async fn pending_events(
        &self,
        limit: u32,
        after: Option<Uuid>,
    ) -> LedgerResult<Vec<OutboxEvent>>;

    async fn mark_published(&self, ids: &[Uuid]) -> LedgerResult<()>;

    /// Unpublished rows and the age of the oldest, in seconds.
    async fn outbox_backlog(&self) -> LedgerResult<(u64, f64)>;

    /// Counts a refusal of the sink for one row; at `max_tries` the row is dead-lettered.
    /// Returns whether it was.
    async fn record_refusal(&self, id: Uuid, max_tries: u32) -> LedgerResult<bool>;

    /// The right to relay: one relay at a time publishes, so events keep their order. `None`
    /// while another relay holds it.
    async fn relay_lease(&self) -> LedgerResult<Option<Box<dyn RelayLease>>>;
}
