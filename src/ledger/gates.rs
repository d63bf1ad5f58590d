//! Gates (`crate::domain::gate`) and the sessions they ended before their time.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::LedgerResult;
use crate::domain::gate::Gate;
use crate::domain::{AdminAction, AttemptId};

#[async_trait]
pub trait GateLedger: Send + Sync {
    /// Keeps a new gate (or, with `replace`, the gate of that id changed), with the operator's
    /// entry in the admin audit log. A new gate whose sale fronts another is a conflict.
    async fn put_gate(&self, gate: &Gate, replace: bool, entry: &AdminAction) -> LedgerResult<()>;

    /// Removes a gate (its sale stays), with the operator's entry; whether it was there.
    async fn delete_gate(&self, id: Uuid, entry: &AdminAction) -> LedgerResult<bool>;

    /// Every gate, oldest first.
    async fn gates(&self) -> LedgerResult<Vec<Gate>>;

    /// Notes that a session ended before its time, until it would have ended anyway.
    async fn end_gate_session(
        &self,
        gate: Uuid,
        attempt: AttemptId,
        until: DateTime<Utc>,
    ) -> LedgerResult<()>;

    /// The sessions ended before their time that have not yet run out (older notes are
    /// deleted).
    async fn ended_gate_sessions(&self) -> LedgerResult<Vec<AttemptId>>;

    /// Moves an admitted attempt's deadline to `secs` from now: a gate's session renewed.
    /// False when the attempt is no longer admitted.
    async fn extend_admission(&self, attempt: AttemptId, secs: u32) -> LedgerResult<bool>;
}
