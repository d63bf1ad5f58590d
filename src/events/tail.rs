//! The reference consumer (`sluice events tail`): reads the events topic, drops re-deliveries
//! by event id, and prints one JSON envelope per line. Downstream teams copy this shape: commit
//! after handling, de-duplicate on `id`, keep per-key order.

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::ClientConfig;

/// Remembers the last `capacity` event ids, to drop re-deliveries.
pub struct SeenIds {
    set: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl SeenIds {
    pub fn new(capacity: usize) -> Self {
        SeenIds {
            set: HashSet::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    /// True the first time `id` is seen.
    pub fn first(&mut self, id: &str) -> bool {
        if !self.set.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

pub struct TailOptions {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    pub from_beginning: bool,
    /// Stop after this many (distinct) events.
    pub max: Option<u64>,
    /// Stop after this long without a message.
    pub idle: Option<Duration>,
}

pub async fn tail(options: TailOptions, out: &mut impl Write) -> anyhow::Result<u64> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &options.brokers)
        .set("group.id", &options.group)
        .set("enable.auto.commit", "false")
        .set(
            "auto.offset.reset",
            if options.from_beginning {
                "earliest"
            } else {
                "latest"
            },
        )
        .create()?;
    consumer.subscribe(&[&options.topic])?;
    let mut seen = SeenIds::new(1_000_000);
    let mut printed = 0u64;
    loop {
        let next = match options.idle {
            Some(idle) => match tokio::time::timeout(idle, consumer.recv()).await {
                Ok(message) => message,
                Err(_) => return Ok(printed),
            },
            None => consumer.recv().await,
        };
        let message = next?;
        let Some(payload) = message.payload() else {
            continue;
        };
        let event: serde_json::Value = serde_json::from_slice(payload)?;
        let id = event["id"].as_str().unwrap_or_default().to_owned();
        if seen.first(&id) {
            match writeln!(out, "{event}") {
                // The reader went away (`sluice events tail | head`): nothing to tail for.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(printed),
                written => written?,
            }
            printed += 1;
        }
        consumer.commit_message(&message, CommitMode::Async)?;
        if options.max.is_some_and(|max| printed >= max) {
            return Ok(printed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_deliveries_are_dropped_and_memory_is_bounded() {
        let mut seen = SeenIds::new(2);
        assert!(seen.first("a"));
        assert!(!seen.first("a"));
        assert!(seen.first("b"));
        assert!(seen.first("c"));
        assert!(seen.first("a"), "forgotten beyond the capacity");
        assert_eq!(seen.set.len(), 2);
    }
}
