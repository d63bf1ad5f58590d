//! The production event sink: Kafka, through an idempotent producer (acks=all), so retries
//! neither lose nor reorder events of one partition. Key = sale id (one sale's events stay in
//! one partition, in order); headers carry the event id, type and schema version, and the
//! `traceparent` of the change that wrote the event when a trace was recorded.
//!
//! An idempotent producer's fatal error is permanent: the producer is rebuilt.

use std::sync::RwLock;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;

use super::{EventSink, Refused};
use crate::domain::events::SCHEMA_VERSION;
use crate::ledger::OutboxEvent;

pub struct KafkaSink {
    brokers: String,
    max_message_bytes: u32,
    topic: String,
    producer: RwLock<FutureProducer>,
}

fn producer(brokers: &str, max_message_bytes: u32) -> anyhow::Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("message.max.bytes", max_message_bytes.to_string())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "5")
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "5")
        .create()?)
}

impl KafkaSink {
    pub fn new(brokers: &str, topic: &str, max_message_bytes: u32) -> anyhow::Result<Self> {
        Ok(KafkaSink {
            brokers: brokers.to_owned(),
            max_message_bytes,
            topic: topic.to_owned(),
            producer: RwLock::new(producer(brokers, max_message_bytes)?),
        })
    }

    /// Creates the topic if it does not exist (what an operator would do; idempotent).
    pub async fn ensure_topic(&self, partitions: i32) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()?;
        let topic = NewTopic::new(&self.topic, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        for result in admin.create_topics([&topic], &options).await? {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => anyhow::bail!("creating topic {name}: {code}"),
            }
        }
        Ok(())
    }

    fn current(&self) -> FutureProducer {
        self.producer.read().expect("not poisoned").clone()
    }

    /// The error to return for `event`: [`Refused`] if Kafka will never take it as it is.
    fn failure(&self, e: KafkaError, event: &OutboxEvent, published: usize) -> anyhow::Error {
        let permanent = matches!(
            e.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::MessageSizeTooLarge
                    | RDKafkaErrorCode::InvalidMessage
                    | RDKafkaErrorCode::InvalidMessageSize
                    | RDKafkaErrorCode::InvalidRecord
            )
        );
        if permanent {
            return Refused {
                id: event.id,
                published,
                reason: e.to_string(),
            }
            .into();
        }
        self.heal();
        e.into()
    }

    /// Replaces a producer that hit a fatal (permanent) error.
    fn heal(&self) {
        let fatal = self.current().client().fatal_error();
        if let Some((code, reason)) = fatal {
            tracing::error!(?code, %reason, "Kafka producer fatal error: rebuilding it");
            match producer(&self.brokers, self.max_message_bytes) {
                Ok(fresh) => *self.producer.write().expect("not poisoned") = fresh,
                Err(e) => tracing::error!(error = %e, "rebuilding the Kafka producer failed"),
            }
        }
    }
}

#[async_trait]
impl EventSink for KafkaSink {
    async fn publish(&self, batch: &[OutboxEvent]) -> anyhow::Result<()> {
        let producer = self.current();
        let started = std::time::Instant::now();
        let mut deliveries = Vec::with_capacity(batch.len());
        // An event refused while enqueuing ends the batch; those before it are still awaited.
        let mut refused_at_enqueue = None;
        let version = SCHEMA_VERSION.to_string();
        'batch: for event in batch {
            let key = event.sale_id.to_string();
            let payload = event.payload.as_bytes();
            let id = event.id.to_string();
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "event-id",
                    value: Some(&id),
                })
                .insert(Header {
                    key: "event-type",
                    value: Some(&event.event_type),
                })
                .insert(Header {
                    key: "schema-version",
                    value: Some(&version),
                });
            // The buyer's trace, continued by the consumer (W3C Trace Context).
            let headers = match &event.traceparent {
                Some(traceparent) => headers.insert(Header {
                    key: "traceparent",
                    value: Some(traceparent),
                }),
                None => headers,
            };
            let mut record = FutureRecord::to(&self.topic)
                .key(&key)
                .payload(payload)
                .headers(headers);
            // Enqueue in order; a full local queue drains while we wait.
            loop {
                match producer.send_result(record) {
                    Ok(delivery) => {
                        deliveries.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => {
                        refused_at_enqueue = Some((e, event));
                        break 'batch;
                    }
                }
            }
        }
        let enqueued = deliveries.len();
        for (published, (delivery, event)) in deliveries.into_iter().zip(batch).enumerate() {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(self.failure(e, event, published)),
                Err(_) => anyhow::bail!("the producer dropped a delivery"),
            }
        }
        if let Some((e, event)) = refused_at_enqueue {
            return Err(self.failure(e, event, enqueued));
        }
        metrics::histogram!("sluice_event_publish_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok(())
    }
}
