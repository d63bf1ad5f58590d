//! Where domain events go after the outbox: the relay (`workers/relay.rs`) reads committed
//! outbox rows in order and hands them to an [`EventSink`]. Delivery is at least once; every
//! event carries a unique id that consumers de-duplicate on.

pub mod file;

use std::sync::Arc;

use async_trait::async_trait;

use crate::ledger::OutboxEvent;

pub use file::FileSink;

#[async_trait]
pub trait EventSink: Send + Sync + 'static {
    /// Publishes a batch, in order; an error means none may be taken as published.
    async fn publish(&self, batch: &[OutboxEvent]) -> anyhow::Result<()>;
}

/// The sink named by the configuration: a JSON lines file (Kafka comes with the relay issue).
pub fn from_config(config: &crate::config::Config) -> Arc<dyn EventSink> {
    Arc::new(FileSink::new(config.events_file()))
}
