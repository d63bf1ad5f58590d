//! The embedded event sink: one JSON envelope per line, appended and synced before the relay
//! marks the rows published.

use std::path::PathBuf;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use super::EventSink;
use crate::ledger::OutboxEvent;

pub struct FileSink {
    path: PathBuf,
    /// Serialises appends (one relay per process, but be safe).
    lock: Mutex<()>,
}

impl FileSink {
    pub fn new(path: PathBuf) -> Self {
        FileSink {
            path,
            lock: Mutex::new(()),
        }
    }
}

#[async_trait]
impl EventSink for FileSink {
    async fn publish(&self, batch: &[OutboxEvent]) -> anyhow::Result<()> {
        let _guard = self.lock.lock().await;
        if let Some(dir) = self.path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        let mut lines = String::new();
        for event in batch {
            lines.push_str(&event.payload);
            lines.push('\n');
        }
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .await?;
        file.write_all(lines.as_bytes()).await?;
        file.sync_data().await?;
        Ok(())
    }
}
