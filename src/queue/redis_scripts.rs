//! Every script of `lua/` as the Redis store calls it: the keys of a sale it takes, the type of
//! its arguments and the type of its reply ([`super::redis_script`]), each in the order of the
//! script's header (`KEYS:`, `ARGV:`, `REPLY:`), which the unit tests below check.

use std::marker::PhantomData;
use std::sync::LazyLock;

use ::redis::{Script, ScriptInvocation};

use super::redis_script::{args, reply, Args, Counted, Each, Nested, Reply, Rest};

/// A script of `lua/`, with the keys of a sale it takes in its header's order, the type of its
/// arguments `A` and the type of its reply `R`: a call names the sale and gives an `A`
/// (the Redis store's `call`), so neither a key list nor an argument list nor a
/// reply can fall out of line with its script.
pub(super) struct Lua<A, R> {
    /// Its file under `lua/` (whose header the unit tests read; errors name it).
    pub file: &'static str,
    /// The names of its keys (`SaleKeys::key`), in the order of its `KEYS`.
    pub keys: &'static [&'static str],
    pub script: LazyLock<Script>,
    types: PhantomData<fn(&A) -> R>,
}

impl<A: Args, R: Reply> Lua<A, R> {
    /// A call of the script with `args` on the keys `key` names (the sale's).
    pub fn invoke(&self, key: impl Fn(&str) -> String, args: &A) -> ScriptInvocation<'_> {
        let mut inv = self.script.prepare_invoke();
        for name in self.keys {
            inv.key(key(name));
        }
        args.push(&mut inv);
        inv
    }
}

/// What the loader and the tests need of any script, whatever its types.
pub(super) trait Declared: Sync {
    #[cfg_attr(not(test), allow(dead_code))]
    fn file(&self) -> &'static str;
    fn script(&self) -> &Script;
    #[cfg_attr(not(test), allow(dead_code))]
    fn keys(&self) -> &'static [&'static str];
    #[cfg_attr(not(test), allow(dead_code))]
    fn args_shape(&self) -> String;
    #[cfg_attr(not(test), allow(dead_code))]
    fn reply_shape(&self) -> String;
}

impl<A: Args, R: Reply> Declared for Lua<A, R> {
    fn file(&self) -> &'static str {
        self.file
    }
    fn script(&self) -> &Script {
        &self.script
    }
    fn keys(&self) -> &'static [&'static str] {
        self.keys
    }
    fn args_shape(&self) -> String {
        A::shape()
    }
    fn reply_shape(&self) -> String {
        R::shape()
    }
}

macro_rules! lua {
    ($name:ident: $args:ty => $reply:ty, $file:literal, $keys:expr) => {
        pub(super) static $name: Lua<$args, $reply> = Lua {
            file: $file,
            keys: &$keys,
            script: LazyLock::new(|| Script::new(include_str!(concat!("../../lua/", $file)))),
            types: PhantomData,
        };
    };
    // A script with libraries of `lua/lib/` first (a layout, or functions).
    ($name:ident: $args:ty => $reply:ty, $($lib:literal),+ => $file:literal, $keys:expr) => {
        pub(super) static $name: Lua<$args, $reply> = Lua {
            file: $file,
            keys: &$keys,
            script: LazyLock::new(|| {
                Script::new(concat!(
                    $(include_str!(concat!("../../lua/lib/", $lib)),)+
                    include_str!(concat!("../../lua/", $file))
                ))
            }),
            types: PhantomData,
        };
    };
}
/// A script that touches the waiting queue: `lua/lib/queue.lua` (its layout) comes first.
macro_rules! queue_lua {
    ($name:ident: $args:ty => $reply:ty, $file:literal, $keys:expr) => {
        lua!($name: $args => $reply, "queue.lua" => $file, $keys);
    };
}
/// A script that applies a transition's change: `lua/lib/seatlog.lua` and
/// `lua/lib/changes.lua` come first.
macro_rules! changes_lua {
    ($name:ident: $args:ty => $reply:ty, $file:literal, $keys:expr) => {
        lua!($name: $args => $reply, "seatlog.lua", "changes.lua" => $file, $keys);
    };
}
/// A script that takes a hold: `lua/lib/seatlog.lua` and `lua/lib/holding.lua` come first.
macro_rules! holding_lua {
    ($name:ident: $args:ty => $reply:ty, $file:literal, $keys:expr) => {
        lua!($name: $args => $reply, "seatlog.lua", "holding.lua" => $file, $keys);
    };
}

args!(
    /// A script that takes no arguments.
    struct NoArgs {}
);

args!(
    /// The sale's settings as `lua/lib/settings.lua` takes them.
    struct SettingsArgs {
        /// The ledger's version of them (an older write is left out).
        version: u64,
        status: &'static str,
        opens_at_ms: i64,
        /// 0: no closing time.
        closes_at_ms: i64,
        max_active: u32,
        per_user_limit: u32,
        rate_per_minute: u32,
        kind: &'static str,
        hold_ttl_ms: u64,
        payment_ttl_ms: u64,
        /// "1": a join claims (an instant sale).
        instant: &'static str,
    }
);

args!(
    struct JoinArgs {
        /// "1" when signs of life are tracked (abandonment is on).
        presence: &'static str,
        /// The joins' time (the earliest of them).
        now_ms: i64,
        /// "1": the caller's ledger is behind its claims (an instant sale's line fronts).
        front: &'static str,
        /// Until when a claim made now stays in the active set awaiting its record.
        claim_until_ms: i64,
        join: Each<JoinAsk>,
    }
);
args!(
    struct JoinAsk {
        user: String,
        /// The attempt (32 hex) to use if the user has no live attempt.
        attempt: String,
        /// The key of the user's bucket in a line of layout 2 (`user_bucket`), made here so
        /// the script needs no SHA-1.
        bucket_key: String,
    }
);
reply!(
    struct JoinReply {
        measured_rate: f64,
        configured_rate: f64,
        epoch: String,
        join: Each<Joined>,
    }
);
reply!(
    struct Joined {
        /// queued | active (already admitted, or bought) | unknown (no such sale) | closed |
        /// claimed | sold_out | limit (an instant sale).
        status: String,
        /// '' when it is the attempt sent.
        attempt: String,
        position: i64,
        waiting: i64,
        /// 0 unless queued.
        serial: i64,
    }
);
queue_lua!(
    JOIN: JoinArgs => JoinReply,
    "join.lua",
    ["meta", "seq", "gone", "users", "active", "seen", "bought", "stock", "sold", "owners", "claims"]
);

args!(
    struct PositionArgs {
        presence: &'static str,
        lookup: Each<Lookup>,
    }
);
args!(
    struct Lookup {
        attempt: String,
        /// The user who asks.
        user: String,
    }
);
reply!(
    struct PositionReply {
        waiting: i64,
        measured_rate: f64,
        configured_rate: f64,
        /// 1 when the store holds the sale.
        known: i64,
        /// 0: never rebuilt.
        rebuilt_at_ms: i64,
        /// '' when unknown.
        status: String,
        sold_out: i64,
        epoch: String,
        lookup: Each<Place>,
    }
);
reply!(
    struct Place {
        /// '' when unknown to the store, or not this user's waiting attempt.
        owner: String,
        /// 0: not queued.
        position: i64,
        active: i64,
        abandoned: i64,
        /// 0: not queued.
        serial: i64,
    }
);
queue_lua!(
    POSITION: PositionArgs => PositionReply,
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

args!(
    struct LeaveArgs {
        attempt: String,
        user: String,
    }
);
reply!(
    struct Left {
        /// left | not_queued | not_found.
        outcome: String,
    }
);
queue_lua!(
    LEAVE: LeaveArgs => Left,
    "leave.lua",
    ["meta", "gone", "seen", "owners", "left"]
);

args!(
    struct AdmitArgs {
        /// "<fence>:<holder>": a stale admitter admits nobody.
        lease: String,
        wanted: u32,
        admission_ttl_ms: u64,
        /// How long past its deadline a forgotten active entry stays.
        grace_ms: u64,
        /// Admissions per minute, for the status answers' expected wait.
        measured_rate: String,
        /// Only serials below this one are admitted (0: any): a later phase's pre-queue waits
        /// for the phase's start.
        below: u64,
    }
);
reply!(
    struct AdmitReply {
        /// lease_lost | ok | unrecorded (an earlier batch, still to be recorded).
        status: String,
        admitted: Each<AdmittedEntry>,
    }
);
reply!(
    struct AdmittedEntry {
        attempt: String,
        serial: u64,
        user: String,
        deadline_ms: i64,
    }
);
reply!(
    struct AdmittedList {
        admitted: Each<AdmittedEntry>,
    }
);
queue_lua!(
    ADMIT_BATCH: AdmitArgs => AdmitReply,
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
        "unrecorded",
        "stock",
        "bought",
        "sold"
    ]
);

args!(
    struct UnadmitArgs {
        admitted: Each<Unadmitted>,
    }
);
args!(
    struct Unadmitted {
        attempt: String,
        serial: u64,
        user: String,
    }
);
reply!(
    struct UnadmitReply {
        /// How many it took back (no caller needs the count).
        #[allow(dead_code)]
        unadmitted: i64,
    }
);
queue_lua!(
    UNADMIT: UnadmitArgs => UnadmitReply,
    "unadmit.lua",
    ["meta", "seq", "gone", "active", "unrecorded", "stock", "bought", "sold"]
);

args!(
    struct ClaimsRecordedArgs {
        /// The claims' attempts (32 hex).
        attempt: Rest<String>,
    }
);
reply!(
    struct ClaimsRecorded {
        /// How many were still awaiting their record (no caller needs the count).
        #[allow(dead_code)]
        recorded: i64,
    }
);
lua!(CLAIMS_RECORDED: ClaimsRecordedArgs => ClaimsRecorded, "claims_recorded.lua", ["meta", "active", "claims"]);

args!(
    struct StaleClaimsArgs {
        now_ms: i64,
        /// The most to return.
        most: u32,
    }
);
reply!(
    struct StaleClaimsReply {
        claim: Each<ClaimEntry>,
    }
);
reply!(
    struct ClaimEntry {
        attempt: String,
        user: String,
        serial: i64,
    }
);
lua!(STALE_CLAIMS: StaleClaimsArgs => StaleClaimsReply, "stale_claims.lua", ["active", "claims", "owners"]);

args!(
    struct AbandonArgs {
        idle_ms: u64,
        limit: u32,
    }
);
reply!(
    struct Abandoned {
        abandoned: u64,
    }
);
queue_lua!(
    ABANDON: AbandonArgs => Abandoned,
    "abandon.lua",
    ["meta", "seen", "gone", "abandoned", "left"]
);

args!(
    struct LotteryArgs {
        seed: String,
        /// Serials (the scan) or users (the placing) a call takes.
        chunk: u32,
        /// The draw orders the serials from this one on (0: the whole line).
        from: u64,
    }
);
reply!(
    struct Drawn {
        /// -1: drawn before (or closed); -2: under way; else how many this call ordered.
        drawn: i64,
    }
);
queue_lua!(
    LOTTERY: LotteryArgs => Drawn,
    "lottery.lua",
    ["meta", "seq", "gone", "seen"]
);

args!(
    struct WaitingOfArgs {
        user: String,
    }
);
reply!(
    struct WaitingOfReply {
        /// None of the three when the user does not wait.
        attempt: Option<String>,
        position: Option<u64>,
        waiting: Option<u64>,
    }
);
queue_lua!(
    WAITING_OF: WaitingOfArgs => WaitingOfReply,
    "waiting_of.lua",
    ["meta", "seq", "gone"]
);

reply!(
    struct StatsReply {
        waiting: u64,
        active: u64,
        /// Units or free seats.
        remaining: u64,
        known: i64,
        version: u64,
    }
);
queue_lua!(
    STATS: NoArgs => StatsReply,
    "stats.lua",
    ["meta", "seq", "gone", "active", "stock", "seats"]
);

reply!(
    struct Forgotten {
        waiting: u64,
        /// The serial buckets to delete, first to last (0, -1: none).
        first_bucket: i64,
        last_bucket: i64,
        user_buckets: i64,
    }
);
queue_lua!(
    FORGET_WAITING: NoArgs => Forgotten,
    "forget_waiting.lua",
    ["meta", "seq", "gone", "seen"]
);

args!(
    struct RefreshArgs {
        presence: &'static str,
        /// The caller's numbering and how many of its departures the caller has.
        epoch: String,
        departed: u64,
        /// The most departures to send.
        most: usize,
        /// Waiting users who asked (when presence is tracked).
        seen: Rest<u64>,
    }
);
reply!(
    struct RefreshReply {
        known: i64,
        epoch: String,
        head: i64,
        last: i64,
        waiting: i64,
        measured_rate: f64,
        configured_rate: f64,
        rebuilt_at_ms: i64,
        status: String,
        sold_out: i64,
        /// The index in the departure log of the first one sent (0: start again).
        from: i64,
        /// The numbering the lottery's draw made this one from, and the serials it renumbered
        /// ('', 0, 0 when this numbering is not the draw's).
        drawn_from: String,
        first_drawn: i64,
        last_drawn: i64,
        departures: Rest<u64>,
    }
);
queue_lua!(
    REFRESH: RefreshArgs => RefreshReply,
    "refresh.lua",
    ["meta", "seq", "gone", "seen", "departed", "stock", "seats", "holds"]
);

args!(
    struct SeenArgs {
        epoch: String,
        serials: Rest<u64>,
    }
);
queue_lua!(SEEN: SeenArgs => (), "seen.lua", ["meta", "seen"]);

args!(
    struct LeaseArgs {
        holder: String,
        ttl_ms: u64,
    }
);
reply!(
    struct Fence {
        /// > 0 while the caller holds the lease.
        fence: u64,
    }
);
lua!(LEASE: LeaseArgs => Fence, "lease.lua", ["lease", "fence"]);

args!(
    struct ReleaseArgs {
        holder: String,
    }
);
reply!(
    struct Released {
        released: i64,
    }
);
lua!(RELEASE_LEASE: ReleaseArgs => Released, "release_lease.lua", ["lease"]);

args!(
    struct HoldArgs {
        attempt: String,
        user: String,
        /// q (units) or s (seats).
        kind: &'static str,
        quantity: usize,
        /// "A1,A2".
        seats: String,
    }
);
reply!(
    struct HoldReply {
        /// held | not_admitted | limit | sold_out | seat_taken | wrong_kind.
        status: String,
        /// The record held, the units already bought, what remains, or the seat taken.
        detail: Option<String>,
    }
);
holding_lua!(
    HOLD: HoldArgs => HoldReply,
    "hold.lua",
    ["meta", "active", "holds", "stock", "seats", "bought", "seatlog"]
);

args!(
    struct HoldBestArgs {
        attempt: String,
        user: String,
        count: u32,
        /// '' any.
        category: String,
        /// '' any.
        section: String,
        /// "1" when a single free seat may be left between taken ones.
        single_gaps: &'static str,
    }
);
holding_lua!(
    HOLD_BEST: HoldBestArgs => HoldReply,
    "hold_best.lua",
    ["meta", "active", "holds", "stock", "seats", "bought", "seatlog", "best"]
);

args!(
    struct LoadBestArgs {
        /// '' every category.
        category: String,
        /// "<section>|<nearest, 1-based>|<seat,seat,...>", nearest the stage first.
        blocks: Rest<String>,
    }
);
reply!(
    struct LoadedBest {
        /// 1 if loaded now (no caller needs to know).
        #[allow(dead_code)]
        loaded: i64,
    }
);
lua!(LOAD_BEST: LoadBestArgs => LoadedBest, "load_best.lua", ["best"]);

args!(
    struct SeatChangesArgs {
        since: u64,
        epoch: String,
    }
);
reply!(
    struct SeatChangesReply {
        known: i64,
        version: u64,
        epoch: String,
        /// 1: read the holdings whole.
        whole: i64,
        /// "<version>|<letter>|<seat,seat>", oldest first.
        changes: Vec<String>,
    }
);
lua!(SEAT_CHANGES: SeatChangesArgs => SeatChangesReply, "seat_changes.lua", ["meta", "seatlog"]);

args!(
    struct RestoreArgs {
        attempt: String,
        /// Until when (ms) the active slot stays, or '' to free it.
        keep_slot_until_ms: String,
    }
);
reply!(
    struct Restored {
        restored: i64,
    }
);
changes_lua!(
    RESTORE: RestoreArgs => Restored,
    "restore.lua",
    ["meta", "holds", "stock", "seats", "bought", "active", "sold", "seatlog"]
);

args!(
    struct AdjustArgs {
        /// add | withdraw | add_seats | withdraw_seats.
        change: &'static str,
        /// The number of units, or the seats.
        amount: Rest<String>,
    }
);
reply!(
    struct Adjusted {
        applied: i64,
    }
);
changes_lua!(
    ADJUST_STOCK: AdjustArgs => Adjusted,
    "adjust_stock.lua",
    ["meta", "holds", "stock", "seats", "bought", "active", "sold", "seatlog"]
);

args!(
    struct ApplySyncArgs {
        id: i64,
        /// restore | finish | extend.
        change: &'static str,
        attempt: String,
        keep_ms: u64,
    }
);
reply!(
    struct Applied {
        applied: i64,
    }
);
changes_lua!(
    APPLY_SYNC: ApplySyncArgs => Applied,
    "apply_sync.lua",
    [
        "meta", "holds", "stock", "seats", "bought", "active", "sold", "seatlog", "synced"
    ]
);

args!(
    struct UnsyncedArgs {
        ids: Rest<i64>,
    }
);
reply!(
    struct Unsynced {
        missing: Rest<i64>,
    }
);
lua!(UNSYNCED: UnsyncedArgs => Unsynced, "unsynced.lua", ["synced"]);

args!(
    struct HoldingsArgs {
        /// first | seats | active | bought.
        part: &'static str,
        cursor: String,
        page: usize,
    }
);
reply!(
    struct HoldingsReply {
        known: i64,
        version: u64,
        kind: String,
        /// '0' when the part is read.
        next: String,
        /// Seats, (attempt, hold record) pairs or (user, units) pairs.
        items: Vec<String>,
        /// Free units (the first page).
        units: i64,
        /// The admission batch not yet recorded (the first page).
        unrecorded: Nested<AdmittedList>,
    }
);
lua!(
    HOLDINGS: HoldingsArgs => HoldingsReply,
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

args!(
    struct InitArgs {
        settings: SettingsArgs,
        /// "1", "0", or "v<version>" (see the script).
        force: String,
        /// 1: the sale existed before, so places in its queue were lost.
        reset: u32,
        free_units: u32,
        seats: Counted<Rest<String>>,
        live: Counted<Each<LiveArgs>>,
        bought: Counted<Each<BoughtArgs>>,
        buyers: Counted<Each<BuyerArgs>>,
    }
);
args!(
    struct LiveArgs {
        attempt: String,
        user: String,
        deadline_ms: i64,
        /// Its hold record ('' if none).
        hold: String,
    }
);
args!(
    struct BoughtArgs {
        user: String,
        units: u32,
    }
);
args!(
    struct BuyerArgs {
        user: String,
        /// Their CONFIRMED attempt.
        attempt: String,
        /// What it bought, as a hold record ('' if none).
        bought: String,
    }
);
reply!(
    struct Rebuilt {
        rebuilt: i64,
    }
);
lua!(INIT_SALE: InitArgs => Rebuilt, "queue.lua", "settings.lua", "seatlog.lua" => "init_sale.lua", ["meta", "stock", "seats", "active", "holds", "owners", "users", "bought", "unrecorded", "sold", "seatlog"]);

args!(
    struct PutSettingsArgs {
        settings: SettingsArgs,
        forced: u32,
    }
);
reply!(
    struct HeldVersion {
        /// -1 when the store does not hold the sale.
        version: i64,
    }
);
lua!(PUT_SETTINGS: PutSettingsArgs => HeldVersion, "settings.lua" => "put_settings.lua", ["meta"]);

args!(
    struct RecordedArgs {
        /// The batch's first attempt.
        first: String,
    }
);
reply!(
    struct Recorded {
        /// 1 when the batch was forgotten now (no caller needs to know).
        #[allow(dead_code)]
        forgotten: i64,
    }
);
lua!(RECORDED: RecordedArgs => Recorded, "recorded.lua", ["unrecorded"]);

/// Every script above: the store puts them in Redis's script cache ahead of the calls (a unit
/// test checks the list against the declarations).
pub(super) fn scripts() -> [&'static dyn Declared; 28] {
    [
        &JOIN,
        &CLAIMS_RECORDED,
        &STALE_CLAIMS,
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
        &HOLD_BEST,
        &LOAD_BEST,
        &SEAT_CHANGES,
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

#[cfg(test)]
mod tests {
    /// A script declared and left out of [`super::scripts`] would not be loaded ahead.
    #[test]
    fn every_declared_script_is_loaded_ahead() {
        let declarations = include_str!("redis_scripts.rs")
            .lines()
            .filter(|l| {
                ["lua!(", "queue_lua!(", "changes_lua!(", "holding_lua!("]
                    .iter()
                    .any(|m| l.starts_with(m))
            })
            .count();
        assert_eq!(declarations, super::scripts().len());
    }

    fn header(file: &str) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        text.lines()
            .take_while(|l| l.starts_with("--"))
            .map(str::to_owned)
            .collect()
    }

    /// The names in a script's `KEYS` header, in order: `N name` pairs, parenthesised notes
    /// left out, up to its `ARGV` (or the end of the header). A script that takes the keys
    /// of a library (`as lua/lib/changes.lua`) says so, and may take more after them
    /// ("then 9 synced").
    fn header_keys(file: &str) -> Vec<String> {
        let header: String = header(file)
            .iter()
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
        if let Some(at) = rest.find("as lua/lib/") {
            let lib = rest[at + 11..]
                .split_whitespace()
                .next()
                .unwrap_or_default();
            names = header_keys(&format!("lib/{}", lib.trim_end_matches(',')));
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

    /// The shape on a script's `-- <label>: ` line.
    fn header_line(file: &str, label: &str) -> Option<String> {
        let prefix = format!("-- {label}: ");
        header(file)
            .iter()
            .find_map(|l| l.strip_prefix(&prefix).map(|s| s.trim().to_owned()))
    }

    /// Each script's keys, as the code passes them, are the names of its header, in order:
    /// a key added to a script and not to its call (or the other way round) fails here.
    #[test]
    fn each_script_takes_the_keys_its_header_names_in_order() {
        assert_eq!(
            header_keys("lib/holding.lua"),
            ["meta", "active", "holds", "stock", "seats", "bought", "seatlog"],
            "the header reader reads a header"
        );
        for script in super::scripts() {
            assert_eq!(
                header_keys(script.file()),
                script.keys(),
                "lua/{}: its KEYS header and the keys its call passes",
                script.file()
            );
        }
    }

    /// Each script's argument type and reply type are the shapes its header's `ARGV:` and
    /// `REPLY:` lines name: an argument or a value added to a script and not to its type (or
    /// the other way round) fails here.
    #[test]
    fn each_script_takes_and_answers_the_values_its_header_names() {
        let mut wrong = Vec::new();
        for script in super::scripts() {
            for (label, shape) in [
                ("ARGV", script.args_shape()),
                ("REPLY", script.reply_shape()),
            ] {
                let header = header_line(script.file(), label);
                if header.as_deref() != Some(shape.as_str()) {
                    wrong.push(format!(
                        "lua/{}: header {label}: {header:?}, its type: -- {label}: {shape}",
                        script.file()
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
