//! Each replica's view of the waiting lines it answers for, so that a waiting user's status
//! costs the queue store nothing. A line's view is refreshed by one store call per refresh
//! interval (`queue.line_refresh_ms`; [`crate::queue::QueueStore::refresh`]): the head, the
//! last serial, the departures out of turn not seen yet, the sale's figures; the same call
//! writes the signs of life gathered here since the last one (the abandonment reaper's "seen").
//! A status with a verified queue ticket ([`crate::auth::QueueTickets`]) is then answered from
//! the view, exact as of its refresh; the store is asked only when the view says something
//! happened to the attempt (admitted, left, abandoned, a new numbering). A new numbering made
//! by the lottery's draw is learned instead: before the view shows it, it reads what the draw
//! made of each serial ([`crate::queue::QueueStore::renumbered`]), so the tickets of before
//! the draw are answered from the view too.
//!
//! A line's view exists while someone asks: it is made at the first question for the sale and
//! dropped once nobody asked for [`IDLE`] and no status stream follows it. Status streams
//! wait on the view ([`Lines::subscribe`]) and on their attempt's nudges ([`Nudges`]).

mod nudges;
mod signs_of_life;
mod snapshot;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use tokio::sync::watch;

pub use self::nudges::{Nudged, Nudges};
use self::signs_of_life::{seen_window, SignsOfLife};
pub use self::snapshot::{LineSnapshot, Renumbered};
use crate::domain::{AttemptId, SaleId};
use crate::queue::{QueueStore, Renumbering, MAX_DEPARTURES};

/// A line nobody asked about for this long, followed by no stream, stops being refreshed.
pub const IDLE: Duration = Duration::from_secs(30);

/// How finely a line's last question is timed ([`Line::asked_ms`]): a status writes the time
/// only when it moved by this much, so that statuses on every core do not write one memory
/// location at each answer.
const ASKED_GRAIN_MS: i64 = 1000;

/// How many serials of a lottery's draw one store call reads (4 bytes each on Redis).
const RENUMBERED_PAGE: u64 = 65_536;

/// The most signs of life one store call writes: more go in calls of their own before the
/// refresh, so that no call holds the sale's Redis primary for long (each is a sorted-set
/// update there).
const SEEN_PER_CALL: usize = 2_000;

/// Every line this replica keeps a view of.
pub struct Lines {
    /// How often each line's view is refreshed.
    every: Duration,
    /// Signs of life are gathered (abandonment is on).
    track_presence: bool,
    /// How many refreshes a window of the signs-of-life gathering spans (each serial is
    /// gathered once a window).
    seen_window: u64,
    queue: Arc<dyn QueueStore>,
    /// Every line's view, by sale. Each status reads it without a lock; a line made or
    /// dropped (rare) replaces the map, under `changing`.
    lines: ArcSwap<HashMap<SaleId, Arc<Line>>>,
    /// Held while the map is replaced, and while a stream subscribes to a line (so that a line
    /// being dropped is not subscribed to).
    changing: Mutex<()>,
    /// What [`Line::asked_ms`] counts from.
    started: Instant,
    /// Status streams of this replica, by attempt, to push to at once.
    pub nudges: Arc<Nudges>,
}

/// One sale's line as this replica sees it.
pub struct Line {
    /// The latest snapshot; `None` until the first refresh, and while the store cannot be
    /// read or does not hold the sale (answers come from the store then). Read by each status
    /// without a lock; the same snapshots go to the streams through `published`.
    latest: ArcSwapOption<LineSnapshot>,
    /// The snapshots as they come, for the status streams that wait on them.
    published: watch::Sender<Option<Arc<LineSnapshot>>>,
    /// Serials of waiting users who asked since the last refresh (written by the next).
    seen: Mutex<SignsOfLife>,
    /// Refreshes made so far: what the gathering's windows count.
    refreshes: AtomicU64,
    /// When someone last asked (ms since [`Lines::started`]): idle lines stop.
    asked_ms: AtomicI64,
    /// Attempts that left the line through this replica, and when: until a refresh sent after
    /// that brings their departure, their status comes from the store.
    left_here: Mutex<Vec<(AttemptId, Instant)>>,
    /// How many `left_here` holds: a status looks in it only when it holds some.
    left_count: AtomicUsize,
}

impl Line {
    /// The latest snapshot, if the view has one (held briefly: a status's answer).
    pub fn snapshot(&self) -> Guard<Option<Arc<LineSnapshot>>> {
        self.latest.load()
    }

    /// Someone asked at `now` (ms since [`Lines::started`]).
    fn asked(&self, now: i64) {
        if now - self.asked_ms.load(Ordering::Relaxed) >= ASKED_GRAIN_MS {
            self.asked_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Shows `snapshot` to the statuses and the streams.
    fn publish(&self, snapshot: Option<Arc<LineSnapshot>>) {
        self.latest.store(snapshot.clone());
        self.published.send_replace(snapshot);
    }

    /// Records a sign of life of a waiting serial of `epoch`, for the next refresh to write
    /// (once a window of `every` refreshes).
    fn seen(&self, serial: u64, epoch: &str, every: u64) {
        let window = self.refreshes.load(Ordering::Relaxed) / every;
        self.seen
            .lock()
            .expect("seen lock")
            .push(serial, epoch, window);
    }

    /// The attempt left through this replica since the last refresh.
    pub fn left_here(&self, attempt: AttemptId) -> bool {
        if self.left_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let left = self.left_here.lock().expect("left lock");
        left.iter().any(|(a, _)| *a == attempt)
    }

    /// Forgets the departures a refresh sent at `sent` or later brought.
    fn forget_left_before(&self, sent: Instant) {
        let mut left = self.left_here.lock().expect("left lock");
        left.retain(|(_, at)| *at >= sent);
        self.left_count.store(left.len(), Ordering::Release);
    }
}

impl Lines {
    /// Lines refreshed `every` interval; `abandon_after` zero when abandonment is off.
    pub fn new(queue: Arc<dyn QueueStore>, every: Duration, abandon_after: Duration) -> Self {
        Lines {
            every,
            track_presence: !abandon_after.is_zero(),
            seen_window: seen_window(abandon_after, every),
            queue,
            lines: ArcSwap::default(),
            changing: Mutex::default(),
            started: Instant::now(),
            nudges: Arc::default(),
        }
    }

    /// Records that the holder of `serial` (of `epoch`) in `line` asked: a sign of life for
    /// the abandonment reaper, when it is on.
    pub fn seen(&self, line: &Line, serial: u64, epoch: &str) {
        if self.track_presence {
            line.seen(serial, epoch, self.seen_window);
        }
    }

    /// `f` with the sale's line, made (and its refreshing started) at the first question.
    /// A line that exists is read without a lock.
    pub fn with_line<T>(self: &Arc<Self>, sale: SaleId, f: impl FnOnce(&Line) -> T) -> T {
        let now = self.clock_ms();
        if let Some(line) = self.lines.load().get(&sale) {
            line.asked(now);
            return f(line);
        }
        let _changing = self.changing.lock().expect("lines lock");
        let line = self.made(sale, now);
        line.asked(now);
        f(&line)
    }

    /// The sale's line's snapshots as they come, for a status stream.
    pub fn subscribe(self: &Arc<Self>, sale: SaleId) -> watch::Receiver<Option<Arc<LineSnapshot>>> {
        // Under the lock the dropping of a line takes, so a line that is being dropped is not
        // subscribed to.
        let _changing = self.changing.lock().expect("lines lock");
        let now = self.clock_ms();
        let line = self.made(sale, now);
        line.asked(now);
        line.published.subscribe()
    }

    /// The sale's line, made (and its refreshing started) if there is none; under `changing`.
    fn made(self: &Arc<Self>, sale: SaleId, now: i64) -> Arc<Line> {
        if let Some(line) = self.lines.load().get(&sale) {
            return Arc::clone(line);
        }
        let line = Arc::new(Line {
            latest: ArcSwapOption::empty(),
            published: watch::channel(None).0,
            seen: Mutex::default(),
            refreshes: AtomicU64::new(0),
            asked_ms: AtomicI64::new(now),
            left_here: Mutex::default(),
            left_count: AtomicUsize::new(0),
        });
        let mut lines = HashMap::clone(&self.lines.load());
        lines.insert(sale, Arc::clone(&line));
        self.lines.store(Arc::new(lines));
        tokio::spawn(Arc::clone(self).refresh(sale, Arc::clone(&line)));
        line
    }

    /// Notes that `attempt` left its line through this replica (see [`Line::left_here`]) and
    /// pushes to its streams here. Without a view of the line here, nothing can be stale.
    pub fn left(&self, attempt: AttemptId) {
        if let Some(line) = self.lines.load().get(&attempt.sale) {
            let mut left = line.left_here.lock().expect("left lock");
            left.push((attempt, Instant::now()));
            line.left_count.store(left.len(), Ordering::Release);
        }
        self.nudges.nudge(attempt);
    }

    fn clock_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    /// Reads what the lottery's draw `drawn` made of the line's serials, a page a call; `None`
    /// if the store fails meanwhile (the next refresh tries again) or the draw's range is too
    /// wide to keep (then every ticket of before the draw is looked up once).
    async fn learn(
        &self,
        sale: SaleId,
        drawn: Renumbering,
        now: &LineSnapshot,
    ) -> Option<Renumbered> {
        let width = Renumbered::width(&drawn)?;
        let mut serials = Vec::with_capacity(width);
        let mut from = drawn.first;
        while from <= drawn.last {
            metrics::counter!("sluice_status_store_calls_total", "call" => "renumbered")
                .increment(1);
            let page = self
                .queue
                .renumbered(sale, &drawn, from, RENUMBERED_PAGE)
                .await
                .map_err(|e| tracing::debug!(%sale, error = %e, "reading the draw failed"))
                .ok()?;
            if page.is_empty() {
                // The rest held nobody (or the store no longer keeps the draw).
                break;
            }
            serials.extend_from_slice(&page);
            from += RENUMBERED_PAGE;
            // A short page ends where the store's record of the draw ends.
            serials.resize(((from - drawn.first) as usize).min(width), 0);
        }
        Renumbered::new(drawn, now.figures.epoch.clone(), &serials)
    }

    /// Writes the signs of life `seen` (of `epoch`) past one call's share in calls of their
    /// own; returns the share the refresh carries. If the store fails, those not written wait
    /// for the next refresh.
    async fn write_seen(
        &self,
        sale: SaleId,
        line: &Line,
        epoch: &str,
        mut seen: Vec<u64>,
    ) -> Vec<u64> {
        let mut rest = seen.split_off(SEEN_PER_CALL.min(seen.len()));
        while !rest.is_empty() {
            let chunk = rest.split_off(rest.len().saturating_sub(SEEN_PER_CALL));
            metrics::counter!("sluice_status_store_calls_total", "call" => "seen").increment(1);
            if let Err(e) = self.queue.seen(sale, epoch, &chunk).await {
                tracing::debug!(%sale, error = %e, "writing signs of life failed");
                rest.extend(chunk);
                line.seen.lock().expect("seen lock").put_back(rest, epoch);
                break;
            }
        }
        seen
    }

    /// Refreshes the sale's line every interval until it is idle.
    async fn refresh(self: Arc<Self>, sale: SaleId, line: Arc<Line>) {
        let mut current = LineSnapshot::empty();
        loop {
            let epoch = current.figures.epoch.clone();
            let mut seen = line.seen.lock().expect("seen lock").take(&epoch);
            line.refreshes.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("sluice_queue_signs_of_life_total").increment(seen.len() as u64);
            if seen.len() > SEEN_PER_CALL {
                seen = self.write_seen(sale, &line, &epoch, seen).await;
            }
            let sent = Instant::now();
            let as_of = chrono::Utc::now();
            let refreshed = self
                .queue
                .refresh(sale, &epoch, current.logged(), &seen)
                .await;
            metrics::counter!("sluice_status_store_calls_total", "call" => "refresh").increment(1);
            match refreshed {
                Ok(digest) => match current.next(&digest, as_of, MAX_DEPARTURES) {
                    Some(mut next) => {
                        // A lottery's draw made this numbering: learned before the snapshot is
                        // shown, so that no ticket of before the draw goes to the store.
                        if let Some(drawn) = digest.renumbered.filter(|d| next.lacks(d)) {
                            if let Some(learned) = self.learn(sale, drawn, &next).await {
                                next = next.learned(Arc::new(learned));
                            }
                        }
                        current = next;
                        line.publish(Some(Arc::new(current.clone())));
                    }
                    None => {
                        current = LineSnapshot::empty();
                        line.publish(None);
                    }
                },
                Err(e) => {
                    tracing::debug!(%sale, error = %e, "line refresh failed");
                    line.publish(None);
                    // The signs of life go with the next refresh.
                    line.seen.lock().expect("seen lock").put_back(seen, &epoch);
                }
            }
            line.forget_left_before(sent);
            tokio::time::sleep(self.every).await;
            let _changing = self.changing.lock().expect("lines lock");
            let idle = self.clock_ms() - line.asked_ms.load(Ordering::Relaxed);
            if idle > IDLE.as_millis() as i64 && line.published.receiver_count() == 0 {
                let mut lines = HashMap::clone(&self.lines.load());
                lines.remove(&sale);
                self.lines.store(Arc::new(lines));
                return;
            }
        }
    }
}
