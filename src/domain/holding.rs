//! What a sale holds, in the words the queue store and the ledger share: what a hold takes,
//! an attempt from ADMITTED on, and the ledger's snapshot of a sale that the queue store is
//! (re)built from.

use super::{AttemptId, Sale, Stock, UserId};

/// How long a queue store keeps the record of a queue-sync change it applied: a replay of the
/// ledger's log reaches back at most this far (`workers.queue_sync_replay_secs` is bounded by
/// it, and the ledger prunes its log past it).
pub const SYNCED_KEEP_MS: u64 = 3_600_000;

/// What a hold takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    Quantity(u32),
    Seats(Vec<String>),
}

impl Take {
    pub fn units(&self) -> u32 {
        match self {
            Take::Quantity(n) => *n,
            Take::Seats(s) => s.len() as u32,
        }
    }
}

/// What the ledger says of a sale now: what the queue store is (re)built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleSnapshot {
    /// Units free to hold.
    pub free: Stock,
    /// Attempts admitted, holding or paying.
    pub live: Vec<LiveAttempt>,
    /// Units each user holds or bought (the per-user limit).
    pub bought: Vec<(UserId, u32)>,
    /// Each buyer's CONFIRMED attempt: joining again answers it (one attempt per user).
    pub buyers: Vec<Buyer>,
    /// The sale existed before this snapshot was taken: places in its queue were lost.
    pub reset: bool,
}

impl SaleSnapshot {
    /// A new sale: all its stock free, nobody in.
    pub fn fresh(sale: &Sale) -> Self {
        SaleSnapshot {
            free: sale.stock.clone(),
            live: Vec::new(),
            bought: Vec::new(),
            buyers: Vec::new(),
            reset: false,
        }
    }
}

/// A CONFIRMED attempt, as the queue store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buyer {
    pub user: UserId,
    pub attempt: AttemptId,
    /// What it bought: a refund gives these units back to the sale.
    pub bought: Option<Take>,
}

/// One attempt from ADMITTED on, as the queue store tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveAttempt {
    pub attempt: AttemptId,
    pub user: UserId,
    /// When its current step times out (ms).
    pub deadline_ms: i64,
    pub hold: Option<Take>,
}
