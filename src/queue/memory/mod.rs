//! The in-process queue store of the embedded default: the same semantics as the Lua scripts,
//! one mutex per sale (no global lock on the hot path). Its waiting lines are kept on disk in
//! the data directory (`journal.rs`), so a restart finds everyone waiting in their place; the
//! rest (stock, holds, the active set) is rebuilt from the ledger, as after a Redis flush.
//!
//! A ticket opening queues millions in one sale, so nothing a join, a status or a reaper tick
//! does walks the queue: the waiting line is an order-statistic B-tree (a place is a rank,
//! found in logarithmic time, as `lua/lib/queue.lua` finds it without a scan) and presence is
//! kept oldest first (`presence.rs`).

mod journal;
mod presence;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use indexset::BTreeMap;
use uuid::Uuid;

use self::journal::{Journal, Record, SavedLine};
use self::presence::Presence;
use super::*;
use crate::domain::best_seats::{self, BestAsk, Blocks};
use crate::domain::{Stock, StockChange, StockKind};

/// How many seat changes a sale's log keeps, as `SEATLOG_KEEP` in `lua/lib/seatlog.lua`.
const SEATLOG_KEEP: usize = 4096;
/// See `admit_batch.lua`: how long past its deadline a forgotten active entry may linger.
const FORGOTTEN_ACTIVE_GRACE_MS: i64 = 60_000;

#[derive(Default)]
pub struct MemoryQueue {
    /// One state per sale, each behind its own lock.
    sales: RwLock<HashMap<SaleId, Arc<Mutex<SaleQueue>>>>,
    /// Waiting attempts idle this long lose their place (0: never; presence is not tracked).
    abandon_after_ms: u64,
    /// Where the waiting lines are kept on disk; none for a store that keeps nothing (tests).
    journal: Option<Arc<Journal>>,
    /// The lines the journal held at start, each until its sale is built again from the
    /// ledger (`init_sale`), which puts it back.
    saved: Mutex<HashMap<SaleId, SavedLine>>,
}

/// One sale, as the Redis keys of `queue/mod.rs` hold it.
struct SaleQueue {
    id: SaleId,
    /// Where changes to the waiting line are written (see `journal.rs`).
    journal: Option<Arc<Journal>>,
    /// The ledger's version of the settings below (`sales.settings_version`): a write of an
    /// older one is left out, as `lua/lib/settings.lua` does.
    settings_version: u64,
    status: SaleStatus,
    opens_at_ms: i64,
    closes_at_ms: i64,
    /// A join claims (`lua/join.lua`'s instant sale).
    instant: bool,
    max_active: u32,
    per_user_limit: u32,
    rate_per_minute: u32,
    kind: StockKind,
    hold_ttl_ms: i64,
    payment_ttl_ms: i64,
    measured_rate: f64,
    /// The join sequence counter.
    seq: u64,
    /// Waiting attempts by join sequence (FIFO), and the reverse map. An order-statistic
    /// tree: an attempt's place is the rank of its sequence number.
    queue: BTreeMap<u64, Uuid>,
    queued: HashMap<Uuid, u64>,
    users: HashMap<UserId, Uuid>,
    owners: HashMap<Uuid, UserId>,
    /// Admitted, holding or paying attempts → deadline (ms).
    active: HashMap<Uuid, i64>,
    holds: HashMap<Uuid, (Take, UserId)>,
    /// CONFIRMED attempts' hold records, kept so a refund can give their units back.
    sold: HashMap<Uuid, (Take, UserId)>,
    /// Free units; below zero for a moment when a withdrawal counts units holds in flight
    /// took (the ledger refuses those holds and they come back).
    stock: i64,
    seats: HashSet<String>,
    bought: HashMap<UserId, u32>,
    /// The admission lease: value `<fence>:<holder>` and its expiry (ms).
    lease: Option<(String, i64)>,
    fence: u64,
    /// The last admission batch until its admitter says the ledger has it (see admit_batch.lua).
    unrecorded: Vec<Admitted>,
    /// An instant sale's claims made by joins, by attempt, with their serial, until the
    /// ledger has them (as `claims`).
    claims: HashMap<Uuid, u64>,
    /// When the sale was rebuilt from the ledger (ms; 0 = never).
    rebuilt_at_ms: i64,
    /// The admission controller's published state and its expiry (ms).
    controller: Option<(String, i64)>,
    /// Waiting attempts' last signs of life, when abandonment is on; and those that lost
    /// their place for want of one.
    seen: Presence,
    abandoned: HashSet<Uuid>,
    /// The serial the last lottery draw ordered the line from (0: the sale's opening; a later
    /// lottery phase's pre-queue), once a draw was made.
    lottery_drawn: Option<u64>,
    /// The line's numbering (as `meta.epoch`): new with the sale and at the lottery's draw.
    epoch: String,
    /// What the lottery's draw made of the serials before it (as `<base>:renumbered`): the
    /// draw, the numbering it made, and each drawn serial's new one by its distance from the
    /// first (0 for a serial nobody waiting held).
    renumbered: Option<(Renumbering, String, Vec<u64>)>,
    /// Serials that left the line out of turn, in the order they left (as `departed`).
    departed: Vec<u64>,
    /// Counts changes to the stock, holds and active set ([`Holdings::version`]).
    version: u64,
    /// The last changes to the seats, and the version below which they may be missing (as
    /// `lua/lib/seatlog.lua` keeps them).
    seatlog: VecDeque<SeatChange>,
    seatlog_from: u64,
    /// The version at which free seats last changed but by best available, and its cursors
    /// by category and count: the version each was set at and the first block not known to
    /// lack room (as `lua/hold_best.lua` keeps them).
    seats_moved_at: u64,
    best_from: HashMap<(Option<String>, u32), (u64, usize)>,
    /// Queue-sync changes applied, and when (ms), for as long as [`SYNCED_KEEP_MS`]: a
    /// change is applied once.
    synced: HashSet<i64>,
    synced_at: BTreeSet<(i64, i64)>,
}

/// A lottery rank, as `lottery.lua` computes it: SHA-1 (hex) of `<seed>:<user id>`.
fn lottery_key(seed: &str, user: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{seed}:{user}").as_bytes(),
    );
    hex::encode(digest.as_ref())
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A new epoch of a line's numbering: the clock in µs, as `lua/lib/queue.lua` makes one.
fn new_epoch() -> String {
    chrono::Utc::now().timestamp_micros().to_string()
}

impl MemoryQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose waiting lines are kept in the journal at `path`, and found there again
    /// after a restart.
    pub fn durable(path: &std::path::Path) -> anyhow::Result<Self> {
        let (journal, saved) = Journal::open(path)?;
        Ok(MemoryQueue {
            journal: Some(Arc::new(journal)),
            saved: Mutex::new(saved),
            ..Self::default()
        })
    }

    /// Waiting attempts idle for `ms` lose their place (0: off).
    pub fn with_abandonment(mut self, ms: u64) -> Self {
        self.abandon_after_ms = ms;
        self
    }

    fn sale(&self, id: SaleId) -> Option<Arc<Mutex<SaleQueue>>> {
        self.sales.read().expect("not poisoned").get(&id).cloned()
    }

    /// Runs `f` on the sale under its lock; `None` when the store has no such sale.
    fn with<T>(&self, id: SaleId, f: impl FnOnce(&mut SaleQueue) -> T) -> Option<T> {
        let sale = self.sale(id)?;
        let mut guard = sale.lock().expect("not poisoned");
        Some(f(&mut guard))
    }
}

impl SaleQueue {
    /// Takes the sale's settings as of the ledger's `version` of them, unless it has a later
    /// version and the write is not `forced`; the version it holds after.
    fn write_settings(&mut self, sale: &Sale, version: u64, forced: bool) -> u64 {
        if !forced && version < self.settings_version {
            return self.settings_version;
        }
        self.settings_version = version;
        self.status = sale.status;
        self.opens_at_ms = sale.opens_at.timestamp_millis();
        self.closes_at_ms = sale.closes_at.map(|t| t.timestamp_millis()).unwrap_or(0);
        self.instant = sale.instant;
        self.max_active = sale.admission.max_active;
        self.per_user_limit = sale.per_user_limit;
        self.rate_per_minute = sale.admission.rate_per_minute;
        self.kind = sale.stock.kind();
        self.hold_ttl_ms = sale.ttls.hold_secs as i64 * 1000;
        self.payment_ttl_ms = sale.ttls.payment_secs as i64 * 1000;
        version
    }

    /// Signs of life of the waiting serials `seen` of the numbering `epoch` (as
    /// `write_signs_of_life` in lua/lib/queue.lua): written only while it holds (after the
    /// lottery's draw they name other users).
    fn signs_of_life(&mut self, epoch: &str, seen: &[u64]) {
        if self.epoch != epoch {
            return;
        }
        let now = now_ms();
        for serial in seen {
            if let Some(attempt) = self.queue.get(serial).copied() {
                self.seen.refresh(attempt, now);
            }
        }
    }

    /// What a view says of the sale and of the attempt's state outside the queue.
    fn view_of_sale(&self, attempt: Uuid) -> QueueView {
        QueueView {
            owner: None,
            position: None,
            waiting: self.queue.len() as u64,
            active: self.active.contains_key(&attempt),
            measured_rate: self.measured_rate,
            configured_rate: self.rate_per_minute as f64,
            known_sale: true,
            rebuilt_at_ms: self.rebuilt_at_ms,
            abandoned: self.abandoned.contains(&attempt),
            sale_closed: self.status == SaleStatus::Closed,
            sold_out: self.sold_out(),
            serial: None,
            epoch: self.epoch.clone(),
        }
    }

    /// Nothing is free to hold and nothing is held.
    fn sold_out(&self) -> bool {
        self.remaining() == 0 && self.holds.is_empty()
    }

    /// The lowest serial that may still be waiting (as `meta.head`): everyone below it was
    /// admitted or left.
    fn head(&self) -> u64 {
        self.queue
            .first_key_value()
            .map_or(self.seq + 1, |(seq, _)| *seq)
    }

    /// Takes a waiting attempt out of the line out of turn (left, abandoned); its serial.
    fn depart(&mut self, attempt: Uuid) -> Option<u64> {
        let seq = self.queued.remove(&attempt)?;
        self.queue.remove(&seq);
        self.seen.forget(attempt);
        self.departed.push(seq);
        self.journal_gone(attempt);
        Some(seq)
    }

    /// Writes that `attempt` left the line (with the next batch).
    fn journal_gone(&self, attempt: Uuid) {
        if let Some(journal) = &self.journal {
            journal.append(Record::Gone {
                sale: self.id.0,
                attempt,
            });
        }
    }

    /// The waiting line as the journal keeps it.
    fn saved_line(&self) -> SavedLine {
        SavedLine {
            epoch: self.epoch.clone(),
            seq: self.seq,
            drawn: self.lottery_drawn.is_some(),
            drawn_from: self.lottery_drawn,
            waiting: self
                .queue
                .iter()
                .filter_map(|(serial, attempt)| {
                    Some((*serial, (*attempt, self.owners.get(attempt)?.clone())))
                })
                .collect(),
        }
    }

    /// Writes the whole waiting line (with the next batch).
    fn journal_line(&self) {
        if let Some(journal) = &self.journal {
            journal.append(self.saved_line().record(self.id));
        }
    }

    /// Puts back the line the journal kept: its numbering and who waits where. An attempt
    /// the ledger has admitted since (its departure was not written) stays out.
    fn put_back(&mut self, line: SavedLine, now_ms: i64, track: bool) {
        self.epoch = line.epoch;
        self.seq = line.seq;
        // A journal of before the phases' draws: its one draw was the whole line's.
        self.lottery_drawn = line.drawn_from.or(line.drawn.then_some(0));
        for (serial, (attempt, user)) in line.waiting {
            if self.active.contains_key(&attempt) || self.sold.contains_key(&attempt) {
                self.journal_gone(attempt);
                continue;
            }
            self.queue.insert(serial, attempt);
            self.queued.insert(attempt, serial);
            self.users.insert(user.clone(), attempt);
            self.owners.insert(attempt, user);
            if track {
                self.seen.touch(attempt, now_ms);
            }
        }
    }

    fn new(sale: &Sale, journal: Option<Arc<Journal>>) -> Self {
        SaleQueue {
            id: sale.id,
            journal,
            settings_version: 0,
            status: sale.status,
            opens_at_ms: 0,
            closes_at_ms: 0,
            instant: false,
            max_active: 0,
            per_user_limit: 0,
            rate_per_minute: 0,
            kind: sale.stock.kind(),
            hold_ttl_ms: 0,
            payment_ttl_ms: 0,
            measured_rate: 0.0,
            seq: 0,
            queue: BTreeMap::new(),
            queued: HashMap::new(),
            users: HashMap::new(),
            owners: HashMap::new(),
            active: HashMap::new(),
            holds: HashMap::new(),
            sold: HashMap::new(),
            stock: 0,
            seats: HashSet::new(),
            bought: HashMap::new(),
            lease: None,
            fence: 0,
            unrecorded: Vec::new(),
            claims: HashMap::new(),
            rebuilt_at_ms: 0,
            controller: None,
            seen: Presence::default(),
            abandoned: HashSet::new(),
            lottery_drawn: None,
            epoch: new_epoch(),
            renumbered: None,
            departed: Vec::new(),
            version: 0,
            seatlog: VecDeque::new(),
            seatlog_from: 0,
            seats_moved_at: 0,
            best_from: HashMap::new(),
            synced: HashSet::new(),
            synced_at: BTreeSet::new(),
        }
    }

    /// Rebuilds the stock, active set, holds and per-user counts from `snapshot`; the
    /// unrecorded batch goes too unless `keep_unrecorded` (a repair's snapshot carries it).
    fn rebuild(&mut self, snapshot: &SaleSnapshot, keep_unrecorded: bool) {
        match &snapshot.free {
            Stock::Quantity(n) => {
                self.stock = i64::from(*n);
                self.seats.clear();
            }
            Stock::Seats(seats) => {
                self.stock = 0;
                self.seats = seats.iter().cloned().collect();
            }
        }
        self.active.clear();
        self.holds.clear();
        if !keep_unrecorded {
            self.unrecorded.clear();
        }
        for live in &snapshot.live {
            self.active.insert(live.attempt.local, live.deadline_ms);
            self.owners.insert(live.attempt.local, live.user.clone());
            self.users.insert(live.user.clone(), live.attempt.local);
            if let Some(take) = &live.hold {
                self.holds
                    .insert(live.attempt.local, (take.clone(), live.user.clone()));
            }
        }
        self.bought = snapshot.bought.iter().cloned().collect();
        self.sold.clear();
        for buyer in &snapshot.buyers {
            let attempt = buyer.attempt.local;
            self.owners.insert(attempt, buyer.user.clone());
            self.users.insert(buyer.user.clone(), attempt);
            if let Some(take) = &buyer.bought {
                self.sold
                    .insert(attempt, (take.clone(), buyer.user.clone()));
            }
        }
        if snapshot.reset {
            self.rebuilt_at_ms = now_ms();
        }
        self.version += 1;
        self.seatlog.clear();
        self.seatlog_from = self.version;
        self.seats_moved_at = self.version;
    }

    /// See `log_seats` in `lua/lib/seatlog.lua`.
    fn log_seats(&mut self, state: SeatState, seats: &[String]) {
        if state != SeatState::Sold {
            self.seats_moved_at = self.version;
        }
        self.seatlog.push_back(SeatChange {
            version: self.version,
            state,
            seats: seats.to_vec(),
        });
        if self.seatlog.len() > SEATLOG_KEEP {
            if let Some(dropped) = self.seatlog.pop_front() {
                self.seatlog_from = dropped.version;
            }
        }
    }

    /// See `hold_refusal` in `lua/lib/holding.lua`.
    fn hold_refusal(
        &self,
        attempt: Uuid,
        user: &UserId,
        kind: StockKind,
        units: u32,
    ) -> Option<HoldOutcome> {
        if let Some((held, _)) = self.holds.get(&attempt) {
            return Some(HoldOutcome::Held { take: held.clone() });
        }
        if !self.active.contains_key(&attempt) {
            return Some(HoldOutcome::NotAdmitted);
        }
        if self.kind != kind {
            return Some(HoldOutcome::WrongKind);
        }
        let already = self.bought.get(user).copied().unwrap_or(0);
        if already + units > self.per_user_limit {
            return Some(HoldOutcome::LimitReached { already });
        }
        None
    }

    /// See `record_hold` in `lua/lib/holding.lua`: the caller took the stock.
    fn record_hold(&mut self, attempt: Uuid, user: &UserId, take: &Take, now: i64) -> HoldOutcome {
        self.holds.insert(attempt, (take.clone(), user.clone()));
        *self.bought.entry(user.clone()).or_default() += take.units();
        self.active.insert(attempt, now + self.hold_ttl_ms);
        self.version += 1;
        if let Take::Seats(seats) = take {
            self.log_seats(SeatState::Held, seats);
        }
        HoldOutcome::Held { take: take.clone() }
    }

    /// See `restore_attempt` in `lua/lib/changes.lua` (a moved deadline is no change to the
    /// holdings' version, as there).
    fn restore(&mut self, attempt: Uuid, keep_slot_until_ms: Option<i64>) -> bool {
        let moved = match keep_slot_until_ms {
            None => self.active.remove(&attempt).is_some(),
            Some(until) => {
                if let Some(deadline) = self.active.get_mut(&attempt) {
                    *deadline = until;
                }
                false
            }
        };
        let record = match keep_slot_until_ms {
            None => self
                .holds
                .remove(&attempt)
                .or_else(|| self.sold.remove(&attempt)),
            Some(_) => self.holds.remove(&attempt),
        };
        let Some((take, user)) = record else {
            if moved {
                self.version += 1;
            }
            return false;
        };
        match &take {
            Take::Quantity(n) => self.stock += i64::from(*n),
            Take::Seats(seats) => self.seats.extend(seats.iter().cloned()),
        }
        if let Some(b) = self.bought.get_mut(&user) {
            *b = b.saturating_sub(take.units());
        }
        self.version += 1;
        if let Take::Seats(seats) = &take {
            self.log_seats(SeatState::Free, seats);
        }
        true
    }

    /// See `lua/adjust_stock.lua`.
    fn adjust_stock(&mut self, change: &StockChange) -> bool {
        match change {
            StockChange::Add(n) => self.stock += i64::from(*n),
            StockChange::Withdraw(n) => self.stock -= i64::from(*n),
            StockChange::AddSeats(seats) => self.seats.extend(seats.iter().cloned()),
            StockChange::WithdrawSeats(seats) => {
                for seat in seats {
                    self.seats.remove(seat);
                }
            }
        }
        self.version += 1;
        match change {
            StockChange::AddSeats(seats) => self.log_seats(SeatState::Free, seats),
            StockChange::WithdrawSeats(seats) => self.log_seats(SeatState::Off, seats),
            StockChange::Add(_) | StockChange::Withdraw(_) => {}
        }
        true
    }

    /// See `finish_attempt` in `lua/lib/changes.lua`.
    fn finish(&mut self, attempt: Uuid) {
        let held = self.holds.remove(&attempt);
        let changed = held.is_some();
        if self.active.remove(&attempt).is_some() || changed {
            self.version += 1;
        }
        if let Some(record) = held {
            if let Take::Seats(seats) = &record.0 {
                self.log_seats(SeatState::Sold, seats);
            }
            self.sold.insert(attempt, record);
        }
    }

    /// See `extend_attempt` in `lua/lib/changes.lua`.
    fn extend(&mut self, attempt: Uuid, now: i64) {
        let deadline = now + self.payment_ttl_ms;
        if let Some(d) = self.active.get_mut(&attempt) {
            *d = deadline;
        }
    }

    /// See `apply_sync.lua`.
    fn apply_sync(&mut self, sync: &PendingSync, now: i64) -> bool {
        if self.synced.contains(&sync.id) {
            return false;
        }
        let attempt = sync.attempt.local;
        match sync.change {
            SyncChange::Restore => {
                self.restore(attempt, None);
            }
            SyncChange::Finish => self.finish(attempt),
            SyncChange::Extend => self.extend(attempt, now),
        }
        self.synced.insert(sync.id);
        self.synced_at.insert((now, sync.id));
        let keep_from = now - SYNCED_KEEP_MS as i64;
        while let Some(&(at, id)) = self.synced_at.first() {
            if at >= keep_from {
                break;
            }
            self.synced_at.pop_first();
            self.synced.remove(&id);
        }
        true
    }

    /// A join's answer for a waiting attempt.
    /// An instant sale's claim for a user with nobody waiting (as `lua/join.lua`).
    fn claim(&mut self, attempt: AttemptId, user: &UserId, now_ms: i64) -> JoinOutcome {
        let bought = self.bought.get(user).copied().unwrap_or(0);
        if bought + 1 > self.per_user_limit {
            return JoinOutcome::LimitReached { already: bought };
        }
        if self.stock < 1 {
            return JoinOutcome::SoldOut;
        }
        self.seq += 1;
        self.take_claim(attempt.local, user);
        self.active.insert(attempt.local, now_ms + CLAIM_RECORD_MS);
        self.claims.insert(attempt.local, self.seq);
        self.users.insert(user.clone(), attempt.local);
        self.owners.insert(attempt.local, user.clone());
        JoinOutcome::Claimed {
            attempt,
            serial: self.seq,
        }
    }

    /// A claim's unit: taken from the stock, counted to the user, kept among the sold.
    fn take_claim(&mut self, attempt: Uuid, user: &UserId) {
        self.stock -= 1;
        *self.bought.entry(user.clone()).or_default() += 1;
        self.sold.insert(attempt, (Take::Quantity(1), user.clone()));
        self.version += 1;
    }

    fn queued(&self, attempt: AttemptId, position: u64) -> JoinOutcome {
        JoinOutcome::Queued {
            attempt,
            position,
            waiting: self.queue.len() as u64,
            measured_rate: self.measured_rate,
            configured_rate: self.rate_per_minute as f64,
            serial: self.queued.get(&attempt.local).copied().unwrap_or(0),
            epoch: self.epoch.clone(),
        }
    }

    /// Units or seats free to hold.
    fn remaining(&self) -> u64 {
        match self.kind {
            StockKind::Quantity => self.stock.max(0) as u64,
            StockKind::Seats => self.seats.len() as u64,
        }
    }

    fn position(&self, attempt: &Uuid) -> Option<u64> {
        let seq = self.queued.get(attempt)?;
        Some(self.queue.rank(seq) as u64 + 1)
    }
}

#[async_trait]
impl QueueStore for MemoryQueue {
    async fn init_sale(
        &self,
        sale: &Sale,
        settings_version: u64,
        snapshot: &SaleSnapshot,
        force: bool,
    ) -> QueueResult<bool> {
        let _timer = CallTimer::start("init_sale");
        let mut sales = self.sales.write().expect("not poisoned");
        let fresh = !sales.contains_key(&sale.id);
        let entry = sales
            .entry(sale.id)
            .or_insert_with(|| Arc::new(Mutex::new(SaleQueue::new(sale, self.journal.clone()))));
        let mut q = entry.lock().expect("not poisoned");
        q.write_settings(sale, settings_version, force);
        if !fresh && !force {
            return Ok(false);
        }
        q.rebuild(snapshot, false);
        if fresh {
            // The line the journal kept, if any: its users are still in their places.
            let saved = self.saved.lock().expect("not poisoned").remove(&sale.id);
            match saved {
                Some(line) => q.put_back(line, now_ms(), self.abandon_after_ms > 0),
                None => q.journal_line(),
            }
        }
        Ok(true)
    }

    async fn rebuild_if_unchanged(
        &self,
        sale: &Sale,
        snapshot: &SaleSnapshot,
        version: u64,
    ) -> QueueResult<bool> {
        let _timer = CallTimer::start("init_sale");
        let rebuilt = self.with(sale.id, |q| {
            let unchanged = q.version == version;
            if unchanged {
                q.rebuild(snapshot, true);
            }
            unchanged
        });
        Ok(rebuilt.unwrap_or(false))
    }

    async fn put_settings(
        &self,
        sale: &Sale,
        version: u64,
        forced: bool,
    ) -> QueueResult<Option<u64>> {
        let _timer = CallTimer::start("put_settings");
        Ok(self.with(sale.id, |q| q.write_settings(sale, version, forced)))
    }

    async fn settings_version(&self, sale: SaleId) -> QueueResult<Option<u64>> {
        let _timer = CallTimer::start("settings_version");
        Ok(self.with(sale, |q| q.settings_version))
    }

    async fn join_or_claim(
        &self,
        sale: SaleId,
        user: &UserId,
        now_ms: i64,
        front: bool,
    ) -> QueueResult<JoinOutcome> {
        let _timer = CallTimer::start("join");
        record_batch("join", 1);
        let track = self.abandon_after_ms > 0;
        let outcome = self.with(sale, |q| {
            if q.status == SaleStatus::Closed || (q.closes_at_ms > 0 && now_ms >= q.closes_at_ms) {
                return (JoinOutcome::Closed, None);
            }
            if let Some(existing) = q.users.get(user).copied() {
                if let Some(position) = q.position(&existing) {
                    if track {
                        q.seen.touch(existing, now_ms);
                    }
                    let attempt = AttemptId {
                        sale,
                        local: existing,
                    };
                    return (q.queued(attempt, position), None);
                }
                // One attempt per user per sale: one that bought comes back (as join.lua).
                let bought = q.bought.get(user).copied().unwrap_or(0) > 0;
                if q.active.contains_key(&existing) || bought {
                    let attempt = AttemptId {
                        sale,
                        local: existing,
                    };
                    if let Some(serial) = q.claims.get(&existing).copied() {
                        return (JoinOutcome::Claimed { attempt, serial }, None);
                    }
                    return (JoinOutcome::Active { attempt }, None);
                }
            }
            let attempt = AttemptId::new(sale);
            let claiming = q.instant
                && q.status == SaleStatus::Open
                && now_ms >= q.opens_at_ms
                && !front
                && q.queue.is_empty();
            if claiming {
                return (q.claim(attempt, user, now_ms), None);
            }
            q.seq += 1;
            let seq = q.seq;
            q.queue.insert(seq, attempt.local);
            q.queued.insert(attempt.local, seq);
            q.users.insert(user.clone(), attempt.local);
            q.owners.insert(attempt.local, user.clone());
            if track {
                q.seen.touch(attempt.local, now_ms);
            }
            let position = q.position(&attempt.local).unwrap_or(0);
            // A new place is on disk before it is answered (with its batch).
            let synced = q.journal.as_ref().map(|journal| {
                journal.append_synced(Record::Join {
                    sale: sale.0,
                    seq,
                    attempt: attempt.local,
                    user: user.as_str().to_owned(),
                })
            });
            (q.queued(attempt, position), synced)
        });
        match outcome {
            None => Ok(JoinOutcome::UnknownSale),
            Some((outcome, None)) => Ok(outcome),
            Some((outcome, Some(synced))) => match synced.await {
                Ok(true) => Ok(outcome),
                _ => Err(QueueError::Unavailable(
                    "the waiting line could not be written to disk".into(),
                )),
            },
        }
    }

    async fn view(&self, attempt: AttemptId, user: &UserId) -> QueueResult<QueueView> {
        let _timer = CallTimer::start("status");
        record_batch("status", 1);
        let view = self.with(attempt.sale, |q| {
            let owner = q.owners.get(&attempt.local).cloned();
            let position = q.position(&attempt.local);
            // Another user's waiting attempt is unknown to this user (as the Redis store, which
            // finds a waiting attempt through its user, answers).
            if position.is_some() && owner.as_ref() != Some(user) {
                return QueueView {
                    owner: None,
                    position: None,
                    ..q.view_of_sale(attempt.local)
                };
            }
            // Asking is a sign of life.
            if position.is_some() {
                q.seen.refresh(attempt.local, now_ms());
            }
            QueueView {
                owner,
                position,
                serial: position.and_then(|_| q.queued.get(&attempt.local).copied()),
                ..q.view_of_sale(attempt.local)
            }
        });
        Ok(view.unwrap_or_else(QueueView::unknown_sale))
    }

    async fn waiting_of(&self, sale: SaleId, user: &UserId) -> QueueResult<Option<WaitingPlace>> {
        let _timer = CallTimer::start("waiting_of");
        let place = self.with(sale, |q| {
            let attempt = *q.users.get(user)?;
            let position = q.position(&attempt)?;
            Some(WaitingPlace {
                attempt: AttemptId {
                    sale,
                    local: attempt,
                },
                position,
                waiting: q.queue.len() as u64,
            })
        });
        Ok(place.flatten())
    }

    async fn refresh(
        &self,
        sale: SaleId,
        epoch: &str,
        departed: u64,
        seen: &[u64],
    ) -> QueueResult<LineDigest> {
        let _timer = CallTimer::start("refresh");
        let track = self.abandon_after_ms > 0;
        let digest = self.with(sale, |q| {
            if track {
                q.signs_of_life(epoch, seen);
            }
            let logged = q.departed.len() as u64;
            let renumbered = q
                .renumbered
                .as_ref()
                .filter(|(_, made, _)| *made == q.epoch)
                .map(|(drawn, _, _)| drawn.clone());
            // The departure log goes on across the lottery's draw (as refresh.lua).
            let same_log =
                q.epoch == epoch || renumbered.as_ref().is_some_and(|d| d.from_epoch == epoch);
            let from = if !same_log || departed > logged {
                0
            } else {
                departed
            };
            let to = logged.min(from + MAX_DEPARTURES as u64);
            LineDigest {
                figures: LineFigures {
                    known: true,
                    epoch: q.epoch.clone(),
                    head: q.head(),
                    last: q.seq,
                    waiting: q.queue.len() as u64,
                    measured_rate: q.measured_rate,
                    configured_rate: q.rate_per_minute as f64,
                    rebuilt_at_ms: q.rebuilt_at_ms,
                    sale_closed: q.status == SaleStatus::Closed,
                    sold_out: q.sold_out(),
                },
                from,
                departures: q.departed[from as usize..to as usize].to_vec(),
                renumbered,
            }
        });
        Ok(digest.unwrap_or_else(|| LineDigest {
            figures: LineFigures::unknown(),
            from: 0,
            departures: Vec::new(),
            renumbered: None,
        }))
    }

    async fn seen(&self, sale: SaleId, epoch: &str, serials: &[u64]) -> QueueResult<()> {
        let _timer = CallTimer::start("seen");
        if self.abandon_after_ms > 0 {
            self.with(sale, |q| q.signs_of_life(epoch, serials));
        }
        Ok(())
    }

    async fn renumbered(
        &self,
        sale: SaleId,
        drawn: &Renumbering,
        from: u64,
        count: u64,
    ) -> QueueResult<Vec<u64>> {
        let _timer = CallTimer::start("renumbered");
        let serials = self.with(sale, |q| match &q.renumbered {
            Some((kept, _, serials)) if kept == drawn => {
                let from = from.max(drawn.first) - drawn.first;
                let to = (from + count).min(serials.len() as u64);
                serials
                    .get(from as usize..to as usize)
                    .unwrap_or_default()
                    .to_vec()
            }
            _ => Vec::new(),
        });
        Ok(serials.unwrap_or_default())
    }

    async fn leave(&self, attempt: AttemptId, user: &UserId) -> QueueResult<LeaveOutcome> {
        let _timer = CallTimer::start("leave");
        let outcome = self.with(attempt.sale, |q| {
            if q.owners.get(&attempt.local) != Some(user) {
                return LeaveOutcome::NotFound;
            }
            match q.depart(attempt.local) {
                Some(_) => {
                    if q.users.get(user) == Some(&attempt.local) {
                        q.users.remove(user);
                    }
                    LeaveOutcome::Left
                }
                None => LeaveOutcome::NotQueued,
            }
        });
        Ok(outcome.unwrap_or(LeaveOutcome::NotFound))
    }

    async fn lease(&self, sale: SaleId, holder: &str, ttl_ms: u64) -> QueueResult<Option<Lease>> {
        let _timer = CallTimer::start("lease");
        let now = now_ms();
        let lease = self.with(sale, |q| {
            if let Some((value, expires)) = &q.lease {
                if *expires > now {
                    let current = Lease::parse(value)?;
                    if current.holder() != holder {
                        return None;
                    }
                    q.lease = Some((current.value.clone(), now + ttl_ms as i64));
                    return Some(current);
                }
            }
            q.fence += 1;
            let value = format!("{}:{holder}", q.fence);
            q.lease = Some((value.clone(), now + ttl_ms as i64));
            Some(Lease {
                value,
                fence: q.fence,
            })
        });
        Ok(lease.flatten())
    }

    async fn release_lease(&self, sale: SaleId, holder: &str) -> QueueResult<bool> {
        let _timer = CallTimer::start("release_lease");
        let now = now_ms();
        let released = self.with(sale, |q| {
            let held = matches!(&q.lease, Some((value, expires))
                if *expires > now && Lease::parse(value).is_some_and(|l| l.holder() == holder));
            if held {
                q.lease = None;
            }
            held
        });
        Ok(released.unwrap_or(false))
    }

    async fn lease_holder(&self, sale: SaleId) -> QueueResult<Option<Lease>> {
        let _timer = CallTimer::start("lease_holder");
        let now = now_ms();
        let lease = self.with(sale, |q| match &q.lease {
            Some((value, expires)) if *expires > now => Lease::parse(value),
            _ => None,
        });
        Ok(lease.flatten())
    }

    async fn admit_batch_below(
        &self,
        sale: SaleId,
        lease: &Lease,
        wanted: u32,
        admission_ttl_ms: u64,
        measured_rate: f64,
        below: Option<u64>,
    ) -> QueueResult<AdmitOutcome> {
        let _timer = CallTimer::start("admit");
        let now = now_ms();
        let outcome = self.with(sale, |q| {
            let held = matches!(&q.lease, Some((value, expires)) if *value == lease.value && *expires > now);
            if !held {
                return AdmitOutcome::LeaseLost;
            }
            if !q.unrecorded.is_empty() {
                return AdmitOutcome::Unrecorded(q.unrecorded.clone());
            }
            if q.status != SaleStatus::Open {
                return AdmitOutcome::Admitted(Vec::new());
            }
            let before = q.active.len();
            q.active.retain(|_, deadline| *deadline >= now - FORGOTTEN_ACTIVE_GRACE_MS);
            if q.active.len() != before {
                q.version += 1;
            }
            q.measured_rate = measured_rate;
            let free = (q.max_active as usize).saturating_sub(q.active.len());
            let mut n = free.min(wanted as usize);
            if q.instant {
                n = n.min(q.stock.max(0) as usize);
            }
            let deadline = now + admission_ttl_ms as i64;
            let mut admitted = Vec::with_capacity(n);
            for _ in 0..n {
                if below.is_some_and(|b| q.queue.first_key_value().is_some_and(|(s, _)| *s >= b)) {
                    break;
                }
                let Some((seq, local)) = q.queue.pop_first() else { break };
                q.queued.remove(&local);
                q.seen.forget(local);
                q.journal_gone(local);
                q.active.insert(local, deadline);
                let Some(user) = q.owners.get(&local).cloned() else { continue };
                if q.instant {
                    q.take_claim(local, &user);
                }
                admitted.push(Admitted { attempt: AttemptId { sale, local }, seq, user, deadline_ms: deadline });
            }
            if !admitted.is_empty() {
                q.version += 1;
            }
            q.unrecorded = admitted.clone();
            AdmitOutcome::Admitted(admitted)
        });
        Ok(outcome.unwrap_or(AdmitOutcome::LeaseLost))
    }

    async fn admissions_recorded(&self, sale: SaleId, first: AttemptId) -> QueueResult<()> {
        let _timer = CallTimer::start("admissions_recorded");
        self.with(sale, |q| {
            if q.unrecorded.first().map(|a| a.attempt) == Some(first) {
                q.unrecorded.clear();
            }
        });
        Ok(())
    }

    async fn claims_recorded(&self, sale: SaleId, attempts: &[AttemptId]) -> QueueResult<()> {
        let _timer = CallTimer::start("claims_recorded");
        self.with(sale, |q| {
            let mut recorded = false;
            for attempt in attempts {
                recorded |= q.active.remove(&attempt.local).is_some();
                q.claims.remove(&attempt.local);
            }
            if recorded {
                q.version += 1;
            }
        });
        Ok(())
    }

    async fn stale_claims(&self, sale: SaleId) -> QueueResult<Vec<StaleClaim>> {
        let _timer = CallTimer::start("stale_claims");
        let now = now_ms();
        let stale = self.with(sale, |q| {
            q.claims
                .iter()
                .filter(|(attempt, _)| q.active.get(attempt).is_none_or(|until| *until < now))
                .filter_map(|(attempt, serial)| {
                    Some(StaleClaim {
                        attempt: AttemptId {
                            sale,
                            local: *attempt,
                        },
                        user: q.owners.get(attempt)?.clone(),
                        serial: *serial,
                    })
                })
                .collect()
        });
        Ok(stale.unwrap_or_default())
    }

    async fn unadmit(&self, sale: SaleId, admitted: &[Admitted]) -> QueueResult<()> {
        let _timer = CallTimer::start("unadmit");
        self.with(sale, |q| {
            q.unrecorded.clear();
            q.version += 1;
            for a in admitted {
                q.active.remove(&a.attempt.local);
                if q.sold.remove(&a.attempt.local).is_some() {
                    q.stock += 1;
                    if let Some(bought) = q.bought.get_mut(&a.user) {
                        *bought = bought.saturating_sub(1);
                    }
                }
                q.queue.insert(a.seq, a.attempt.local);
                q.queued.insert(a.attempt.local, a.seq);
                if let Some(journal) = &q.journal {
                    journal.append(Record::Join {
                        sale: sale.0,
                        seq: a.seq,
                        attempt: a.attempt.local,
                        user: a.user.as_str().to_owned(),
                    });
                }
            }
        });
        Ok(())
    }

    async fn hold(
        &self,
        attempt: AttemptId,
        user: &UserId,
        take: &Take,
    ) -> QueueResult<HoldOutcome> {
        let _timer = CallTimer::start("hold");
        let now = now_ms();
        let outcome = self.with(attempt.sale, |q| {
            let kind = match take {
                Take::Quantity(_) => StockKind::Quantity,
                Take::Seats(_) => StockKind::Seats,
            };
            if let Some(refused) = q.hold_refusal(attempt.local, user, kind, take.units()) {
                return refused;
            }
            match take {
                Take::Quantity(n) => {
                    if q.stock < i64::from(*n) {
                        return HoldOutcome::SoldOut {
                            remaining: q.stock.max(0) as u32,
                        };
                    }
                    q.stock -= i64::from(*n);
                }
                Take::Seats(seats) => {
                    if let Some(taken) = seats.iter().find(|s| !q.seats.contains(*s)) {
                        return HoldOutcome::SeatTaken {
                            seat: taken.clone(),
                        };
                    }
                    for seat in seats {
                        q.seats.remove(seat);
                    }
                }
            }
            q.record_hold(attempt.local, user, take, now)
        });
        Ok(outcome.unwrap_or(HoldOutcome::NotAdmitted))
    }

    async fn hold_best(
        &self,
        attempt: AttemptId,
        user: &UserId,
        ask: &BestAsk,
        blocks: &Blocks,
    ) -> QueueResult<HoldOutcome> {
        let _timer = CallTimer::start("hold_best");
        let now = now_ms();
        let outcome = self.with(attempt.sale, |q| {
            if let Some(refused) = q.hold_refusal(attempt.local, user, StockKind::Seats, ask.count)
            {
                return refused;
            }
            let moved = q.seats_moved_at;
            let key = (blocks.category.clone(), ask.count);
            let start = match q.best_from.get(&key) {
                Some(&(at, from)) if at >= moved => from,
                _ => 0,
            };
            let picked = best_seats::pick_from(blocks, ask, start, |s| q.seats.contains(s));
            let outcome = match picked.seats {
                None => HoldOutcome::NoAdjacent {
                    free: q.seats.len() as u32,
                },
                Some((seats, block)) => {
                    for seat in &seats {
                        q.seats.remove(seat);
                    }
                    let held = q.record_hold(attempt.local, user, &Take::Seats(seats), now);
                    // The hold changed one block: every count's cursor of the category still
                    // valid is brought back to it (another category's blocks are others: its
                    // cursors lapse, the hold having moved seats).
                    let version = q.version;
                    for ((category, _), (at, from)) in q.best_from.iter_mut() {
                        if *category == blocks.category && *at >= moved {
                            *at = version;
                            *from = (*from).min(block);
                        }
                    }
                    held
                }
            };
            q.best_from.insert(key, (q.version, picked.next_start));
            outcome
        });
        Ok(outcome.unwrap_or(HoldOutcome::NotAdmitted))
    }

    async fn seat_changes(
        &self,
        sale: SaleId,
        since: u64,
        epoch: &str,
    ) -> QueueResult<SeatChanges> {
        let _timer = CallTimer::start("seat_changes");
        let changes = self.with(sale, |q| {
            if q.epoch != epoch || since < q.seatlog_from || since > q.version {
                return SeatChanges::Whole {
                    version: q.version,
                    epoch: q.epoch.clone(),
                };
            }
            SeatChanges::Since {
                version: q.version,
                epoch: q.epoch.clone(),
                changes: q
                    .seatlog
                    .iter()
                    .filter(|c| c.version > since)
                    .cloned()
                    .collect(),
            }
        });
        Ok(changes.unwrap_or(SeatChanges::Unknown))
    }

    async fn restore(
        &self,
        attempt: AttemptId,
        keep_slot_until_ms: Option<i64>,
    ) -> QueueResult<bool> {
        let _timer = CallTimer::start("restore");
        let restored = self.with(attempt.sale, |q| {
            q.restore(attempt.local, keep_slot_until_ms)
        });
        Ok(restored.unwrap_or(false))
    }

    async fn adjust_stock(&self, sale: SaleId, change: &StockChange) -> QueueResult<bool> {
        let _timer = CallTimer::start("adjust_stock");
        let applied = self.with(sale, |q| q.adjust_stock(change));
        Ok(applied.unwrap_or(false))
    }

    async fn apply_sync(&self, sync: &PendingSync) -> QueueResult<bool> {
        let _timer = CallTimer::start(sync.change.as_str());
        let now = now_ms();
        let applied = self.with(sync.attempt.sale, |q| q.apply_sync(sync, now));
        Ok(applied.unwrap_or(false))
    }

    async fn unsynced(&self, sale: SaleId, ids: &[i64]) -> QueueResult<Vec<i64>> {
        let _timer = CallTimer::start("unsynced");
        let missing = self.with(sale, |q| {
            ids.iter()
                .copied()
                .filter(|id| !q.synced.contains(id))
                .collect()
        });
        Ok(missing.unwrap_or_else(|| ids.to_vec()))
    }

    async fn forget_waiting(&self, sale: SaleId) -> QueueResult<u64> {
        let _timer = CallTimer::start("forget_waiting");
        Ok(self
            .with(sale, |q| {
                if q.status != SaleStatus::Closed {
                    return 0;
                }
                let waiting = q.queue.len() as u64;
                if let Some(journal) = &q.journal {
                    journal.append(Record::Clear { sale: sale.0 });
                }
                q.departed.clear();
                q.renumbered = None;
                for (_, attempt) in std::mem::take(&mut q.queue) {
                    q.queued.remove(&attempt);
                    q.seen.forget(attempt);
                    // As Redis keeps a waiting user's entry, with the owner, in a user bucket.
                    if let Some(user) = q.owners.remove(&attempt) {
                        if q.users.get(&user) == Some(&attempt) {
                            q.users.remove(&user);
                        }
                    }
                }
                waiting
            })
            .unwrap_or(0))
    }

    async fn stats(&self, sale: SaleId) -> QueueResult<QueueStats> {
        let _timer = CallTimer::start("stats");
        let stats = self.with(sale, |q| QueueStats {
            waiting: q.queue.len() as u64,
            active: q.active.len() as u64,
            remaining: q.remaining(),
            known: true,
            version: q.version,
        });
        Ok(stats.unwrap_or_default())
    }

    async fn holdings(&self, sale: SaleId) -> QueueResult<Option<Holdings>> {
        let _timer = CallTimer::start("holdings");
        Ok(self.with(sale, |q| Holdings {
            version: q.version,
            free: match q.kind {
                StockKind::Quantity => Stock::Quantity(q.stock.max(0) as u32),
                StockKind::Seats => Stock::Seats(q.seats.iter().cloned().collect()),
            },
            active: q
                .active
                .keys()
                .map(|a| (*a, q.holds.get(a).map(|(take, _)| take.clone())))
                .collect(),
            bought: q
                .bought
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(u, n)| (u.clone(), *n))
                .collect(),
            unrecorded: q.unrecorded.clone(),
        }))
    }

    async fn ping(&self) -> QueueResult<()> {
        let _timer = CallTimer::start("ping");
        Ok(())
    }

    async fn abandon(&self, sale: SaleId, limit: u32) -> QueueResult<u64> {
        let _timer = CallTimer::start("abandon");
        if self.abandon_after_ms == 0 {
            return Ok(0);
        }
        let cutoff = now_ms() - self.abandon_after_ms as i64;
        let n = self.with(sale, |q| {
            let mut n = 0;
            for attempt in q.seen.silent_since(cutoff, limit as usize) {
                q.seen.forget(attempt);
                if q.depart(attempt).is_none() {
                    continue;
                }
                if let Some(user) = q.owners.get(&attempt).cloned() {
                    if q.users.get(&user) == Some(&attempt) {
                        q.users.remove(&user);
                    }
                }
                q.abandoned.insert(attempt);
                n += 1;
            }
            n
        });
        Ok(n.unwrap_or(0))
    }

    async fn draw_lottery_from(
        &self,
        sale: SaleId,
        seed: &str,
        from: u64,
        _budget: Duration,
    ) -> QueueResult<LotteryDraw> {
        let _timer = CallTimer::start("lottery");
        let drawn = self.with(sale, |q| {
            if q.lottery_drawn.is_some_and(|drawn_from| drawn_from >= from) {
                return None;
            }
            let mut ranked: Vec<(String, Uuid)> = q
                .queue
                .range(from..)
                .map(|(_, attempt)| {
                    let user = q.owners.get(attempt).map_or("", UserId::as_str);
                    (lottery_key(seed, user), *attempt)
                })
                .collect();
            ranked.sort();
            // They keep the places they hold between them, given out again in that order (as
            // lottery.lua): the places gone out of turn stay gone, later joins follow. A
            // serial names another user from here on: the line is numbered anew.
            let places: Vec<u64> = q.queue.range(from..).map(|(s, _)| *s).collect();
            let (first, last) = (
                places.first().copied().unwrap_or(1),
                places.last().copied().unwrap_or(0),
            );
            let mut renumbered = vec![0; (last + 1).saturating_sub(first) as usize];
            for (&serial, (_, attempt)) in places.iter().zip(&ranked) {
                q.queue.insert(serial, *attempt);
                if let Some(before) = q.queued.insert(*attempt, serial) {
                    renumbered[(before - first) as usize] = serial;
                }
            }
            let from_epoch = std::mem::replace(&mut q.epoch, new_epoch());
            if !places.is_empty() {
                let drawn = Renumbering {
                    from_epoch,
                    first,
                    last,
                };
                q.renumbered = Some((drawn, q.epoch.clone(), renumbered));
            }
            q.lottery_drawn = Some(from);
            q.journal_line();
            Some(ranked.len() as u64)
        });
        // No sale here: nothing to draw, as for a draw made before.
        Ok(drawn
            .flatten()
            .map_or(LotteryDraw::DrawnBefore, LotteryDraw::Drawn))
    }

    async fn put_controller(&self, sale: SaleId, state: &str, ttl_ms: u64) -> QueueResult<()> {
        let _timer = CallTimer::start("put_controller");
        self.with(sale, |q| {
            q.controller = Some((state.to_owned(), now_ms() + ttl_ms as i64));
        });
        Ok(())
    }

    async fn controller(&self, sale: SaleId) -> QueueResult<Option<String>> {
        let _timer = CallTimer::start("controller");
        let state = self.with(sale, |q| match &q.controller {
            Some((state, expires)) if *expires > now_ms() => Some(state.clone()),
            _ => None,
        });
        Ok(state.flatten())
    }
}
