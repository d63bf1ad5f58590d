//! The Redis queue store: every operation is one Lua script from `lua/` (EVALSHA, with the
//! NOSCRIPT fallback of `::redis::Script`), so each change is atomic and a retried call is safe.
//! One `RedisConnection` (a single server or a Redis Cluster) serves all calls and reconnects
//! by itself; each call is bounded by `timeout`, so a dead Redis turns into
//! [`QueueError::Unavailable`] quickly.

use std::future::Future;
use std::time::Duration;

use super::redis_batches::{self, Gathering};
use super::redis_connection::RedisConnection;
use super::redis_script::{Args, Counted, Each, Reply, Rest};
use super::redis_scripts::*;
use ::redis::{FromRedisValue, Value};
use async_trait::async_trait;
use uuid::Uuid;

use super::*;
use crate::domain::best_seats::{BestAsk, Block, Blocks};
use crate::domain::{Stock, StockChange, StockKind};

/// Change ids asked about in one call of the queue-sync replay (lua/unsynced.lua): a replay
/// asks about as many as a busy sale changed in `workers.queue_sync_replay_secs` (up to
/// 20,000), a call a chunk, so that none holds Redis's one thread for long.
const UNSYNCED_CHUNK: usize = 1000;

/// Entries of a sale's holdings read in one call (lua/holdings.lua): each call is short
/// however large the sale, where one read of the whole would hold Redis's one thread (and
/// every other sale of its shard) for as long as the sale is large.
const HOLDINGS_PAGE: usize = 500;

/// One page of a sale's holdings, as lua/holdings.lua returns it.
struct HoldingsPage {
    /// The store holds the sale.
    known: bool,
    /// The sale's version when the page was read.
    version: u64,
    /// `quantity` or `seats`.
    kind: String,
    /// Where the next page starts; "0" when the part is read.
    next: String,
    /// Seats, (attempt, hold record) pairs or (user, units) pairs, flat.
    items: Vec<String>,
    /// Free units (the first page).
    units: i64,
    /// The admission batch not yet recorded (the first page).
    unrecorded: Vec<AdmittedEntry>,
}

/// Serials (the scan) or users (the placing) a call of the lottery's draw takes
/// (lua/lottery.lua): each call is a bounded piece of work however many wait, so none holds
/// Redis's one thread (and every other sale of its shard) for long.
const LOTTERY_CHUNK: u32 = 500;

/// Keys deleted in one call when a closed sale lets go of its waiting users (a 1,000,000-user
/// queue has ~26,000 buckets): a chunk's UNLINK is over in about a millisecond.
const FORGET_CHUNK: usize = 1000;

/// How long past its deadline an active entry may linger before admit_batch drops it; the
/// reapers normally free it long before (they own the ledger side of the expiry).
const FORGOTTEN_ACTIVE_GRACE_MS: u64 = 60_000;

#[derive(Clone)]
pub struct RedisQueue {
    /// Shared by every call (multiplexed); cloning it is cheap.
    conn: RedisConnection,
    /// Prefix of every key (per deployment; the tests use one per test); shared by the clones
    /// a batch call takes.
    prefix: Arc<str>,
    /// Bound of each call.
    timeout: Duration,
    /// Waiting attempts idle this long lose their place (0: never; presence is not tracked).
    abandon_after_ms: u64,
    /// Status lookups going to Redis together (see [`super::redis_batches`]; shared by the
    /// store's clones).
    views: Arc<Gathering<(AttemptId, UserId), QueueView>>,
    /// Joins going to Redis together (each user with the time of the join, ms), likewise.
    joins: Arc<Gathering<(UserId, i64, bool), JoinOutcome>>,
}

/// The keys of one sale, all in the `{sale:<id>}` hash slot.
struct SaleKeys {
    base: String,
}

impl SaleKeys {
    fn key(&self, name: &str) -> String {
        format!("{}:{}", self.base, name)
    }
}

/// How many user buckets a waiting line of layout 2 has (`user_buckets` of
/// `lua/lib/queue.lua`; every line written since the field exists).
const USER_BUCKETS: u32 = 65_536;

/// A user's bucket in a line of layout 2, as `user_bucket` of `lua/lib/queue.lua` finds it:
/// the first 20 bits of SHA-1 of the user id, modulo [`USER_BUCKETS`]. A join sends its key,
/// sparing the script the SHA-1 and the key's making (an older line's script finds the bucket
/// itself).
fn user_bucket(user: &UserId) -> u32 {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        user.as_str().as_bytes(),
    );
    let d = digest.as_ref();
    ((u32::from(d[0]) << 12) | (u32::from(d[1]) << 4) | (u32::from(d[2]) >> 4)) % USER_BUCKETS
}

fn local(attempt: AttemptId) -> String {
    attempt.local.simple().to_string()
}

impl RedisQueue {
    /// Creates the store without connecting: the first call connects, so sluice starts (and
    /// reports not-ready) while Redis is down.
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> anyhow::Result<Self> {
        Self::connect(&[url], false, prefix, timeout)
    }

    /// A store on a Redis Cluster, found through any of its `nodes`.
    pub fn cluster(nodes: &[&str], prefix: &str, timeout: Duration) -> anyhow::Result<Self> {
        Self::connect(nodes, true, prefix, timeout)
    }

    /// A store on the in-process Redis of the embedded default (`super::embedded`).
    pub fn in_process(
        store: Arc<super::embedded::Embedded>,
        prefix: &str,
        timeout: Duration,
    ) -> Self {
        // Two calls of a sale out, as with Redis: the store runs one script at a time, but a
        // call that wrote waits for its journal's sync after it lets the store go, and the
        // next call runs meanwhile instead of waiting for that sync too.
        Self::with_connection(
            RedisConnection::InProcess(store),
            prefix,
            timeout,
            redis_batches::MAX_CALLS,
        )
    }

    fn connect(
        urls: &[&str],
        cluster: bool,
        prefix: &str,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let conn = RedisConnection::new(urls, cluster, timeout)?;
        Ok(Self::with_connection(
            conn,
            prefix,
            timeout,
            redis_batches::MAX_CALLS,
        ))
    }

    /// A store over `conn`, with at most `calls` calls of a sale's joins (and of its status
    /// lookups) out at once.
    fn with_connection(
        conn: RedisConnection,
        prefix: &str,
        timeout: Duration,
        calls: usize,
    ) -> Self {
        RedisQueue {
            conn,
            prefix: prefix.into(),
            timeout,
            abandon_after_ms: 0,
            views: redis_batches::gathering("status", calls),
            joins: redis_batches::gathering("join", calls),
        }
    }

    /// Waiting attempts idle for `ms` lose their place (0: off).
    pub fn with_abandonment(mut self, ms: u64) -> Self {
        self.abandon_after_ms = ms;
        self
    }

    /// `"1"` when waiting attempts' signs of life are tracked (abandonment is on), for the
    /// scripts that would record one.
    fn tracks_presence(&self) -> &'static str {
        if self.abandon_after_ms > 0 {
            "1"
        } else {
            "0"
        }
    }

    fn keys(&self, sale: SaleId) -> SaleKeys {
        SaleKeys {
            base: format!("{}:{{sale:{}}}", self.prefix, sale),
        }
    }

    /// One page of a sale's holdings (lua/holdings.lua): `part` from `cursor`.
    async fn holdings_page(
        &self,
        sale: SaleId,
        part: &'static str,
        cursor: &str,
    ) -> QueueResult<HoldingsPage> {
        let args = HoldingsArgs {
            part,
            cursor: cursor.to_owned(),
            page: HOLDINGS_PAGE,
        };
        let page = self.call("holdings", &HOLDINGS, sale, &args).await?;
        Ok(HoldingsPage {
            known: page.known == 1,
            version: page.version,
            kind: page.kind,
            next: page.next,
            items: page.items,
            units: page.units,
            unrecorded: page.unrecorded.0.admitted.0,
        })
    }

    /// Every page of `part`, each page's items handed to `take`. The pages are of one moment
    /// only if the sale's version reads the same after them as at the first page (the drift
    /// checker reads it again after the ledger).
    async fn holdings_pages(
        &self,
        sale: SaleId,
        part: &'static str,
        mut take: impl FnMut(Vec<String>) -> QueueResult<()>,
    ) -> QueueResult<()> {
        let mut cursor = "0".to_owned();
        loop {
            let page = self.holdings_page(sale, part, &cursor).await?;
            take(page.items)?;
            if page.next == "0" {
                return Ok(());
            }
            cursor = page.next;
        }
    }

    /// Runs `script` on `sale`'s keys with `args`; `call` names the operation in the
    /// call-duration metric. A reply that is not the script's type is a protocol error
    /// naming the script.
    async fn call<A: Args, R: Reply>(
        &self,
        call: &'static str,
        script: &Lua<A, R>,
        sale: SaleId,
        args: &A,
    ) -> QueueResult<R> {
        let k = self.keys(sale);
        let invocation = script.invoke(|name| k.key(name), args);
        let mut conn = self.conn.clone();
        let reply: Value = self.timed(call, invocation.invoke_async(&mut conn)).await?;
        R::decode(&reply).map_err(|e| QueueError::Protocol(format!("lua/{}: {e}", script.file)))
    }

    /// Loads the scripts Redis's script cache lacks (one `SCRIPT EXISTS` when it has them all;
    /// on a cluster, every primary is asked and loaded); how many it loaded. A script missing
    /// from the cache (Redis restarted, or a replica took over) costs its first call a
    /// `NOSCRIPT` answer and a load, two more round trips, which a Redis a few milliseconds
    /// away turns into timeouts under the first burst of calls.
    async fn load_scripts(&self) -> QueueResult<usize> {
        let all = scripts();
        let mut exists = ::redis::cmd("SCRIPT");
        exists.arg("EXISTS");
        for script in all {
            exists.arg(script.script().get_hash());
        }
        let cached: Vec<bool> = self.cmd("script_exists", &exists).await?;
        let mut loaded = 0;
        for (script, cached) in all.iter().zip(cached) {
            if !cached {
                let mut conn = self.conn.clone();
                self.timed("script_load", script.script().load_async(&mut conn))
                    .await?;
                loaded += 1;
            }
        }
        Ok(loaded)
    }

    /// Sends one command; `call` as for [`RedisQueue::run`].
    async fn cmd<T: FromRedisValue>(
        &self,
        call: &'static str,
        cmd: &::redis::Cmd,
    ) -> QueueResult<T> {
        let mut conn = self.conn.clone();
        self.timed(call, cmd.query_async(&mut conn)).await
    }

    /// A call bounded by `timeout` (or what is left of the request's budget, [`super::budget`])
    /// and timed, failures and timeouts included:
    /// `sluice_queue_call_duration_seconds{call}` is Redis as sluice sees it (the round trip,
    /// the script, and any wait for the connection or a core), which an SRE reads next to the
    /// HTTP latencies to tell a slow Redis from a slow sluice.
    async fn timed<T>(
        &self,
        call: &'static str,
        reply: impl Future<Output = ::redis::RedisResult<T>>,
    ) -> QueueResult<T> {
        let timer = super::CallTimer::start(call);
        let reply = tokio::time::timeout(super::budget::left(self.timeout), reply).await;
        super::budget::spend(timer.elapsed());
        drop(timer);
        match reply {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(e)),
            Err(_) => Err(QueueError::Unavailable("timed out".into())),
        }
    }
}

/// Most stale claims one call returns (bounds the script; the admitter asks every tick).
const STALE_CLAIMS_A_CALL: u32 = 1000;

/// A sale's settings as `lua/lib/settings.lua` takes them, as of the ledger's `version`.
fn settings_args(sale: &Sale, version: u64) -> SettingsArgs {
    SettingsArgs {
        version,
        status: sale.status.as_str(),
        opens_at_ms: sale.opens_at.timestamp_millis(),
        closes_at_ms: sale.closes_at.map(|t| t.timestamp_millis()).unwrap_or(0),
        max_active: sale.admission.max_active,
        per_user_limit: sale.per_user_limit,
        rate_per_minute: sale.admission.rate_per_minute,
        kind: sale.stock.kind().as_str(),
        hold_ttl_ms: sale.ttls.hold_secs as u64 * 1000,
        payment_ttl_ms: sale.ttls.payment_secs as u64 * 1000,
        instant: if sale.instant { "1" } else { "0" },
    }
}

impl RedisQueue {
    /// `init_sale.lua` with the sale's settings as of `settings_version` and its `force`
    /// argument: "1", "0", or "v<version>" (see the script).
    async fn init(
        &self,
        sale: &Sale,
        settings_version: u64,
        snapshot: &SaleSnapshot,
        force: &str,
    ) -> QueueResult<bool> {
        let (free_units, seats) = match &snapshot.free {
            Stock::Quantity(n) => (*n, Vec::new()),
            Stock::Seats(seats) => (0, seats.clone()),
        };
        let live = snapshot.live.iter().map(|live| LiveArgs {
            attempt: local(live.attempt),
            user: live.user.to_string(),
            deadline_ms: live.deadline_ms,
            hold: live
                .hold
                .as_ref()
                .map(|t| hold_record(t, &live.user))
                .unwrap_or_default(),
        });
        let bought = snapshot.bought.iter().map(|(user, units)| BoughtArgs {
            user: user.to_string(),
            units: *units,
        });
        let buyers = snapshot.buyers.iter().map(|buyer| BuyerArgs {
            user: buyer.user.to_string(),
            attempt: local(buyer.attempt),
            bought: buyer
                .bought
                .as_ref()
                .map(|t| hold_record(t, &buyer.user))
                .unwrap_or_default(),
        });
        let args = InitArgs {
            settings: settings_args(sale, settings_version),
            force: force.to_owned(),
            reset: snapshot.reset.into(),
            free_units,
            seats: Counted(Rest(seats)),
            live: Counted(Each(live.collect())),
            bought: Counted(Each(bought.collect())),
            buyers: Counted(Each(buyers.collect())),
        };
        let reply = self.call("init_sale", &INIT_SALE, sale.id, &args).await?;
        Ok(reply.rebuilt == 1)
    }

    /// Joins `asks` (users of `sale`, each with the time of their join, ms) in their order: one
    /// call of `lua/join.lua`, one outcome per ask.
    async fn joins(
        &self,
        sale: SaleId,
        asks: &[(UserId, i64, bool)],
    ) -> QueueResult<Vec<JoinOutcome>> {
        let sent: Vec<String> = asks.iter().map(|_| local(AttemptId::new(sale))).collect();
        let keys = self.keys(sale);
        let join = asks
            .iter()
            .zip(&sent)
            .map(|((user, _, _), attempt)| JoinAsk {
                user: user.to_string(),
                attempt: attempt.clone(),
                bucket_key: keys.key(&format!("u:{}", user_bucket(user))),
            });
        let now_ms = asks
            .iter()
            .map(|(_, now, _)| *now)
            .min()
            .unwrap_or_default();
        let args = JoinArgs {
            presence: self.tracks_presence(),
            now_ms,
            front: if asks.iter().any(|(_, _, front)| *front) {
                "1"
            } else {
                "0"
            },
            claim_until_ms: now_ms + super::CLAIM_RECORD_MS,
            join: Each(join.collect()),
        };
        let reply = self.call("join", &JOIN, sale, &args).await?;
        if reply.join.0.len() != asks.len() {
            return Err(protocol("join", &reply.join.0.len()));
        }
        let (measured_rate, configured_rate) = (reply.measured_rate, reply.configured_rate);
        let epoch = reply.epoch;
        let outcome = |(join, sent): (Joined, &String)| {
            let attempt = match join.attempt.as_str() {
                "" => attempt_of(sale, sent),
                other => attempt_of(sale, other),
            };
            Ok(match join.status.as_str() {
                "queued" => JoinOutcome::Queued {
                    attempt: attempt?,
                    position: join.position.max(0) as u64,
                    waiting: join.waiting.max(0) as u64,
                    measured_rate,
                    configured_rate,
                    serial: join.serial.max(0) as u64,
                    epoch: epoch.clone(),
                },
                "active" => JoinOutcome::Active { attempt: attempt? },
                "claimed" => JoinOutcome::Claimed {
                    attempt: attempt?,
                    serial: join.serial.max(0) as u64,
                },
                "sold_out" => JoinOutcome::SoldOut,
                "limit" => JoinOutcome::LimitReached {
                    already: join.position.max(0) as u32,
                },
                "unknown" => JoinOutcome::UnknownSale,
                "closed" => JoinOutcome::Closed,
                other => return Err(protocol("join", &other)),
            })
        };
        reply.join.0.into_iter().zip(&sent).map(outcome).collect()
    }

    /// Where `asks` (attempts of `sale`, each with the user who asks) stand: one call of
    /// `lua/position.lua`, one view per ask in their order.
    async fn positions(
        &self,
        sale: SaleId,
        asks: &[(AttemptId, UserId)],
    ) -> QueueResult<Vec<QueueView>> {
        let lookup = asks.iter().map(|(attempt, user)| Lookup {
            attempt: local(*attempt),
            user: user.to_string(),
        });
        let args = PositionArgs {
            presence: self.tracks_presence(),
            lookup: Each(lookup.collect()),
        };
        let reply = self.call("status", &POSITION, sale, &args).await?;
        if reply.lookup.0.len() != asks.len() {
            return Err(protocol("position", &reply.lookup.0.len()));
        }
        let sale_closed = reply.status == SaleStatus::Closed.as_str();
        let views = reply.lookup.0.into_iter().map(|place| QueueView {
            owner: UserId::parse(&place.owner).ok(),
            position: (place.position > 0).then_some(place.position as u64),
            waiting: reply.waiting.max(0) as u64,
            active: place.active == 1,
            measured_rate: reply.measured_rate,
            configured_rate: reply.configured_rate,
            known_sale: reply.known == 1,
            rebuilt_at_ms: reply.rebuilt_at_ms,
            abandoned: place.abandoned == 1,
            sale_closed,
            sold_out: reply.sold_out == 1,
            serial: (place.serial > 0).then_some(place.serial as u64),
            epoch: reply.epoch.clone(),
        });
        Ok(views.collect())
    }
}

fn classify(e: ::redis::RedisError) -> QueueError {
    let unreachable =
        e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal();
    let server_gave_up =
        matches!(e.kind(), ::redis::ErrorKind::Server(_)) && e.is_unrecoverable_error();
    // MOVED, ASK, TRYAGAIN or CLUSTERDOWN past the client's own retries: the cluster is moving
    // the sale's slot (a failover) and answers again in a moment.
    let cluster_moving = e.is_cluster_error();
    if unreachable || server_gave_up || cluster_moving {
        QueueError::Unavailable(e.to_string())
    } else {
        QueueError::Protocol(e.to_string())
    }
}

fn protocol(what: &str, v: &impl std::fmt::Debug) -> QueueError {
    QueueError::Protocol(format!("unexpected reply to {what}: {v:?}"))
}

fn attempt_of(sale: SaleId, local: &str) -> QueueResult<AttemptId> {
    Uuid::parse_str(local)
        .map(|local| AttemptId { sale, local })
        .map_err(|_| protocol("attempt id", &local))
}

/// One admitted attempt as admit_batch.lua lists it.
fn admitted_of(sale: SaleId, entry: &AdmittedEntry) -> QueueResult<Admitted> {
    Ok(Admitted {
        attempt: attempt_of(sale, &entry.attempt)?,
        seq: entry.serial,
        user: UserId::parse(&entry.user).map_err(|_| protocol("owner", &entry.user))?,
        deadline_ms: entry.deadline_ms,
    })
}

/// What lua/hold.lua or lua/hold_best.lua answered.
fn hold_outcome(call: &str, reply: &HoldReply) -> QueueResult<HoldOutcome> {
    let detail = || {
        reply
            .detail
            .clone()
            .ok_or_else(|| protocol(call, &reply.status))
    };
    let count = || {
        Ok::<_, QueueError>(
            detail()?
                .parse::<i64>()
                .map_err(|_| protocol(call, &reply.detail))?
                .clamp(0, i64::from(u32::MAX)) as u32,
        )
    };
    Ok(match reply.status.as_str() {
        "held" => HoldOutcome::Held {
            take: parse_take(&detail()?)?,
        },
        "not_admitted" => HoldOutcome::NotAdmitted,
        "limit" => HoldOutcome::LimitReached { already: count()? },
        "sold_out" => HoldOutcome::SoldOut {
            remaining: count()?,
        },
        "seat_taken" => HoldOutcome::SeatTaken { seat: detail()? },
        "wrong_kind" => HoldOutcome::WrongKind,
        "no_adjacent" => HoldOutcome::NoAdjacent { free: count()? },
        other => return Err(protocol(call, &other)),
    })
}

/// The `holds` value hold.lua writes: `q|<n>|<user>` or `s|<seat,seat>|<user>`.
fn hold_record(take: &Take, user: &UserId) -> String {
    match take {
        Take::Quantity(n) => format!("q|{n}|{user}"),
        Take::Seats(seats) => format!("s|{}|{user}", seats.join(",")),
    }
}

fn parse_take(record: &str) -> QueueResult<Take> {
    let mut parts = record.splitn(3, '|');
    match (parts.next(), parts.next()) {
        (Some("q"), Some(n)) => n
            .parse()
            .map(Take::Quantity)
            .map_err(|_| protocol("hold record", &record)),
        (Some("s"), Some(seats)) => Ok(Take::Seats(seats.split(',').map(str::to_owned).collect())),
        _ => Err(protocol("hold record", &record)),
    }
}

#[async_trait]
impl QueueStore for RedisQueue {
    async fn init_sale(
        &self,
        sale: &Sale,
        settings_version: u64,
        snapshot: &SaleSnapshot,
        force: bool,
    ) -> QueueResult<bool> {
        let force = if force { "1" } else { "0" };
        self.init(sale, settings_version, snapshot, force).await
    }

    async fn rebuild_if_unchanged(
        &self,
        sale: &Sale,
        snapshot: &SaleSnapshot,
        version: u64,
    ) -> QueueResult<bool> {
        // Guarded, the script leaves the settings alone: their version does not matter.
        self.init(sale, 0, snapshot, &format!("v{version}")).await
    }

    async fn put_settings(
        &self,
        sale: &Sale,
        version: u64,
        forced: bool,
    ) -> QueueResult<Option<u64>> {
        let args = PutSettingsArgs {
            settings: settings_args(sale, version),
            forced: forced.into(),
        };
        let held = self
            .call("put_settings", &PUT_SETTINGS, sale.id, &args)
            .await?;
        Ok(u64::try_from(held.version).ok())
    }

    async fn settings_version(&self, sale: SaleId) -> QueueResult<Option<u64>> {
        let meta = self.keys(sale).key("meta");
        let (held, version): (Option<String>, Option<u64>) = self
            .cmd(
                "settings_version",
                ::redis::cmd("HMGET")
                    .arg(meta)
                    .arg("stock_initialised")
                    .arg("settings_version"),
            )
            .await?;
        Ok(held.map(|_| version.unwrap_or(0)))
    }

    async fn join_or_claim(
        &self,
        sale: SaleId,
        user: &UserId,
        now_ms: i64,
        front: bool,
    ) -> QueueResult<JoinOutcome> {
        let queue = self.clone();
        let call = move |asks: Vec<(UserId, i64, bool)>| {
            let queue = queue.clone();
            async move { queue.joins(sale, &asks).await }
        };
        let ask = (user.clone(), now_ms, front);
        redis_batches::ask(&self.joins, sale, ask, self.timeout, call).await
    }

    async fn view(&self, attempt: AttemptId, user: &UserId) -> QueueResult<QueueView> {
        let sale = attempt.sale;
        let queue = self.clone();
        let call = move |asks: Vec<(AttemptId, UserId)>| {
            let queue = queue.clone();
            async move { queue.positions(sale, &asks).await }
        };
        let ask = (attempt, user.clone());
        redis_batches::ask(&self.views, sale, ask, self.timeout, call).await
    }

    async fn leave(&self, attempt: AttemptId, user: &UserId) -> QueueResult<LeaveOutcome> {
        let args = LeaveArgs {
            attempt: local(attempt),
            user: user.to_string(),
        };
        let reply = self.call("leave", &LEAVE, attempt.sale, &args).await?;
        match reply.outcome.as_str() {
            "left" => Ok(LeaveOutcome::Left),
            "not_queued" => Ok(LeaveOutcome::NotQueued),
            "not_found" => Ok(LeaveOutcome::NotFound),
            other => Err(protocol("leave", &other)),
        }
    }

    async fn waiting_of(&self, sale: SaleId, user: &UserId) -> QueueResult<Option<WaitingPlace>> {
        let args = WaitingOfArgs {
            user: user.to_string(),
        };
        let reply = self.call("waiting_of", &WAITING_OF, sale, &args).await?;
        match (reply.attempt, reply.position, reply.waiting) {
            (None, None, None) => Ok(None),
            (Some(attempt), Some(position), Some(waiting)) => Ok(Some(WaitingPlace {
                attempt: attempt_of(sale, &attempt)?,
                position,
                waiting,
            })),
            (attempt, _, _) => Err(protocol("waiting_of", &attempt)),
        }
    }

    async fn refresh(
        &self,
        sale: SaleId,
        epoch: &str,
        departed: u64,
        seen: &[u64],
    ) -> QueueResult<LineDigest> {
        let seen = if self.abandon_after_ms > 0 {
            seen.to_vec()
        } else {
            Vec::new()
        };
        let args = RefreshArgs {
            presence: self.tracks_presence(),
            epoch: epoch.to_owned(),
            departed,
            most: MAX_DEPARTURES,
            seen: Rest(seen),
        };
        let r = self.call("refresh", &REFRESH, sale, &args).await?;
        Ok(LineDigest {
            figures: LineFigures {
                known: r.known == 1,
                epoch: r.epoch,
                head: r.head.max(0) as u64,
                last: r.last.max(0) as u64,
                waiting: r.waiting.max(0) as u64,
                measured_rate: r.measured_rate,
                configured_rate: r.configured_rate,
                rebuilt_at_ms: r.rebuilt_at_ms,
                sale_closed: r.status == SaleStatus::Closed.as_str(),
                sold_out: r.sold_out == 1,
            },
            from: r.from.max(0) as u64,
            departures: r.departures.0,
            renumbered: (r.last_drawn > 0).then(|| Renumbering {
                from_epoch: r.drawn_from,
                first: r.first_drawn.max(0) as u64,
                last: r.last_drawn as u64,
            }),
        })
    }

    async fn seen(&self, sale: SaleId, epoch: &str, serials: &[u64]) -> QueueResult<()> {
        if self.abandon_after_ms == 0 || serials.is_empty() {
            return Ok(());
        }
        let args = SeenArgs {
            epoch: epoch.to_owned(),
            serials: Rest(serials.to_vec()),
        };
        self.call("seen", &SEEN, sale, &args).await
    }

    async fn renumbered(
        &self,
        sale: SaleId,
        drawn: &Renumbering,
        from: u64,
        count: u64,
    ) -> QueueResult<Vec<u64>> {
        let from = from.max(drawn.first);
        let to = (from + count).min(drawn.last + 1);
        if to <= from {
            return Ok(Vec::new());
        }
        // lua/lottery.lua: 4 bytes a serial, big-endian, the new serial's distance from the
        // range's first plus one.
        let bytes: Vec<u8> = self
            .cmd(
                "renumbered",
                ::redis::cmd("GETRANGE")
                    .arg(self.keys(sale).key("renumbered"))
                    .arg(4 * (from - drawn.first))
                    .arg(4 * (to - drawn.first) - 1),
            )
            .await?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| match u32::from_be_bytes([b[0], b[1], b[2], b[3]]) {
                0 => 0,
                n => drawn.first + u64::from(n) - 1,
            })
            .collect())
    }

    async fn lease(&self, sale: SaleId, holder: &str, ttl_ms: u64) -> QueueResult<Option<Lease>> {
        let args = LeaseArgs {
            holder: holder.to_owned(),
            ttl_ms,
        };
        let fence = self.call("lease", &LEASE, sale, &args).await?.fence;
        Ok((fence > 0).then(|| Lease {
            value: format!("{fence}:{holder}"),
            fence,
        }))
    }

    async fn release_lease(&self, sale: SaleId, holder: &str) -> QueueResult<bool> {
        let args = ReleaseArgs {
            holder: holder.to_owned(),
        };
        let reply = self
            .call("release_lease", &RELEASE_LEASE, sale, &args)
            .await?;
        Ok(reply.released == 1)
    }

    async fn lease_holder(&self, sale: SaleId) -> QueueResult<Option<Lease>> {
        let value: Option<String> = self
            .cmd(
                "lease_holder",
                ::redis::cmd("GET").arg(self.keys(sale).key("lease")),
            )
            .await?;
        Ok(value.as_deref().and_then(Lease::parse))
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
        let args = AdmitArgs {
            lease: lease.value.clone(),
            wanted,
            admission_ttl_ms,
            grace_ms: FORGOTTEN_ACTIVE_GRACE_MS,
            measured_rate: format!("{measured_rate:.3}"),
            below: below.unwrap_or(0),
        };
        let reply = self.call("admit", &ADMIT_BATCH, sale, &args).await?;
        let fresh = match reply.status.as_str() {
            "lease_lost" => return Ok(AdmitOutcome::LeaseLost),
            "ok" => true,
            "unrecorded" => false,
            other => return Err(protocol("admit_batch", &other)),
        };
        let admitted = reply
            .admitted
            .0
            .iter()
            .map(|entry| admitted_of(sale, entry))
            .collect::<QueueResult<Vec<_>>>()?;
        Ok(if fresh {
            AdmitOutcome::Admitted(admitted)
        } else {
            AdmitOutcome::Unrecorded(admitted)
        })
    }

    async fn admissions_recorded(&self, sale: SaleId, first: AttemptId) -> QueueResult<()> {
        let args = RecordedArgs {
            first: local(first),
        };
        self.call("admissions_recorded", &RECORDED, sale, &args)
            .await?;
        Ok(())
    }

    async fn claims_recorded(&self, sale: SaleId, attempts: &[AttemptId]) -> QueueResult<()> {
        if attempts.is_empty() {
            return Ok(());
        }
        let args = ClaimsRecordedArgs {
            attempt: Rest(attempts.iter().map(|a| local(*a)).collect()),
        };
        self.call("claims_recorded", &CLAIMS_RECORDED, sale, &args)
            .await?;
        Ok(())
    }

    async fn stale_claims(&self, sale: SaleId) -> QueueResult<Vec<StaleClaim>> {
        let args = StaleClaimsArgs {
            now_ms: chrono::Utc::now().timestamp_millis(),
            most: STALE_CLAIMS_A_CALL,
        };
        let reply = self
            .call("stale_claims", &STALE_CLAIMS, sale, &args)
            .await?;
        reply
            .claim
            .0
            .into_iter()
            .map(|c| {
                Ok(StaleClaim {
                    attempt: attempt_of(sale, &c.attempt)?,
                    user: UserId::parse(&c.user).map_err(|_| protocol("stale_claims", &c.user))?,
                    serial: c.serial.max(0) as u64,
                })
            })
            .collect()
    }

    async fn unadmit(&self, sale: SaleId, admitted: &[Admitted]) -> QueueResult<()> {
        if admitted.is_empty() {
            return Ok(());
        }
        let each = admitted.iter().map(|a| Unadmitted {
            attempt: local(a.attempt),
            serial: a.seq,
            user: a.user.to_string(),
        });
        let args = UnadmitArgs {
            admitted: Each(each.collect()),
        };
        self.call("unadmit", &UNADMIT, sale, &args).await?;
        Ok(())
    }

    async fn hold(
        &self,
        attempt: AttemptId,
        user: &UserId,
        take: &Take,
    ) -> QueueResult<HoldOutcome> {
        let (kind, quantity, seats) = match take {
            Take::Quantity(n) => ("q", *n as usize, String::new()),
            Take::Seats(seats) => ("s", seats.len(), seats.join(",")),
        };
        let args = HoldArgs {
            attempt: local(attempt),
            user: user.to_string(),
            kind,
            quantity,
            seats,
        };
        let reply = self.call("hold", &HOLD, attempt.sale, &args).await?;
        hold_outcome("hold", &reply)
    }

    async fn hold_best(
        &self,
        attempt: AttemptId,
        user: &UserId,
        ask: &BestAsk,
        blocks: &Blocks,
    ) -> QueueResult<HoldOutcome> {
        let category = blocks.category.clone().unwrap_or_default();
        let args = HoldBestArgs {
            attempt: local(attempt),
            user: user.to_string(),
            count: ask.count,
            category: category.clone(),
            section: ask.section.clone().unwrap_or_default(),
            single_gaps: if blocks.single_gaps { "1" } else { "0" },
        };
        let mut reply = self
            .call("hold_best", &HOLD_BEST, attempt.sale, &args)
            .await?;
        if reply.status == "unloaded" {
            let load = LoadBestArgs {
                category,
                blocks: Rest(blocks.blocks.iter().map(Block::encode).collect()),
            };
            self.call("load_best", &LOAD_BEST, attempt.sale, &load)
                .await?;
            reply = self
                .call("hold_best", &HOLD_BEST, attempt.sale, &args)
                .await?;
        }
        hold_outcome("hold_best", &reply)
    }

    async fn seat_changes(
        &self,
        sale: SaleId,
        since: u64,
        epoch: &str,
    ) -> QueueResult<SeatChanges> {
        let args = SeatChangesArgs {
            since,
            epoch: epoch.to_owned(),
        };
        let reply = self
            .call("seat_changes", &SEAT_CHANGES, sale, &args)
            .await?;
        if reply.known == 0 {
            return Ok(SeatChanges::Unknown);
        }
        if reply.whole == 1 {
            return Ok(SeatChanges::Whole {
                version: reply.version,
                epoch: reply.epoch,
            });
        }
        let changes = reply
            .changes
            .iter()
            .map(|c| SeatChange::parse(c).ok_or_else(|| protocol("seat change", c)))
            .collect::<QueueResult<_>>()?;
        Ok(SeatChanges::Since {
            version: reply.version,
            epoch: reply.epoch,
            changes,
        })
    }

    async fn restore(
        &self,
        attempt: AttemptId,
        keep_slot_until_ms: Option<i64>,
    ) -> QueueResult<bool> {
        let args = RestoreArgs {
            attempt: local(attempt),
            keep_slot_until_ms: keep_slot_until_ms
                .map(|ms| ms.to_string())
                .unwrap_or_default(),
        };
        let reply = self.call("restore", &RESTORE, attempt.sale, &args).await?;
        Ok(reply.restored == 1)
    }

    async fn adjust_stock(&self, sale: SaleId, change: &StockChange) -> QueueResult<bool> {
        let amount = match change {
            StockChange::Add(n) | StockChange::Withdraw(n) => vec![n.to_string()],
            StockChange::AddSeats(seats) | StockChange::WithdrawSeats(seats) => seats.clone(),
        };
        let args = AdjustArgs {
            change: change.field(),
            amount: Rest(amount),
        };
        let reply = self
            .call("adjust_stock", &ADJUST_STOCK, sale, &args)
            .await?;
        Ok(reply.applied == 1)
    }

    async fn apply_sync(&self, sync: &PendingSync) -> QueueResult<bool> {
        let args = ApplySyncArgs {
            id: sync.id,
            change: sync.change.as_str(),
            attempt: local(sync.attempt),
            keep_ms: SYNCED_KEEP_MS,
        };
        let reply = self
            .call(sync.change.as_str(), &APPLY_SYNC, sync.attempt.sale, &args)
            .await?;
        Ok(reply.applied == 1)
    }

    async fn unsynced(&self, sale: SaleId, ids: &[i64]) -> QueueResult<Vec<i64>> {
        let mut missing = Vec::new();
        for chunk in ids.chunks(UNSYNCED_CHUNK) {
            let args = UnsyncedArgs {
                ids: Rest(chunk.to_vec()),
            };
            let part = self.call("unsynced", &UNSYNCED, sale, &args).await?;
            missing.extend(part.missing.0);
        }
        Ok(missing)
    }

    async fn forget_waiting(&self, sale: SaleId) -> QueueResult<u64> {
        let k = self.keys(sale);
        let Forgotten {
            waiting,
            first_bucket: first,
            last_bucket: last,
            user_buckets,
        } = self
            .call("forget_waiting", &FORGET_WAITING, sale, &NoArgs {})
            .await?;
        // Nobody waits any more: the buckets are dead weight, deleted a chunk a call. Cut
        // short, they stay until the next call names them again; the count stands.
        let buckets = (first..=last)
            .map(|n| k.key(&format!("w:{n}")))
            .chain((0..user_buckets).map(|n| k.key(&format!("u:{n}"))))
            .collect::<Vec<_>>();
        for chunk in buckets.chunks(FORGET_CHUNK) {
            let deleted: QueueResult<i64> = self
                .cmd("forget_waiting", ::redis::cmd("UNLINK").arg(chunk))
                .await;
            if let Err(e) = deleted {
                tracing::warn!(%sale, error = %e, "a closed sale's queue is not all deleted");
                break;
            }
        }
        Ok(waiting)
    }

    async fn stats(&self, sale: SaleId) -> QueueResult<QueueStats> {
        let s = self.call("stats", &STATS, sale, &NoArgs {}).await?;
        Ok(QueueStats {
            waiting: s.waiting,
            active: s.active,
            remaining: s.remaining,
            known: s.known == 1,
            version: s.version,
        })
    }

    async fn holdings(&self, sale: SaleId) -> QueueResult<Option<Holdings>> {
        let first = self.holdings_page(sale, "first", "0").await?;
        if !first.known {
            return Ok(None);
        }
        let mut holdings = Holdings {
            version: first.version,
            free: Stock::Quantity(first.units.max(0) as u32),
            active: Default::default(),
            bought: Default::default(),
            unrecorded: Vec::new(),
        };
        for entry in &first.unrecorded {
            holdings.unrecorded.push(admitted_of(sale, entry)?);
        }
        if StockKind::parse(&first.kind) == Some(StockKind::Seats) {
            // A scan may return a member twice: the set gathers each once.
            let mut seats = std::collections::HashSet::new();
            self.holdings_pages(sale, "seats", |items| {
                seats.extend(items);
                Ok(())
            })
            .await?;
            holdings.free = Stock::Seats(seats.into_iter().collect());
        }
        self.holdings_pages(sale, "active", |items| {
            for pair in items.chunks_exact(2) {
                let attempt = attempt_of(sale, &pair[0])?;
                let take = match pair[1].as_str() {
                    "" => None,
                    record => Some(parse_take(record)?),
                };
                holdings.active.insert(attempt.local, take);
            }
            Ok(())
        })
        .await?;
        self.holdings_pages(sale, "bought", |items| {
            for pair in items.chunks_exact(2) {
                let units: i64 = pair[1].parse().map_err(|_| protocol("bought", &pair))?;
                if units > 0 {
                    let user = UserId::parse(&pair[0]).map_err(|_| protocol("bought", &pair))?;
                    holdings.bought.insert(user, units as u32);
                }
            }
            Ok(())
        })
        .await?;
        Ok(Some(holdings))
    }

    async fn prepare(&self) -> QueueResult<usize> {
        self.load_scripts().await
    }

    async fn ping(&self) -> QueueResult<()> {
        let pong: String = self.cmd("ping", &::redis::cmd("PING")).await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(protocol("PING", &pong))
        }
    }

    async fn abandon(&self, sale: SaleId, limit: u32) -> QueueResult<u64> {
        if self.abandon_after_ms == 0 {
            return Ok(0);
        }
        let args = AbandonArgs {
            idle_ms: self.abandon_after_ms,
            limit,
        };
        Ok(self.call("abandon", &ABANDON, sale, &args).await?.abandoned)
    }

    async fn draw_lottery_from(
        &self,
        sale: SaleId,
        seed: &str,
        from: u64,
        budget: Duration,
    ) -> QueueResult<LotteryDraw> {
        let args = LotteryArgs {
            seed: seed.to_owned(),
            chunk: LOTTERY_CHUNK,
            from,
        };
        // A step a call until the draw is made or the budget is spent: each call makes
        // progress (or finds the draw made).
        let deadline = std::time::Instant::now() + budget;
        loop {
            let n = self.call("lottery", &LOTTERY, sale, &args).await?.drawn;
            return Ok(match n {
                -2 if std::time::Instant::now() < deadline => continue,
                -2 => LotteryDraw::UnderWay,
                n if n < 0 => LotteryDraw::DrawnBefore,
                n => LotteryDraw::Drawn(n as u64),
            });
        }
    }

    async fn put_controller(&self, sale: SaleId, state: &str, ttl_ms: u64) -> QueueResult<()> {
        let key = self.keys(sale).key("controller");
        let _: () = self
            .cmd(
                "put_controller",
                ::redis::cmd("SET")
                    .arg(key)
                    .arg(state)
                    .arg("PX")
                    .arg(ttl_ms),
            )
            .await?;
        Ok(())
    }

    async fn controller(&self, sale: SaleId) -> QueueResult<Option<String>> {
        let key = self.keys(sale).key("controller");
        self.cmd("controller", ::redis::cmd("GET").arg(key)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket a join sends is the one `lua/lib/queue.lua` finds in a line of layout 2 (the
    /// first five hex digits of SHA-1 of the user id, modulo 65,536), or every other script
    /// would miss the user.
    #[test]
    fn a_users_bucket_is_the_one_the_scripts_find() {
        for (user, bucket) in [
            ("alice", 8_882),
            ("bench-42", 38_855),
            ("user-000000012345", 40_082),
        ] {
            assert_eq!(user_bucket(&UserId::parse(user).unwrap()), bucket, "{user}");
        }
    }
}
