//! Where domain events go after the outbox: the relay (`workers/relay.rs`) reads committed
//! outbox rows in order and hands them to an [`EventSink`]. Delivery is at least once; every
//! event carries a unique id that consumers de-duplicate on.

pub mod file;
pub mod kafka;
pub mod tail;

use std::sync::Arc;

use async_trait::async_trait;

use crate::ledger::OutboxEvent;

pub use file::FileSink;
pub use kafka::KafkaSink;

#[async_trait]
pub trait EventSink: Send + Sync + 'static {
    /// Publishes a batch, in order. An error means none may be taken as published, except a
    /// [`Refused`] error: the events before the refused one were published.
    async fn publish(&self, batch: &[OutboxEvent]) -> anyhow::Result<()>;
}

/// The sink refused one event for good (too large, malformed): it will never be accepted as
/// it is. The `published` events before it in the batch went out.
#[derive(Debug, thiserror::Error)]
#[error("event {id} refused by the sink: {reason}")]
pub struct Refused {
    pub id: uuid::Uuid,
    pub published: usize,
    pub reason: String,
}

/// The sink named by the configuration: Kafka when `events.kafka_brokers` is set (its topic
/// created if missing), else the JSON lines file.
pub async fn from_config(config: &crate::config::Config) -> anyhow::Result<Arc<dyn EventSink>> {
    let events = &config.events;
    if events.kafka_brokers.is_empty() {
        return Ok(Arc::new(FileSink::new(config.events_file())));
    }
    let sink = KafkaSink::new(
        &events.kafka_brokers,
        &events.topic,
        events.max_message_bytes,
    )?;
    if let Err(e) = sink.ensure_topic(events.partitions).await {
        // The broker may be down at start: the relay retries publishing with backoff.
        tracing::warn!(error = %e, topic = %events.topic, "could not ensure the events topic");
    }
    Ok(Arc::new(sink))
}
