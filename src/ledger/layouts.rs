//! Venue layouts (`crate::domain::venue`), reused by many sales.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::LedgerResult;
use crate::domain::venue::Layout;
use crate::domain::AdminAction;

/// A layout as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutSummary {
    pub id: Uuid,
    pub name: String,
    pub seats: u32,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait LayoutLedger: Send + Sync {
    /// Keeps a checked layout, with the operator's entry in the admin audit log.
    async fn create_layout(
        &self,
        id: Uuid,
        layout: &Layout,
        entry: &AdminAction,
    ) -> LedgerResult<()>;

    async fn layout(&self, id: Uuid) -> LedgerResult<Option<Layout>>;

    /// The layouts, newest first.
    async fn layouts(&self) -> LedgerResult<Vec<LayoutSummary>>;
}
