//! The Redis queue store: every operation is one Lua script from `lua/` (EVALSHA, with the
//! NOSCRIPT fallback of `::redis::Script`), so each change is atomic and a retried call is safe.
//! One `RedisConnection` (a single server or a Redis Cluster) serves all calls and reconnects
//! by itself; each call is bounded by `timeout`, so a dead Redis turns into
//! [`QueueError::Unavailable`] quickly.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use super::redis_batches::{Asked, Gathering};
use super::redis_connection::RedisConnection;
use ::redis::{FromRedisValue, Script, ScriptInvocation, Value};
use async_trait::async_trait;
use uuid::Uuid;

use super::*;
use crate::domain::{Stock, StockChange, StockKind};

/// A script of `lua/`, with the keys of a sale it takes in its header's order: a call names
/// the sale and the script adds its keys (`Lua::invoke`), so a key list cannot fall out of
/// line with its script (a unit test checks each list against the script's `KEYS` header).
struct Lua {
    /// Its file under `lua/` (whose header the unit test reads).
    #[cfg_attr(not(test), allow(dead_code))]
    file: &'static str,
    /// The names of its keys (`SaleKeys::key`), in the order of its `KEYS`.
    keys: &'static [&'static str],
    script: LazyLock<Script>,
}

impl Lua {
    /// A call of the script on the sale whose keys `k` are.
    fn invoke(&self, k: &SaleKeys) -> ScriptInvocation<'_> {
        let mut inv = self.script.prepare_invoke();
        for name in self.keys {
            inv.key(k.key(name));
        }
        inv
    }
}

macro_rules! lua {
    ($name:ident, $file:literal, $keys:expr) => {
        static $name: Lua = Lua {
            file: $file,
            keys: &$keys,
            script: LazyLock::new(|| Script::new(include_str!(concat!("../../lua/", $file)))),
        };
    };
    // A script with libraries of `lua/lib/` first (a layout, or functions).
    ($name:ident, $($lib:literal),+ => $file:literal, $keys:expr) => {
        static $name: Lua = Lua {
            file: $file,
            keys: &$keys,
            script: LazyLock::new(|| {
                Script::new(concat!(
                    $(include_str!(concat!("../../lua/lib/", $lib)),)+
                    include_str!(concat!("../../lua/", $file))
                ))
            }),
        };
    };
}
/// A script that touches the waiting queue: `lua/lib/queue.lua` (its layout) comes first.
macro_rules! queue_lua {
    ($name:ident, $file:literal, $keys:expr) => {
        lua!($name, "queue.lua" => $file, $keys);
    };
}
/// A script that applies a transition's change: `lua/lib/changes.lua` comes first.
macro_rules! changes_lua {
    ($name:ident, $file:literal, $keys:expr) => {
        lua!($name, "changes.lua" => $file, $keys);
    };
}
queue_lua!(
    JOIN,
    "join.lua",
    ["meta", "seq", "gone", "users", "active", "seen", "bought"]
);
queue_lua!(
    POSITION,
    "position.lua",
    [
        "meta",
        "seq",
        "gone",
        "owners",
        "active",
        "seen",
        "abandoned",
        "left",
        "stock",
        "seats",
        "holds"
    ]
);
queue_lua!(
    LEAVE,
    "leave.lua",
    ["meta", "gone", "seen", "owners", "left"]
);
queue_lua!(
    ADMIT_BATCH,
    "admit_batch.lua",
    [
        "meta",
        "seq",
        "gone",
        "active",
        "owners",
        "users",
        "lease",
        "seen",
        "unrecorded"
    ]
);
queue_lua!(
    UNADMIT,
    "unadmit.lua",
    ["meta", "seq", "gone", "active", "unrecorded"]
);
queue_lua!(
    ABANDON,
    "abandon.lua",
    ["meta", "seen", "gone", "abandoned", "left"]
);
queue_lua!(LOTTERY, "lottery.lua", ["meta", "seq", "gone", "seen"]);
queue_lua!(WAITING_OF, "waiting_of.lua", ["meta", "seq", "gone"]);
queue_lua!(
    STATS,
    "stats.lua",
    ["meta", "seq", "gone", "active", "stock", "seats"]
);
queue_lua!(
    FORGET_WAITING,
    "forget_waiting.lua",
    ["meta", "seq", "gone", "seen"]
);
queue_lua!(
    REFRESH,
    "refresh.lua",
    ["meta", "seq", "gone", "seen", "departed", "stock", "seats", "holds"]
);
queue_lua!(SEEN, "seen.lua", ["meta", "seen"]);
lua!(LEASE, "lease.lua", ["lease", "fence"]);
lua!(RELEASE_LEASE, "release_lease.lua", ["lease"]);
lua!(
    HOLD,
    "hold.lua",
    ["meta", "active", "holds", "stock", "seats", "bought"]
);
changes_lua!(
    RESTORE,
    "restore.lua",
    ["meta", "holds", "stock", "seats", "bought", "active", "sold"]
);
changes_lua!(
    ADJUST_STOCK,
    "adjust_stock.lua",
    ["meta", "holds", "stock", "seats", "bought", "active", "sold"]
);
changes_lua!(
    APPLY_SYNC,
    "apply_sync.lua",
    ["meta", "holds", "stock", "seats", "bought", "active", "sold", "synced"]
);
lua!(UNSYNCED, "unsynced.lua", ["synced"]);
lua!(
    HOLDINGS,
    "holdings.lua",
    [
        "meta",
        "stock",
        "seats",
        "active",
        "holds",
        "bought",
        "unrecorded"
    ]
);
lua!(INIT_SALE, "queue.lua", "settings.lua" => "init_sale.lua", ["meta", "stock", "seats", "active", "holds", "owners", "users", "bought", "unrecorded", "sold"]);
lua!(PUT_SETTINGS, "settings.lua" => "put_settings.lua", ["meta"]);
lua!(RECORDED, "recorded.lua", ["unrecorded"]);

/// Every script above: [`RedisQueue::load_scripts`] puts them in Redis's script cache ahead of
/// the calls (a unit test checks the list against the declarations).
fn scripts() -> [&'static Lua; 23] {
    [
        &JOIN,
        &POSITION,
        &LEAVE,
        &ADMIT_BATCH,
        &UNADMIT,
        &ABANDON,
        &LOTTERY,
        &WAITING_OF,
        &STATS,
        &FORGET_WAITING,
        &REFRESH,
        &SEEN,
        &LEASE,
        &RELEASE_LEASE,
        &HOLD,
        &RESTORE,
        &ADJUST_STOCK,
        &APPLY_SYNC,
        &UNSYNCED,
        &HOLDINGS,
        &INIT_SALE,
        &PUT_SETTINGS,
        &RECORDED,
    ]
}

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
    /// The admission batch not yet recorded, four fields an entry (the first page).
    unrecorded: Vec<String>,
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
    views: Arc<Gathering<Asked<(AttemptId, UserId), QueueView>>>,
    /// Joins going to Redis together (each user with the time of the join, ms), likewise.
    joins: Arc<Gathering<Asked<(UserId, i64), JoinOutcome>>>,
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

    fn connect(
        urls: &[&str],
        cluster: bool,
        prefix: &str,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let conn = RedisConnection::new(urls, cluster, timeout)?;
        Ok(RedisQueue {
            conn,
            prefix: prefix.into(),
            timeout,
            abandon_after_ms: 0,
            views: Arc::new(Gathering::new("status")),
            joins: Arc::new(Gathering::new("join")),
        })
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
        part: &str,
        cursor: &str,
    ) -> QueueResult<HoldingsPage> {
        let k = self.keys(sale);
        let mut inv = HOLDINGS.invoke(&k);
        inv.arg(part).arg(cursor).arg(HOLDINGS_PAGE);
        type Reply = (u8, u64, String, String, Vec<String>, i64, Vec<String>);
        let (known, version, kind, next, items, units, unrecorded): Reply =
            self.run("holdings", &inv).await?;
        Ok(HoldingsPage {
            known: known == 1,
            version,
            kind,
            next,
            items,
            units,
            unrecorded,
        })
    }

    /// Every page of `part`, each page's items handed to `take`. The pages are of one moment
    /// only if the sale's version reads the same after them as at the first page (the drift
    /// checker reads it again after the ledger).
    async fn holdings_pages(
        &self,
        sale: SaleId,
        part: &str,
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

    /// Runs a script; `call` names the operation in the call-duration metric.
    async fn run<T: FromRedisValue>(
        &self,
        call: &'static str,
        invocation: &ScriptInvocation<'_>,
    ) -> QueueResult<T> {
        let mut conn = self.conn.clone();
        self.timed(call, invocation.invoke_async(&mut conn)).await
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
            exists.arg(script.script.get_hash());
        }
        let cached: Vec<bool> = self.cmd("script_exists", &exists).await?;
        let mut loaded = 0;
        for (script, cached) in all.iter().zip(cached) {
            if !cached {
                let mut conn = self.conn.clone();
                self.timed("script_load", script.script.load_async(&mut conn))
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

/// A sale's settings as `lua/lib/settings.lua` takes them, as of the ledger's `version`.
fn settings_args(inv: &mut ::redis::ScriptInvocation<'_>, sale: &Sale, version: u64) {
    inv.arg(version)
        .arg(sale.status.as_str())
        .arg(sale.opens_at.timestamp_millis())
        .arg(sale.closes_at.map(|t| t.timestamp_millis()).unwrap_or(0))
        .arg(sale.admission.max_active)
        .arg(sale.per_user_limit)
        .arg(sale.admission.rate_per_minute)
        .arg(sale.stock.kind().as_str())
        .arg(sale.ttls.hold_secs as u64 * 1000)
        .arg(sale.ttls.payment_secs as u64 * 1000);
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
        let k = self.keys(sale.id);
        let mut inv = INIT_SALE.invoke(&k);
        settings_args(&mut inv, sale, settings_version);
        inv.arg(force).arg(if snapshot.reset { 1 } else { 0 });
        match &snapshot.free {
            Stock::Quantity(n) => inv.arg(*n).arg(0),
            Stock::Seats(seats) => inv.arg(0).arg(seats.len()).arg(seats),
        };
        inv.arg(snapshot.live.len());
        for live in &snapshot.live {
            inv.arg(local(live.attempt))
                .arg(live.user.as_str())
                .arg(live.deadline_ms)
                .arg(
                    live.hold
                        .as_ref()
                        .map(|t| hold_record(t, &live.user))
                        .unwrap_or_default(),
                );
        }
        inv.arg(snapshot.bought.len());
        for (user, units) in &snapshot.bought {
            inv.arg(user.as_str()).arg(*units);
        }
        inv.arg(snapshot.buyers.len());
        for buyer in &snapshot.buyers {
            inv.arg(buyer.user.as_str()).arg(local(buyer.attempt)).arg(
                buyer
                    .bought
                    .as_ref()
                    .map(|t| hold_record(t, &buyer.user))
                    .unwrap_or_default(),
            );
        }
        let rebuilt: i64 = self.run("init_sale", &inv).await?;
        Ok(rebuilt == 1)
    }

    /// Joins `asks` (users of `sale`, each with the time of their join, ms) in their order: one
    /// call of `lua/join.lua`, one outcome per ask.
    async fn joins(&self, sale: SaleId, asks: &[(UserId, i64)]) -> QueueResult<Vec<JoinOutcome>> {
        let k = self.keys(sale);
        let mut inv = JOIN.invoke(&k);
        inv.arg(self.tracks_presence());
        for (user, now_ms) in asks {
            inv.arg(user.as_str())
                .arg(local(AttemptId::new(sale)))
                .arg(*now_ms);
        }
        let reply: Vec<Value> = self.run("join", &inv).await?;
        if reply.len() != 8 * asks.len() {
            return Err(protocol("join", &reply));
        }
        let rate = |v: &Value| text(v).parse().unwrap_or(0.0);
        // Eight values a join (the length is checked above).
        let outcome = |join: &[Value]| {
            let (status, attempt, position, waiting) = (&join[0], &join[1], &join[2], &join[3]);
            Ok(match text(status).as_str() {
                "queued" => JoinOutcome::Queued {
                    attempt: attempt_of(sale, &text(attempt))?,
                    position: number(position) as u64,
                    waiting: number(waiting) as u64,
                    measured_rate: rate(&join[4]),
                    configured_rate: rate(&join[5]),
                    serial: number(&join[6]) as u64,
                    epoch: text(&join[7]),
                },
                "active" => JoinOutcome::Active {
                    attempt: attempt_of(sale, &text(attempt))?,
                },
                "unknown" => JoinOutcome::UnknownSale,
                "closed" => JoinOutcome::Closed,
                _ => return Err(protocol("join", &join)),
            })
        };
        reply.chunks_exact(8).map(outcome).collect()
    }

    /// Where `asks` (attempts of `sale`, each with the user who asks) stand: one call of
    /// `lua/position.lua`, one view per ask in their order.
    async fn positions(
        &self,
        sale: SaleId,
        asks: &[(AttemptId, UserId)],
    ) -> QueueResult<Vec<QueueView>> {
        let k = self.keys(sale);
        let mut inv = POSITION.invoke(&k);
        inv.arg(self.tracks_presence());
        for (attempt, user) in asks {
            inv.arg(local(*attempt)).arg(user.as_str());
        }
        let reply: Vec<Value> = self.run("status", &inv).await?;
        let Some((
            [waiting, measured, configured, known, rebuilt, status, sold_out, epoch],
            lookups,
        )) = reply.split_first_chunk::<8>()
        else {
            return Err(protocol("position", &reply));
        };
        if lookups.len() != 5 * asks.len() {
            return Err(protocol("position", &reply));
        }
        let waiting = number(waiting) as u64;
        let measured_rate = text(measured).parse().unwrap_or(0.0);
        let configured_rate = text(configured).parse().unwrap_or(0.0);
        let known_sale = number(known) == 1;
        let rebuilt_at_ms = text(rebuilt).parse().unwrap_or(0);
        let sale_closed = text(status) == SaleStatus::Closed.as_str();
        let sold_out = number(sold_out) == 1;
        let epoch = text(epoch);
        // Five values a lookup (the length is checked above).
        let views = lookups.chunks_exact(5).map(|lookup| {
            let (owner, position, active, abandoned) =
                (&lookup[0], &lookup[1], &lookup[2], &lookup[3]);
            let position = number(position) as u64;
            let serial = number(&lookup[4]) as u64;
            QueueView {
                owner: UserId::parse(&text(owner)).ok(),
                position: (position > 0).then_some(position),
                waiting,
                active: number(active) == 1,
                measured_rate,
                configured_rate,
                known_sale,
                rebuilt_at_ms,
                abandoned: number(abandoned) == 1,
                sale_closed,
                sold_out,
                serial: (serial > 0).then_some(serial),
                epoch: epoch.clone(),
            }
        });
        Ok(views.collect())
    }
}

fn classify(e: ::redis::RedisError) -> QueueError {
    let unreachable =
        e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal();
    let server_gave_up =
        matches!(e.kind(), ::redis::ErrorKind::Server(_)) && e.is_unrecoverable_error();
    if unreachable || server_gave_up {
        QueueError::Unavailable(e.to_string())
    } else {
        QueueError::Protocol(e.to_string())
    }
}

fn protocol(what: &str, v: &impl std::fmt::Debug) -> QueueError {
    QueueError::Protocol(format!("unexpected reply to {what}: {v:?}"))
}

fn text(v: &Value) -> String {
    String::from_redis_value(v.clone()).unwrap_or_default()
}

fn number(v: &Value) -> i64 {
    i64::from_redis_value(v.clone()).unwrap_or_default()
}

fn attempt_of(sale: SaleId, local: &str) -> QueueResult<AttemptId> {
    Uuid::parse_str(local)
        .map(|local| AttemptId { sale, local })
        .map_err(|_| protocol("attempt id", &local))
}

/// One admitted attempt as admit_batch.lua lists it: attempt, serial, user, deadline (ms).
fn admitted_of(sale: SaleId, entry: &[String]) -> QueueResult<Admitted> {
    let [attempt, seq, user, deadline] = entry else {
        return Err(protocol("admitted", &entry));
    };
    Ok(Admitted {
        attempt: attempt_of(sale, attempt)?,
        seq: seq.parse().map_err(|_| protocol("seq", seq))?,
        user: UserId::parse(user).map_err(|_| protocol("owner", user))?,
        deadline_ms: deadline.parse().unwrap_or_default(),
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
        let mut inv = PUT_SETTINGS.invoke(&self.keys(sale.id));
        settings_args(&mut inv, sale, version);
        inv.arg(if forced { 1 } else { 0 });
        let held: i64 = self.run("put_settings", &inv).await?;
        Ok(u64::try_from(held).ok())
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

    async fn join(&self, sale: SaleId, user: &UserId, now_ms: i64) -> QueueResult<JoinOutcome> {
        let queue = self.clone();
        let call = move |asks: Vec<(UserId, i64)>| {
            let queue = queue.clone();
            async move { queue.joins(sale, &asks).await }
        };
        let ask = (user.clone(), now_ms);
        self.joins.ask(sale, ask, self.timeout, call).await
    }

    async fn view(&self, attempt: AttemptId, user: &UserId) -> QueueResult<QueueView> {
        let sale = attempt.sale;
        let queue = self.clone();
        let call = move |asks: Vec<(AttemptId, UserId)>| {
            let queue = queue.clone();
            async move { queue.positions(sale, &asks).await }
        };
        let ask = (attempt, user.clone());
        self.views.ask(sale, ask, self.timeout, call).await
    }

    async fn leave(&self, attempt: AttemptId, user: &UserId) -> QueueResult<LeaveOutcome> {
        let k = self.keys(attempt.sale);
        let mut inv = LEAVE.invoke(&k);
        inv.arg(local(attempt)).arg(user.as_str());
        let reply: String = self.run("leave", &inv).await?;
        match reply.as_str() {
            "left" => Ok(LeaveOutcome::Left),
            "not_queued" => Ok(LeaveOutcome::NotQueued),
            "not_found" => Ok(LeaveOutcome::NotFound),
            _ => Err(protocol("leave", &reply)),
        }
    }

    async fn waiting_of(&self, sale: SaleId, user: &UserId) -> QueueResult<Option<WaitingPlace>> {
        let k = self.keys(sale);
        let mut inv = WAITING_OF.invoke(&k);
        inv.arg(user.as_str());
        let reply: Vec<String> = self.run("waiting_of", &inv).await?;
        if reply.is_empty() {
            return Ok(None);
        }
        let [attempt, position, waiting] = reply.as_slice() else {
            return Err(protocol("waiting_of", &reply.join(" ")));
        };
        let number = |v: &str| v.parse::<u64>().map_err(|_| protocol("waiting_of", &v));
        let local = Uuid::parse_str(attempt).map_err(|_| protocol("waiting_of", &attempt))?;
        Ok(Some(WaitingPlace {
            attempt: AttemptId { sale, local },
            position: number(position)?,
            waiting: number(waiting)?,
        }))
    }

    async fn refresh(
        &self,
        sale: SaleId,
        epoch: &str,
        departed: u64,
        seen: &[u64],
    ) -> QueueResult<LineDigest> {
        let k = self.keys(sale);
        let mut inv = REFRESH.invoke(&k);
        inv.arg(self.tracks_presence())
            .arg(epoch)
            .arg(departed)
            .arg(MAX_DEPARTURES);
        if self.abandon_after_ms > 0 {
            inv.arg(seen);
        }
        let reply: Vec<Value> = self.run("refresh", &inv).await?;
        let Some((figures, departures)) = reply.split_first_chunk::<14>() else {
            return Err(protocol("refresh", &reply));
        };
        let [known, epoch, head, last, waiting, measured, configured, rebuilt, status, sold_out, from, drawn_from, first_drawn, last_drawn] =
            figures;
        let rate = |v: &Value| text(v).parse().unwrap_or(0.0);
        Ok(LineDigest {
            figures: LineFigures {
                known: number(known) == 1,
                epoch: text(epoch),
                head: number(head) as u64,
                last: number(last) as u64,
                waiting: number(waiting).max(0) as u64,
                measured_rate: rate(measured),
                configured_rate: rate(configured),
                rebuilt_at_ms: text(rebuilt).parse().unwrap_or(0),
                sale_closed: text(status) == SaleStatus::Closed.as_str(),
                sold_out: number(sold_out) == 1,
            },
            from: number(from) as u64,
            departures: departures
                .iter()
                .map(|d| text(d).parse().unwrap_or(0))
                .collect(),
            renumbered: (number(last_drawn) > 0).then(|| Renumbering {
                from_epoch: text(drawn_from),
                first: number(first_drawn) as u64,
                last: number(last_drawn) as u64,
            }),
        })
    }

    async fn seen(&self, sale: SaleId, epoch: &str, serials: &[u64]) -> QueueResult<()> {
        if self.abandon_after_ms == 0 || serials.is_empty() {
            return Ok(());
        }
        let k = self.keys(sale);
        let mut inv = SEEN.invoke(&k);
        inv.arg(epoch).arg(serials);
        self.run("seen", &inv).await
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
        let k = self.keys(sale);
        let mut inv = LEASE.invoke(&k);
        inv.arg(holder).arg(ttl_ms);
        let fence: u64 = self.run("lease", &inv).await?;
        Ok((fence > 0).then(|| Lease {
            value: format!("{fence}:{holder}"),
            fence,
        }))
    }

    async fn release_lease(&self, sale: SaleId, holder: &str) -> QueueResult<bool> {
        let mut inv = RELEASE_LEASE.invoke(&self.keys(sale));
        inv.arg(holder);
        let released: i64 = self.run("release_lease", &inv).await?;
        Ok(released == 1)
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

    async fn admit_batch(
        &self,
        sale: SaleId,
        lease: &Lease,
        wanted: u32,
        admission_ttl_ms: u64,
        measured_rate: f64,
    ) -> QueueResult<AdmitOutcome> {
        let k = self.keys(sale);
        let mut inv = ADMIT_BATCH.invoke(&k);
        inv.arg(&lease.value)
            .arg(wanted)
            .arg(admission_ttl_ms)
            .arg(FORGOTTEN_ACTIVE_GRACE_MS)
            .arg(format!("{measured_rate:.3}"));
        let reply: Vec<Value> = self.run("admit", &inv).await?;
        let Some((status, rest)) = reply.split_first() else {
            return Err(protocol("admit_batch", &reply));
        };
        let fresh = match text(status).as_str() {
            "lease_lost" => return Ok(AdmitOutcome::LeaseLost),
            "ok" => true,
            "unrecorded" => false,
            _ => return Err(protocol("admit_batch", &reply)),
        };
        let mut admitted = Vec::with_capacity(rest.len() / 4);
        for chunk in rest.chunks_exact(4) {
            let entry: Vec<String> = chunk.iter().map(text).collect();
            admitted.push(admitted_of(sale, &entry)?);
        }
        Ok(if fresh {
            AdmitOutcome::Admitted(admitted)
        } else {
            AdmitOutcome::Unrecorded(admitted)
        })
    }

    async fn admissions_recorded(&self, sale: SaleId, first: AttemptId) -> QueueResult<()> {
        let mut inv = RECORDED.invoke(&self.keys(sale));
        inv.arg(local(first));
        let _: i64 = self.run("admissions_recorded", &inv).await?;
        Ok(())
    }

    async fn unadmit(&self, sale: SaleId, admitted: &[Admitted]) -> QueueResult<()> {
        if admitted.is_empty() {
            return Ok(());
        }
        let k = self.keys(sale);
        let mut inv = UNADMIT.invoke(&k);
        for a in admitted {
            inv.arg(local(a.attempt)).arg(a.seq).arg(a.user.as_str());
        }
        let _: i64 = self.run("unadmit", &inv).await?;
        Ok(())
    }

    async fn hold(
        &self,
        attempt: AttemptId,
        user: &UserId,
        take: &Take,
    ) -> QueueResult<HoldOutcome> {
        let k = self.keys(attempt.sale);
        let mut inv = HOLD.invoke(&k);
        inv.arg(local(attempt)).arg(user.as_str());
        match take {
            Take::Quantity(n) => inv.arg("q").arg(*n).arg(""),
            Take::Seats(seats) => inv.arg("s").arg(seats.len()).arg(seats.join(",")),
        };
        let reply: Vec<Value> = self.run("hold", &inv).await?;
        let status = reply.first().map(text).unwrap_or_default();
        let detail = reply.get(1);
        Ok(match status.as_str() {
            "held" => HoldOutcome::Held {
                take: parse_take(&detail.map(text).unwrap_or_default())?,
            },
            "not_admitted" => HoldOutcome::NotAdmitted,
            "limit" => HoldOutcome::LimitReached {
                already: detail.map(number).unwrap_or_default() as u32,
            },
            "sold_out" => HoldOutcome::SoldOut {
                remaining: detail.map(number).unwrap_or_default().max(0) as u32,
            },
            "seat_taken" => HoldOutcome::SeatTaken {
                seat: detail.map(text).unwrap_or_default(),
            },
            "wrong_kind" => HoldOutcome::WrongKind,
            _ => return Err(protocol("hold", &reply)),
        })
    }

    async fn restore(
        &self,
        attempt: AttemptId,
        keep_slot_until_ms: Option<i64>,
    ) -> QueueResult<bool> {
        let mut inv = RESTORE.invoke(&self.keys(attempt.sale));
        inv.arg(local(attempt)).arg(
            keep_slot_until_ms
                .map(|ms| ms.to_string())
                .unwrap_or_default(),
        );
        let restored: i64 = self.run("restore", &inv).await?;
        Ok(restored == 1)
    }

    async fn adjust_stock(&self, sale: SaleId, change: &StockChange) -> QueueResult<bool> {
        let mut inv = ADJUST_STOCK.invoke(&self.keys(sale));
        inv.arg(change.field());
        match change {
            StockChange::Add(n) | StockChange::Withdraw(n) => inv.arg(*n),
            StockChange::AddSeats(seats) | StockChange::WithdrawSeats(seats) => inv.arg(seats),
        };
        let applied: i64 = self.run("adjust_stock", &inv).await?;
        Ok(applied == 1)
    }

    async fn apply_sync(&self, sync: &PendingSync) -> QueueResult<bool> {
        let mut inv = APPLY_SYNC.invoke(&self.keys(sync.attempt.sale));
        inv.arg(sync.id)
            .arg(sync.change.as_str())
            .arg(local(sync.attempt))
            .arg(SYNCED_KEEP_MS);
        let applied: i64 = self.run(sync.change.as_str(), &inv).await?;
        Ok(applied == 1)
    }

    async fn unsynced(&self, sale: SaleId, ids: &[i64]) -> QueueResult<Vec<i64>> {
        let k = self.keys(sale);
        let mut missing = Vec::new();
        for chunk in ids.chunks(UNSYNCED_CHUNK) {
            let mut inv = UNSYNCED.invoke(&k);
            inv.arg(chunk);
            let part: Vec<i64> = self.run("unsynced", &inv).await?;
            missing.extend(part);
        }
        Ok(missing)
    }

    async fn forget_waiting(&self, sale: SaleId) -> QueueResult<u64> {
        let k = self.keys(sale);
        let inv = FORGET_WAITING.invoke(&k);
        let (waiting, first, last, user_buckets): (u64, i64, i64, i64) =
            self.run("forget_waiting", &inv).await?;
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
        let k = self.keys(sale);
        let inv = STATS.invoke(&k);
        let (waiting, active, remaining, known, version): (u64, u64, u64, u8, u64) =
            self.run("stats", &inv).await?;
        Ok(QueueStats {
            waiting,
            active,
            remaining,
            known: known == 1,
            version,
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
        for entry in first.unrecorded.chunks_exact(4) {
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
        let k = self.keys(sale);
        let mut inv = ABANDON.invoke(&k);
        inv.arg(self.abandon_after_ms).arg(limit);
        let n: u64 = self.run("abandon", &inv).await?;
        Ok(n)
    }

    async fn draw_lottery(
        &self,
        sale: SaleId,
        seed: &str,
        budget: Duration,
    ) -> QueueResult<LotteryDraw> {
        let k = self.keys(sale);
        let mut inv = LOTTERY.invoke(&k);
        inv.arg(seed).arg(LOTTERY_CHUNK);
        // A step a call until the draw is made or the budget is spent: each call makes
        // progress (or finds the draw made).
        let deadline = std::time::Instant::now() + budget;
        loop {
            let n: i64 = self.run("lottery", &inv).await?;
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
    /// A script declared and left out of [`super::scripts`] would not be loaded ahead.
    #[test]
    fn every_declared_script_is_loaded_ahead() {
        let declarations = include_str!("redis.rs")
            .lines()
            .filter(|l| {
                ["lua!(", "queue_lua!(", "changes_lua!("]
                    .iter()
                    .any(|m| l.starts_with(m))
            })
            .count();
        assert_eq!(declarations, super::scripts().len());
    }

    /// The names in a script's `KEYS` header, in order: `N name` pairs, parenthesised notes
    /// left out, up to its `ARGV` (or the end of the header). A script that takes the keys
    /// of `lua/lib/changes.lua` says so, and may take more after them ("then 8 synced").
    fn header_keys(file: &str) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("--"))
            .map(|l| l.trim_start_matches('-').trim())
            .collect::<Vec<_>>()
            .join(" ");
        let keys = &header[header.find("KEYS:").expect("a KEYS header") + 5..];
        let keys = &keys[..keys.find("ARGV").unwrap_or(keys.len())];
        let (mut names, mut depth, mut rest) = (Vec::new(), 0, String::new());
        for c in keys.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => rest.push(c),
                _ => {}
            }
        }
        if rest.contains("as lua/lib/changes.lua") {
            names = header_keys("lib/changes.lua");
        }
        let words: Vec<&str> = rest
            .split(|c: char| c.is_whitespace() || c == ',' || c == '.')
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            if pair[0].parse::<usize>() == Ok(names.len() + 1)
                && pair[1].chars().all(|c| c.is_ascii_lowercase() || c == '_')
            {
                names.push(pair[1].to_owned());
            }
        }
        names
    }

    /// Each script's keys, as the code passes them, are the names of its header, in order:
    /// a key added to a script and not to its call (or the other way round) fails here.
    #[test]
    fn each_script_takes_the_keys_its_header_names_in_order() {
        assert_eq!(
            header_keys("hold.lua"),
            ["meta", "active", "holds", "stock", "seats", "bought"],
            "the header reader reads a header"
        );
        for script in super::scripts() {
            assert_eq!(
                header_keys(script.file),
                script.keys,
                "lua/{}: its KEYS header and the keys its call passes",
                script.file
            );
        }
    }
}
