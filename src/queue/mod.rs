//! The queue store: the hot path. Queue order, positions, the active set, stock counters and
//! seat holds of every sale live here; every multi-step change is one atomic operation.
//!
//! Data per sale (all in one Redis Cluster slot via the `{sale:<id>}` hash tag):
//! - `meta`: the sale's settings the scripts need (status, limits, rate, measured rate) and
//!   `settings_version`, the ledger's version of them (an older write is left out); `head`,
//!   the lowest join serial that may still be waiting; and `version`, which every change to
//!   the stock, holds or active set bumps (the drift checker's compare-and-set);
//! - the waiting queue, stored densely because a ticket opening queues millions
//!   (`lua/lib/queue.lua`): `seq` hands out join serials (FIFO; never a clock); `w:<n>` hashes
//!   map 32 serials each to their user, `u:<n>` hashes (65,536 of them, by SHA-1 of the user
//!   id) map a waiting user to their attempt and serial, and an admitted user to their
//!   attempt, so that a join finding no entry knows a new user at once (`meta.layout`; a line
//!   written before it has 100 serials a hash, 16,384 user hashes, and asks `users`). Redis
//!   keeps hashes that small as listpacks, ~95 bytes per queued user in all (a sorted-set
//!   entry plus two hash entries, the first layout, took ~380). `gone`: serials at or above `head` that left out of turn,
//!   so a position is `serial - head + 1 - gone ahead` with no scan;
//! - `users`: user → their admitted attempt, `owners`: admitted attempt → user (join is
//!   idempotent past admission; status and leave check ownership without the ledger); `left`:
//!   attempt → user for those who left the queue (left or abandoned), so their status says so;
//! - `active`: sorted set, admitted/holding/paying attempt → deadline (ms), capped by
//!   `max_active`; `holds`: attempt → what it holds; `stock` / `seats`: what is still free;
//! - `bought`: user → units held or confirmed (the per-user limit);
//! - `seatlog`: the last changes of a sale of named seats (`lua/lib/seatlog.lua`), what each
//!   replica's seat map reads; `best`: the sale's blocks of seats for best available, loaded
//!   from its layout on the first ask (`lua/hold_best.lua`);
//! - `synced`: sorted set, id of each queue-sync change applied → when (ms), kept an hour, so
//!   a retried or replayed change is applied once (`lua/apply_sync.lua`);
//! - `seen`: sorted set, waiting serial → last sign of life (ms), only when abandonment is on;
//!   `abandoned`: attempts that lost their place that way (their status says so);
//! - `lottery`, `lottery_slots`, `lottery_seen`, and `meta.drawing` with its range and seed: a
//!   lottery sale's draw while it is made, a step a call (`lua/lottery.lua`), gone once it is;
//! - `lease`, `fence`: who admits for the sale (one admitter across replicas);
//! - `controller`: the adaptive controller's state as JSON, expiring unless its admitter renews it.
//!
//! Attempts are stored by their local UUID (32 hex digits): the sale is in the key already.
//!
//! One implementation serves every deployment: [`RedisQueue`] calls the scripts of `lua/` on a
//! Redis, a Redis Cluster, or the embedded default's Redis in process ([`embedded`]), which
//! runs the same scripts in Lua 5.1 over a keyspace of its own.

pub mod budget;
mod change;
pub mod embedded;
mod holdings;
mod line;
pub mod redis;
mod redis_batches;
mod redis_connection;
mod redis_script;
mod redis_scripts;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::best_seats::{BestAsk, Blocks};
use crate::domain::venue::SeatState;
use crate::domain::{AttemptId, Sale, SaleId, SaleStatus, StockChange, UserId};
pub use crate::domain::{LiveAttempt, SaleSnapshot, Take};

pub use self::change::{PendingSync, SyncChange};
pub use self::holdings::{Drift, Holdings};
pub use self::line::{LineDigest, LineFigures, Renumbering, MAX_DEPARTURES};
pub use self::redis::RedisQueue;

/// Records `sluice_queue_call_duration_seconds{call}` when dropped: every store times its
/// calls under the same names (the round trip and the script, on Redis or in process), so the
/// dashboard and the alerts read the same on every store.
pub(crate) struct CallTimer {
    call: &'static str,
    started: std::time::Instant,
}

impl CallTimer {
    pub(crate) fn start(call: &'static str) -> Self {
        CallTimer {
            call,
            started: std::time::Instant::now(),
        }
    }

    /// How long the call has taken so far.
    pub(crate) fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        metrics::histogram!("sluice_queue_call_duration_seconds", "call" => self.call)
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// A queue store that keeps nothing and reaches nothing: for a command that needs the
/// service's shape and not its data (`sluice openapi`), so it leaves a live data directory's
/// journal to the server that holds it.
pub fn detached(config: &crate::config::Config) -> Arc<dyn QueueStore> {
    let store = embedded::Embedded::in_memory();
    Arc::new(RedisQueue::in_process(
        store,
        &config.queue.key_prefix,
        config.queue_timeout(),
    ))
}

/// The queue store named by the configuration: the in-process Redis ([`embedded`]) when
/// `queue.url` is empty, kept in the data directory (`queue.aof`).
pub fn from_config(config: &crate::config::Config) -> anyhow::Result<Arc<dyn QueueStore>> {
    let queue = &config.queue;
    let abandon_after_ms = config.workers.abandon_after_secs.millis();
    Ok(if queue.url.is_empty() {
        let store = embedded::Embedded::durable(&config.embedded.data_dir.join("queue.aof"))?;
        let store = RedisQueue::in_process(store, &queue.key_prefix, config.queue_timeout());
        Arc::new(store.with_abandonment(abandon_after_ms))
    } else {
        let urls: Vec<&str> = queue.url.split(',').map(str::trim).collect();
        let store = if queue.cluster {
            RedisQueue::cluster(&urls, &queue.key_prefix, config.queue_timeout())?
        } else {
            RedisQueue::new(&queue.url, &queue.key_prefix, config.queue_timeout())?
        };
        Arc::new(store.with_abandonment(abandon_after_ms))
    })
}

/// Why a queue-store call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    /// The store did not answer in time or the connection is down: answer 503 + Retry-After.
    #[error("queue store unavailable: {0}")]
    Unavailable(String),
    /// The store answered something the code does not understand (a bug or a foreign key).
    #[error("queue store protocol: {0}")]
    Protocol(String),
}

pub type QueueResult<T> = Result<T, QueueError>;

/// An instant sale's claim the ledger may not have ([`QueueStore::stale_claims`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleClaim {
    pub attempt: AttemptId,
    pub user: UserId,
    pub serial: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JoinOutcome {
    /// Waiting at `position` (1 = next) of `waiting`, with the sale's admission rates for the
    /// expected wait (as [`QueueView`] has them), so a join is one call to the store.
    Queued {
        attempt: AttemptId,
        position: u64,
        waiting: u64,
        measured_rate: f64,
        configured_rate: f64,
        /// Its join serial and the line's epoch (`LineDigest`'s `epoch`): what its queue
        /// ticket carries, so later status answers need no store call.
        serial: u64,
        epoch: String,
    },
    /// The user's live attempt is already admitted (or further).
    Active {
        attempt: AttemptId,
    },
    /// An instant sale took a unit for the attempt (now, or before without the ledger's word
    /// that it has it): record the claim, with its join `serial`, then call
    /// [`QueueStore::claims_recorded`].
    Claimed {
        attempt: AttemptId,
        serial: u64,
    },
    /// An instant sale with nothing left to claim.
    SoldOut,
    /// An instant sale's user who has as many units as the sale allows.
    LimitReached {
        already: u32,
    },
    UnknownSale,
    Closed,
}

/// How long an instant sale's claim stays in the active set awaiting its record in the
/// ledger before the sale's admitter records it itself ([`QueueStore::stale_claims`]): the
/// replica that made it is gone, or its ledger failed. Longer than a batch ever takes.
pub const CLAIM_RECORD_MS: i64 = 10_000;

/// What the queue store knows about one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueView {
    /// The user who joined with this attempt; `None` if the store does not know it (or it is
    /// another user's waiting attempt).
    pub owner: Option<UserId>,
    /// 1-based place in the queue while waiting.
    pub position: Option<u64>,
    /// How many are waiting in the sale.
    pub waiting: u64,
    /// Admitted, holding or paying.
    pub active: bool,
    /// Admissions per minute as measured by the admitter (0 before the first admissions).
    pub measured_rate: f64,
    /// Admissions per minute as configured.
    pub configured_rate: f64,
    /// The store holds this sale (false after a flush or an embedded restart, until rebuilt).
    pub known_sale: bool,
    /// When the sale was last rebuilt from the ledger (ms; 0 = never): attempts created before
    /// and no longer known lost their place in the queue.
    pub rebuilt_at_ms: i64,
    /// Lost its place for showing no sign of life (see [`QueueStore::abandon`]).
    pub abandoned: bool,
    /// The sale was closed (its status; `closes_at` only stops joins, the queue still drains):
    /// no one still waiting will be admitted.
    pub sale_closed: bool,
    /// Nothing is free to hold and nothing is held (so nothing can come back): whoever waits
    /// now will find it sold out.
    pub sold_out: bool,
    /// Its join serial while waiting, and the line's epoch: what its queue ticket carries.
    pub serial: Option<u64>,
    pub epoch: String,
}

impl QueueView {
    /// What a store answers for a sale it does not hold.
    pub fn unknown_sale() -> Self {
        QueueView {
            owner: None,
            position: None,
            waiting: 0,
            active: false,
            measured_rate: 0.0,
            configured_rate: 0.0,
            known_sale: false,
            rebuilt_at_ms: 0,
            abandoned: false,
            sale_closed: false,
            sold_out: false,
            serial: None,
            epoch: String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveOutcome {
    Left,
    NotQueued,
    NotFound,
}

/// One attempt moved from the queue to the active set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub attempt: AttemptId,
    /// Its join sequence number: order of admission equals order of joining.
    pub seq: u64,
    pub user: UserId,
    pub deadline_ms: i64,
}

/// A user's waiting attempt and its place ([`QueueStore::waiting_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitingPlace {
    pub attempt: AttemptId,
    /// 1-based place in the queue.
    pub position: u64,
    /// How many wait in the sale.
    pub waiting: u64,
}

/// What a call of [`QueueStore::draw_lottery`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LotteryDraw {
    /// This call made the draw: this many ordered.
    Drawn(u64),
    /// The draw was made before (or the sale closed).
    DrawnBefore,
    /// Under way, its time for this call spent: call again.
    UnderWay,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitOutcome {
    /// Newly admitted: record them in the ledger, then call `admissions_recorded`.
    Admitted(Vec<Admitted>),
    /// Nobody new: an earlier batch was admitted but never confirmed as recorded (its admitter
    /// died in between, or the ledger failed and the undo did too). Record it (recording is
    /// idempotent), then call `admissions_recorded`.
    Unrecorded(Vec<Admitted>),
    /// Another admitter holds the lease now: admit nothing.
    LeaseLost,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldOutcome {
    /// Taken now, or taken earlier by the same attempt (then `take` is what was taken then).
    Held {
        take: Take,
    },
    NotAdmitted,
    LimitReached {
        already: u32,
    },
    SoldOut {
        remaining: u32,
    },
    SeatTaken {
        seat: String,
    },
    WrongKind,
    /// Best available found no seats side by side as asked; `free` seats are free in all.
    NoAdjacent {
        free: u32,
    },
}

/// What changed among a sale's seats since a version ([`QueueStore::seat_changes`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SeatChanges {
    /// The store does not hold the sale.
    Unknown,
    /// The store's log cannot bring that version up to date (another epoch, or older than
    /// the log keeps): read the holdings whole.
    Whole { version: u64, epoch: String },
    /// The changes after that version, oldest first, up to `version`.
    Since {
        version: u64,
        epoch: String,
        changes: Vec<SeatChange>,
    },
}

/// Seats that changed state together (`lua/lib/seatlog.lua`).
#[derive(Debug, Clone, PartialEq)]
pub struct SeatChange {
    /// The holdings' version the change made.
    pub version: u64,
    pub state: SeatState,
    pub seats: Vec<String>,
}

impl SeatChange {
    /// Parses a log entry, `<version>|<letter>|<seat,seat>`.
    pub fn parse(entry: &str) -> Option<SeatChange> {
        let mut parts = entry.splitn(3, '|');
        let version = parts.next()?.parse().ok()?;
        let mut letter = parts.next()?.chars();
        let state = SeatState::from_letter(letter.next()?)?;
        let seats = parts.next()?;
        Some(SeatChange {
            version,
            state,
            seats: seats
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

/// A sale's counters as the queue store sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    pub waiting: u64,
    pub active: u64,
    /// Units or seats free to hold (the stock counters the holds go through first).
    pub remaining: u64,
    /// The store holds the sale; all of the above are zero when it does not (flushed, or an
    /// embedded restart, until rebuilt).
    pub known: bool,
    /// The sale's [`Holdings::version`].
    pub version: u64,
}

pub use crate::domain::holding::SYNCED_KEEP_MS;

/// The lease that makes one process the admitter of a sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The stored lease value, `<fence>:<holder>`; admit_batch checks it (fencing).
    pub value: String,
    pub fence: u64,
}

impl Lease {
    /// Parses a stored lease value, `<fence>:<holder>`.
    pub fn parse(value: &str) -> Option<Lease> {
        let (fence, _) = value.split_once(':')?;
        Some(Lease {
            fence: fence.parse().ok()?,
            value: value.to_owned(),
        })
    }

    /// The instance id of the process holding it.
    pub fn holder(&self) -> &str {
        self.value.split_once(':').map_or("", |(_, holder)| holder)
    }
}

#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    /// Makes the store ready for its calls: Redis gets the scripts its cache lacks (after a
    /// restart or a failover emptied it); how many were loaded.
    async fn prepare(&self) -> QueueResult<usize> {
        Ok(0)
    }
    /// Writes the sale's settings as of `settings_version` (as [`QueueStore::put_settings`],
    /// forced with `force`), and rebuilds its stock, active set and holds from `snapshot` if
    /// the store has none for it yet (a new sale, or keys lost) or if `force`. Returns
    /// whether it rebuilt.
    async fn init_sale(
        &self,
        sale: &Sale,
        settings_version: u64,
        snapshot: &SaleSnapshot,
        force: bool,
    ) -> QueueResult<bool>;
    /// Writes the sale's settings (status, admission, close, TTLs) whole, as the ledger has
    /// them at its `version` of them (the sale's `settings_version` there), unless the store
    /// has a later version and the write is not `forced` (of two changes whose writes cross,
    /// the later stands) or the store does not hold the sale (it is rebuilt whole from the
    /// ledger). Returns the version the store holds after; `None` when it does not hold the
    /// sale.
    async fn put_settings(
        &self,
        sale: &Sale,
        version: u64,
        forced: bool,
    ) -> QueueResult<Option<u64>>;
    /// The version of the sale's settings the store holds; `None` when it does not hold the
    /// sale.
    async fn settings_version(&self, sale: SaleId) -> QueueResult<Option<u64>>;

    /// Joins the sale's line, or claims in an instant sale (see `lua/join.lua`).
    async fn join(&self, sale: SaleId, user: &UserId, now_ms: i64) -> QueueResult<JoinOutcome> {
        self.join_or_claim(sale, user, now_ms, false).await
    }
    /// [`QueueStore::join`]; `front`: this replica's ledger is behind its claims, so an
    /// instant sale's line fronts the join.
    async fn join_or_claim(
        &self,
        sale: SaleId,
        user: &UserId,
        now_ms: i64,
        front: bool,
    ) -> QueueResult<JoinOutcome>;
    /// The ledger has these claims of the sale: they leave the active set and are no longer
    /// answered `claimed`.
    async fn claims_recorded(&self, sale: SaleId, attempts: &[AttemptId]) -> QueueResult<()>;
    /// Claims of the sale still awaiting their record past their time
    /// ([`CLAIM_RECORD_MS`]): the admitter records them.
    async fn stale_claims(&self, sale: SaleId) -> QueueResult<Vec<StaleClaim>>;
    /// What the store knows of `attempt`, for `user`'s status: another user's waiting attempt
    /// is not shown (no owner, no position).
    async fn view(&self, attempt: AttemptId, user: &UserId) -> QueueResult<QueueView>;
    async fn leave(&self, attempt: AttemptId, user: &UserId) -> QueueResult<LeaveOutcome>;
    /// `user`'s waiting attempt in the sale and its place, for support (not a sign of life);
    /// `None` when they do not wait.
    async fn waiting_of(&self, sale: SaleId, user: &UserId) -> QueueResult<Option<WaitingPlace>>;
    /// The sale's waiting line for a replica's view of it, with the departures after the
    /// first `departed` of `epoch` (at most [`MAX_DEPARTURES`]); records a sign of life of
    /// each waiting serial in `seen` (when abandonment is on) in the same call, if `epoch` is
    /// still the line's and no lottery draw is being made (the serials name nobody for sure
    /// otherwise).
    async fn refresh(
        &self,
        sale: SaleId,
        epoch: &str,
        departed: u64,
        seen: &[u64],
    ) -> QueueResult<LineDigest>;
    /// Records a sign of life of each waiting serial in `serials`, as [`QueueStore::refresh`]
    /// does with its own: for a replica's view with more than one call should carry.
    async fn seen(&self, sale: SaleId, epoch: &str, serials: &[u64]) -> QueueResult<()>;
    /// What the lottery's draw `drawn` (a [`LineDigest::renumbered`] of the sale) made of the
    /// `count` serials from `from` of the numbering before it: each one's serial now, in order,
    /// 0 for a serial whose holder was not waiting at the draw. Fewer when the rest are 0 or
    /// past `drawn.last`; none when the store no longer keeps the draw.
    async fn renumbered(
        &self,
        sale: SaleId,
        drawn: &Renumbering,
        from: u64,
        count: u64,
    ) -> QueueResult<Vec<u64>>;

    /// Takes or renews the sale's admission lease for `holder`.
    async fn lease(&self, sale: SaleId, holder: &str, ttl_ms: u64) -> QueueResult<Option<Lease>>;
    /// Gives the sale's lease up if `holder` holds it (true then), so another replica admits
    /// at its next tick: a draining process does so for each sale it admitted for.
    async fn release_lease(&self, sale: SaleId, holder: &str) -> QueueResult<bool>;
    /// The sale's admission lease as it stands (whoever holds it), if anyone does.
    async fn lease_holder(&self, sale: SaleId) -> QueueResult<Option<Lease>>;
    /// Admits up to `wanted` from the head of the queue, within max_active.
    async fn admit_batch(
        &self,
        sale: SaleId,
        lease: &Lease,
        wanted: u32,
        admission_ttl_ms: u64,
        measured_rate: f64,
    ) -> QueueResult<AdmitOutcome> {
        self.admit_batch_below(sale, lease, wanted, admission_ttl_ms, measured_rate, None)
            .await
    }
    /// [`QueueStore::admit_batch`], admitting only serials below `below` when given: a later
    /// lottery phase's pre-queue waits there until the phase starts.
    async fn admit_batch_below(
        &self,
        sale: SaleId,
        lease: &Lease,
        wanted: u32,
        admission_ttl_ms: u64,
        measured_rate: f64,
        below: Option<u64>,
    ) -> QueueResult<AdmitOutcome>;
    /// The ledger has the batch that starts with `first`: it is no longer handed back by
    /// `admit_batch` as unrecorded.
    async fn admissions_recorded(&self, sale: SaleId, first: AttemptId) -> QueueResult<()>;
    /// Puts admitted attempts back where they were (the ledger could not record them).
    async fn unadmit(&self, sale: SaleId, admitted: &[Admitted]) -> QueueResult<()>;

    async fn hold(
        &self,
        attempt: AttemptId,
        user: &UserId,
        take: &Take,
    ) -> QueueResult<HoldOutcome>;
    /// Holds the best seats side by side `ask` can have among `blocks` (the sale's, of the
    /// category asked: [`crate::domain::best_seats`]), picked and taken in one step.
    async fn hold_best(
        &self,
        attempt: AttemptId,
        user: &UserId,
        ask: &BestAsk,
        blocks: &Blocks,
    ) -> QueueResult<HoldOutcome>;
    /// What changed among the sale's seats after `since` of `epoch` (a replica's seat map).
    async fn seat_changes(&self, sale: SaleId, since: u64, epoch: &str)
        -> QueueResult<SeatChanges>;
    /// Gives the attempt's held stock back (at most once) and frees its slot; with
    /// `keep_slot_until_ms`, the attempt keeps its slot (admitted) until then instead.
    async fn restore(
        &self,
        attempt: AttemptId,
        keep_slot_until_ms: Option<i64>,
    ) -> QueueResult<bool>;
    /// An operator's change to the sale's stock, once the ledger committed it; false when the
    /// store holds no stock for the sale (its rebuild reads the ledger).
    async fn adjust_stock(&self, sale: SaleId, change: &StockChange) -> QueueResult<bool>;
    /// Applies a change of the ledger's queue-sync log unless the store has a record of
    /// applying it (true when applied now), and records it with the change, in one step: a
    /// retry or a replay applies each change once.
    async fn apply_sync(&self, sync: &PendingSync) -> QueueResult<bool>;
    /// Which of the sale's queue-sync changes `ids` the store has no record of applying: the
    /// ones a failover or a restart lost, when the ledger saw them applied.
    async fn unsynced(&self, sale: SaleId, ids: &[i64]) -> QueueResult<Vec<i64>>;

    /// Lets go of everyone still waiting in a closed sale and returns how many there were
    /// (0, changing nothing, when the sale is not closed). Their answer is EXPIRED
    /// (`sale_closed`) from the close on and needs none of their entries, which are most of
    /// what the store keeps of a sale (90 bytes a waiting user in Redis) and were otherwise
    /// kept for good. Admitted, holding and paying attempts, the stock and the lease stay.
    async fn forget_waiting(&self, sale: SaleId) -> QueueResult<u64>;

    async fn stats(&self, sale: SaleId) -> QueueResult<QueueStats>;
    /// The sale's holdings (free stock, active set, holds, units per user), `None` when the
    /// store does not hold the sale: what the drift checker compares with the ledger. Redis
    /// reads them a page a call; the version is then the first page's (`Holdings::version`).
    async fn holdings(&self, sale: SaleId) -> QueueResult<Option<Holdings>>;
    /// Rebuilds the sale's holdings from `snapshot` as `init_sale` with `force` does, keeping
    /// its queue and its unrecorded batch, only if its version still reads `version` (true
    /// then): the drift checker's repair, which any change since its read makes a no-op.
    async fn rebuild_if_unchanged(
        &self,
        sale: &Sale,
        snapshot: &SaleSnapshot,
        version: u64,
    ) -> QueueResult<bool>;
    async fn ping(&self) -> QueueResult<()>;

    /// Takes out of the queue up to `limit` waiting attempts that showed no sign of life (join,
    /// status poll or stream) for the store's abandonment time; returns how many. Nothing when
    /// abandonment is off.
    async fn abandon(&self, sale: SaleId, limit: u32) -> QueueResult<u64>;

    /// A lottery sale's draw, once: everyone waiting ordered by SHA-1 (hex) of
    /// `<seed>:<user id>`, in the places they hold between them; later joins come after them.
    /// On Redis the draw is many short calls, made for at most `budget` a call (then
    /// [`LotteryDraw::UnderWay`]): meanwhile nobody is admitted or abandoned; a drawn user who
    /// leaves is out at once, and the place the draw gives them is gone out of turn.
    async fn draw_lottery(
        &self,
        sale: SaleId,
        seed: &str,
        budget: Duration,
    ) -> QueueResult<LotteryDraw> {
        self.draw_lottery_from(sale, seed, 0, budget).await
    }
    /// [`QueueStore::draw_lottery`] of the waiting from serial `from` on (a lottery phase's
    /// pre-queue), the places before it left as they are. Each draw is made once: a draw from
    /// a serial at or before the last one drawn from is [`LotteryDraw::DrawnBefore`].
    async fn draw_lottery_from(
        &self,
        sale: SaleId,
        seed: &str,
        from: u64,
        budget: Duration,
    ) -> QueueResult<LotteryDraw>;

    /// Publishes the sale's admission controller state (JSON) for `ttl_ms`, so whichever
    /// replica an admin asks can show it; it vanishes when its admitter stops publishing.
    async fn put_controller(&self, sale: SaleId, state: &str, ttl_ms: u64) -> QueueResult<()>;
    async fn controller(&self, sale: SaleId) -> QueueResult<Option<String>>;
}
