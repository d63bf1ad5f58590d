//! What a replica's view of a sale's waiting line is refreshed from: one store call per sale
//! and refresh interval ([`super::QueueStore::refresh`]) answers every waiting user's status
//! on that replica until the next (see `src/service/line`).

/// A sale's waiting line as the store has it now, with the departures the caller has not seen.
#[derive(Debug, Clone, PartialEq)]
pub struct LineDigest {
    pub figures: LineFigures,
    /// Where in the store's departure log `departures` start: 0 when the caller's epoch (or
    /// the one the lottery's draw made this one from, [`Self::renumbered`]: the log goes on
    /// across the draw) or count no longer held, so it starts again from these.
    pub from: u64,
    /// Serials that left the line out of turn (left, abandoned), in the order they left.
    pub departures: Vec<u64>,
    /// This numbering is the lottery's draw's: how the serials before it map to it.
    pub renumbered: Option<Renumbering>,
}

/// The lottery's draw made a line's numbering from the one before: every serial of
/// `from_epoch` in `first..=last` whose holder was waiting then has a serial of the new one
/// ([`super::QueueStore::renumbered`] says which), so that a queue ticket of before the draw
/// finds its holder's new place without asking the store about that holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renumbering {
    pub from_epoch: String,
    pub first: u64,
    pub last: u64,
}

/// A waiting line's figures at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct LineFigures {
    /// The store holds the sale (false after a flush or an embedded restart, until rebuilt).
    pub known: bool,
    /// The line's numbering: a serial names a place only within one epoch (the lottery and a
    /// rebuild after lost keys number the line anew).
    pub epoch: String,
    /// The lowest serial that may still be waiting: below it, everyone was admitted or left.
    pub head: u64,
    /// The last serial handed out.
    pub last: u64,
    /// How many wait.
    pub waiting: u64,
    /// Admissions per minute as measured (0 before the first) and as configured.
    pub measured_rate: f64,
    pub configured_rate: f64,
    /// When the sale was last rebuilt from the ledger (ms; 0 = never).
    pub rebuilt_at_ms: i64,
    /// The sale is closed: nobody still waiting will be admitted.
    pub sale_closed: bool,
    /// Nothing is free to hold and nothing held can come back.
    pub sold_out: bool,
}

impl LineFigures {
    /// The figures of a line the store does not hold (or nobody has seen yet).
    pub fn unknown() -> Self {
        LineFigures {
            known: false,
            epoch: String::new(),
            head: 1,
            last: 0,
            waiting: 0,
            measured_rate: 0.0,
            configured_rate: 0.0,
            rebuilt_at_ms: 0,
            sale_closed: false,
            sold_out: false,
        }
    }
}

/// The most departures one refresh carries: a view behind by more catches up over the next
/// refreshes (its answers come from the store meanwhile).
pub const MAX_DEPARTURES: usize = 50_000;
