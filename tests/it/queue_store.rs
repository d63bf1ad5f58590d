//! The queue-store contract, called directly: the semantics every caller relies on, checked on
//! Redis (the Lua scripts), on a Redis Cluster (every key of a sale in one slot) and on the
//! in-process store alike.

use chrono::Utc;
use sluice::domain::{Admission, Buyer, NewSale, Sale, SaleStatus, Stock, Ttls, UserId};
use std::sync::Arc;

use sluice::queue::{
    AdmitOutcome, HoldOutcome, JoinOutcome, LiveAttempt, LotteryDraw, PendingSync, QueueStore,
    RedisQueue, SaleSnapshot, SyncChange, Take,
};

use crate::helpers::{redis_cluster_nodes, redis_url};

fn redis() -> Arc<dyn QueueStore> {
    let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
    Arc::new(RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2)).unwrap())
}

fn redis_cluster() -> Arc<dyn QueueStore> {
    redis_cluster_with(&format!("q{}", uuid::Uuid::new_v4().simple()))
}

fn redis_cluster_with(prefix: &str) -> Arc<dyn QueueStore> {
    let nodes = redis_cluster_nodes();
    let nodes: Vec<&str> = nodes.split(',').collect();
    Arc::new(RedisQueue::cluster(&nodes, prefix, std::time::Duration::from_secs(2)).unwrap())
}

fn memory() -> Arc<dyn QueueStore> {
    Arc::new(in_process())
}

/// A store on a fresh in-process Redis (the embedded default's).
fn in_process() -> RedisQueue {
    let store = sluice::queue::embedded::Embedded::in_memory();
    RedisQueue::in_process(store, "q", std::time::Duration::from_secs(2))
}

/// Each named test runs once per store of the list (`[test name: store maker, ...]`).
macro_rules! on_queue_stores {
    (@one [$($test:ident: $store:path),+ $(,)?] $name:ident) => {
        mod $name {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$name($store()).await
                }
            )+
        }
    };
    ($stores:tt $($name:ident),* $(,)?) => {$(
        on_queue_stores!(@one $stores $name);
    )*};
}

/// Each named test runs once per queue store.
macro_rules! on_every_queue_store {
    ($($name:ident),* $(,)?) => {
        on_queue_stores!(
            [
                redis: crate::queue_store::redis,
                redis_cluster: crate::queue_store::redis_cluster,
                in_process: crate::queue_store::memory
            ]
            $($name),*
        );
    };
}

mod seats;

on_every_queue_store!(
    join_is_fifo_and_idempotent_per_user,
    admission_never_exceeds_max_active_and_needs_the_lease,
    unadmit_puts_attempts_back_at_their_place,
    holds_are_all_or_nothing_limited_and_restored_once,
    init_keeps_a_live_sale_and_rebuilds_from_a_snapshot,
    controller_state_expires_unless_renewed,
    a_lottery_draw_orders_the_waiting_once_by_the_seed,
    a_phases_pre_queue_waits_behind_a_fence_and_is_drawn_from_its_first_serial,
    a_lottery_draw_over_thousands_gives_every_place_once,
    a_lottery_draw_tells_what_each_serial_of_before_it_became,
    a_waiting_user_is_found_with_their_place,
    a_batch_not_yet_recorded_goes_to_the_next_lease_holder_first,
    a_batch_larger_than_luas_stack_is_admitted_and_kept_whole,
    positions_stay_exact_when_users_leave_out_of_turn,
    positions_stay_exact_in_a_queue_of_thousands,
    lookups_asked_at_once_each_get_their_own_answer,
    joins_asked_at_once_each_get_their_own_answer,
    a_closed_sale_lets_go_of_its_waiting_users,
    settings_older_than_those_the_store_has_are_left_out,
    nothing_free_and_nothing_held_is_sold_out,
    a_sync_change_is_applied_once_however_often_it_comes,
    holdings_are_what_the_store_holds_and_a_repair_is_a_compare_and_set,
    holdings_of_thousands_are_read_whole,
    a_refresh_sends_each_departure_once_and_its_places_equal_the_stores,
    one_attempt_per_user_whose_admitted_attempt_lives_and_a_new_one_once_it_ended,
);

/// A replica's view of the line (refreshes fed into `LineSnapshot`) places every waiting user
/// where the store does, after departures out of turn, an admission over the places left, and
/// the lottery's renumbering; each refresh sends only the departures the view has not seen.
async fn a_refresh_sends_each_departure_once_and_its_places_equal_the_stores(
    q: Arc<dyn QueueStore>,
) {
    use sluice::service::line::LineSnapshot;
    const N: usize = 40;
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let names: Vec<String> = (0..N).map(|i| format!("u{i}")).collect();
    let mut serials = Vec::new();
    let mut attempts = Vec::new();
    for name in &names {
        match q.join(s.id, &user(name), 0).await.unwrap() {
            JoinOutcome::Queued {
                attempt, serial, ..
            } => {
                attempts.push(attempt);
                serials.push(serial);
            }
            other => panic!("{other:?}"),
        }
    }
    let refresh = |view: LineSnapshot| {
        let q = q.clone();
        async move {
            let digest = q
                .refresh(s.id, &view.figures.epoch, view.logged(), &[])
                .await
                .unwrap();
            let sent = digest.departures.clone();
            (view.next(&digest, Utc::now(), 1000).unwrap(), sent)
        }
    };
    // The view's place of each user equals the store's.
    let check = |view: LineSnapshot, serials: Vec<u64>, epoch_of: Option<String>| {
        let q = q.clone();
        let (names, attempts) = (names.clone(), attempts.clone());
        async move {
            for i in 0..N {
                let store = q.view(attempts[i], &user(&names[i])).await.unwrap();
                // A user no longer waiting has no serial from the store: theirs from the join.
                let (serial, epoch) = match store.serial {
                    Some(serial) => (serial, store.epoch.clone()),
                    None => (
                        serials[i],
                        epoch_of.clone().unwrap_or_else(|| store.epoch.clone()),
                    ),
                };
                assert_eq!(view.place(serial, &epoch), store.position, "{}", names[i]);
            }
        }
    };
    for i in [3, 4, 9] {
        q.leave(attempts[i], &user(&names[i])).await.unwrap();
    }
    let (view, sent) = refresh(LineSnapshot::empty()).await;
    assert_eq!(sent, [serials[3], serials[4], serials[9]]);
    check(view.clone(), serials.clone(), None).await;
    for i in [20, 5] {
        q.leave(attempts[i], &user(&names[i])).await.unwrap();
    }
    let (view, sent) = refresh(view).await;
    assert_eq!(sent, [serials[20], serials[5]], "only the new departures");
    check(view.clone(), serials.clone(), None).await;
    let admitted = admit_all(&q, &s, 4).await;
    let who: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    assert_eq!(who, ["u0", "u1", "u2", "u6"], "over the places left");
    let (view, sent) = refresh(view).await;
    assert!(sent.is_empty());
    check(view.clone(), serials.clone(), None).await;
    assert_eq!(
        view.place(serials[0], &view.figures.epoch),
        None,
        "admitted"
    );
    assert_eq!(view.place(serials[9], &view.figures.epoch), None, "left");
    assert_eq!(view.figures.waiting, (N - 5 - 4) as u64);
    // The lottery numbers the line anew: a serial of before names no place in the new epoch.
    let before = view.figures.epoch.clone();
    draw(&q, &s, "seed").await;
    let (drawn, _) = refresh(view).await;
    assert_ne!(drawn.figures.epoch, before);
    assert_eq!(drawn.place(serials[39], &before), None);
    check(drawn, serials, Some(before)).await;
}

/// A queue-sync change of a fresh id, as the ledger's log would hand it.
fn change(attempt: sluice::domain::AttemptId, change: SyncChange) -> PendingSync {
    PendingSync {
        id: rand::random::<u32>() as i64,
        attempt,
        change,
    }
}

/// The attempt's units stay sold and its slot is freed (what CONFIRMED asks of the store).
async fn finish(q: &Arc<dyn QueueStore>, attempt: sluice::domain::AttemptId) {
    assert!(q
        .apply_sync(&change(attempt, SyncChange::Finish))
        .await
        .unwrap());
}

/// A change the request applied and the worker applies again, or one replayed after a
/// failover that did not lose it, is applied once: the store records its id with it.
async fn a_sync_change_is_applied_once_however_often_it_comes(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(10), 10).await;
    queued(&q, &s, ["a", "b"]).await;
    let admitted = admit_all(&q, &s, 2).await;
    let (a, b) = (admitted[0].attempt, admitted[1].attempt);
    q.hold(a, &user("a"), &Take::Quantity(3)).await.unwrap();
    q.hold(b, &user("b"), &Take::Quantity(2)).await.unwrap();
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 5);

    let restore = change(a, SyncChange::Restore);
    let other = change(b, SyncChange::Extend);
    assert_eq!(
        q.unsynced(s.id, &[restore.id, other.id])
            .await
            .unwrap()
            .len(),
        2,
        "neither applied yet"
    );
    assert!(q.apply_sync(&restore).await.unwrap(), "applied now");
    assert!(!q.apply_sync(&restore).await.unwrap(), "applied before");
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 8, "3 back, once");
    assert_eq!(
        q.unsynced(s.id, &[restore.id, other.id]).await.unwrap(),
        vec![other.id],
        "the store knows which it applied"
    );
    // A replay asks about thousands at once: the answer is every id without a record, in the
    // order asked, the applied one (asked among the last) left out.
    let mut asked: Vec<i64> = (0..2500).map(|i| 1_000_000 + i).collect();
    asked.insert(2000, restore.id);
    let unknown: Vec<i64> = asked
        .iter()
        .copied()
        .filter(|id| *id != restore.id)
        .collect();
    assert_eq!(q.unsynced(s.id, &asked).await.unwrap(), unknown);
    // An extend moves the deadline once: applied again, it does not move it further.
    assert!(q.apply_sync(&other).await.unwrap());
    assert!(!q.apply_sync(&other).await.unwrap());
    let stats = q.stats(s.id).await.unwrap();
    assert_eq!((stats.remaining, stats.active), (8, 1));
}

/// The store's holdings are what it holds; one that agrees with the ledger's snapshot has no
/// drift; a rebuild asked with a version the store has moved past changes nothing, one with
/// the version it reads rebuilds the holdings and keeps the queue and the unrecorded batch.
async fn holdings_are_what_the_store_holds_and_a_repair_is_a_compare_and_set(
    q: Arc<dyn QueueStore>,
) {
    let s = fresh_sale(
        &q,
        Stock::Seats(vec!["A1".into(), "A2".into(), "A3".into()]),
        10,
    )
    .await;
    queued(&q, &s, ["a", "b", "c"]).await;
    let admitted = admit_all(&q, &s, 1).await;
    let a = admitted[0].attempt;
    let seat = Take::Seats(vec!["A2".into()]);
    q.hold(a, &user("a"), &seat).await.unwrap();
    let held = q
        .holdings(s.id)
        .await
        .unwrap()
        .expect("the store holds the sale");
    let mut free = match &held.free {
        Stock::Seats(seats) => seats.clone(),
        other => panic!("{other:?}"),
    };
    free.sort();
    assert_eq!(free, vec!["A1".to_string(), "A3".to_string()]);
    assert_eq!(held.active.get(&a.local), Some(&Some(seat.clone())));
    assert_eq!(held.bought.get(&user("a")), Some(&1));
    let ledger = SaleSnapshot {
        free: Stock::Seats(vec!["A1".into(), "A3".into()]),
        live: vec![LiveAttempt {
            attempt: a,
            user: user("a"),
            deadline_ms: admitted[0].deadline_ms,
            hold: Some(seat.clone()),
        }],
        bought: vec![(user("a"), 1)],
        buyers: vec![],
        reset: false,
    };
    assert_eq!(held.drift(&ledger), None, "they agree");

    // The store lost a's hold (the seat is free again, nothing is held): drift.
    let lost = SaleSnapshot {
        free: Stock::Seats(vec!["A1".into(), "A2".into(), "A3".into()]),
        live: vec![],
        bought: vec![],
        ..ledger.clone()
    };
    assert!(q
        .rebuild_if_unchanged(&s, &lost, held.version)
        .await
        .unwrap());
    let broken = q.holdings(s.id).await.unwrap().unwrap();
    let drift = broken.drift(&ledger).expect("drift");
    assert_eq!((drift.free, drift.seats, drift.missing), ((3, 2), 1, 1));
    assert!(broken.version > held.version);

    // A change since the checker's read (b admitted, its admitter yet to record it in the
    // ledger): its repair is a no-op.
    let lease = q.lease(s.id, "me", 5000).await.unwrap().expect("lease");
    let b = match q.admit_batch(s.id, &lease, 1, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Admitted(a) => a[0].attempt,
        other => panic!("{other:?}"),
    };
    assert!(!q
        .rebuild_if_unchanged(&s, &ledger, broken.version)
        .await
        .unwrap());
    // Read again, repaired: the ledger's holdings, b's admission (not yet in the ledger,
    // carried by the repair) and the queue (c still waits) kept.
    let now = q.holdings(s.id).await.unwrap().unwrap();
    assert_eq!(now.unrecorded.len(), 1);
    assert!(
        now.drift(&ledger).is_some(),
        "the store still lost a's hold"
    );
    let repair = now.repair_from(&ledger);
    assert!(q
        .rebuild_if_unchanged(&s, &repair, now.version)
        .await
        .unwrap());
    let repaired = q.holdings(s.id).await.unwrap().unwrap();
    assert_eq!(repaired.drift(&repair), None);
    assert!(repaired.active.contains_key(&b.local), "b keeps its slot");
    assert_eq!(
        q.hold(b, &user("b"), &Take::Seats(vec!["A2".into()]))
            .await
            .unwrap(),
        HoldOutcome::SeatTaken { seat: "A2".into() },
        "a's seat is a's again"
    );
    assert_eq!(q.stats(s.id).await.unwrap().waiting, 1, "c still waits");
}

/// Holdings larger than a page of the Redis store's read (2,500 holds and buyers, 2,000 free
/// seats) come back whole, each entry once.
async fn holdings_of_thousands_are_read_whole(q: Arc<dyn QueueStore>) {
    const HOLDERS: u32 = 2500;
    let s = fresh_sale(&q, Stock::Quantity(3000), HOLDERS).await;
    let names: Vec<String> = (0..HOLDERS).map(|i| format!("h{i}")).collect();
    queued(&q, &s, &names).await;
    let admitted = admit_all(&q, &s, HOLDERS).await;
    assert_eq!(admitted.len(), HOLDERS as usize);
    for a in &admitted {
        let held = q
            .hold(a.attempt, &a.user, &Take::Quantity(1))
            .await
            .unwrap();
        assert!(matches!(held, HoldOutcome::Held { .. }), "{held:?}");
    }
    let holdings = q.holdings(s.id).await.unwrap().unwrap();
    assert_eq!(holdings.free, Stock::Quantity(500));
    assert_eq!(holdings.active.len(), HOLDERS as usize);
    assert!(holdings
        .active
        .values()
        .all(|take| *take == Some(Take::Quantity(1))));
    assert_eq!(holdings.bought.len(), HOLDERS as usize);
    assert!(holdings.bought.values().all(|units| *units == 1));

    let seats: Vec<String> = (0..2000).map(|i| format!("S{i}")).collect();
    let seated = sale(Stock::Seats(seats.clone()), 10);
    q.init_sale(&seated, 0, &SaleSnapshot::fresh(&seated), false)
        .await
        .unwrap();
    let mut free = match q.holdings(seated.id).await.unwrap().unwrap().free {
        Stock::Seats(free) => free,
        other => panic!("{other:?}"),
    };
    free.sort();
    let mut all = seats;
    all.sort();
    assert_eq!(free, all);
}

/// A waiting user learns the sale is sold out once nothing is free and nothing held could
/// come back: not while a unit is free, nor while one is held; once the holder's units stay
/// sold (finish), yes; and again no once a lapsed hold gives its unit back.
async fn nothing_free_and_nothing_held_is_sold_out(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(1), 10).await;
    let attempts = queued(&q, &s, ["a", "b", "c"]).await;
    let sold_out = async |i: usize, name: &str| {
        let view = q.view(attempts[i], &user(name)).await.unwrap();
        assert!(view.position.is_some(), "{name} waits");
        view.sold_out
    };
    assert!(!sold_out(1, "b").await, "a unit is free");
    let a = admit_all(&q, &s, 1).await[0].attempt;
    let one = Take::Quantity(1);
    let held = q.hold(a, &user("a"), &one).await.unwrap();
    assert_eq!(held, HoldOutcome::Held { take: one.clone() });
    assert!(!sold_out(1, "b").await, "a's hold may lapse");
    finish(&q, a).await;
    assert!(sold_out(1, "b").await, "a bought the last unit");
    assert!(sold_out(2, "c").await, "for everyone waiting");

    // A hold that lapses gives its unit back: no longer sold out.
    let s = fresh_sale(&q, Stock::Quantity(1), 10).await;
    let attempts = queued(&q, &s, ["a", "b"]).await;
    let a = admit_all(&q, &s, 1).await[0].attempt;
    q.hold(a, &user("a"), &one).await.unwrap();
    assert!(q.restore(a, None).await.unwrap(), "the hold lapsed");
    let b = q.view(attempts[1], &user("b")).await.unwrap();
    assert!(!b.sold_out, "the unit is free again");
}

/// A closed sale lets go of everyone still waiting (the service answers them EXPIRED,
/// `sale_closed`), once; it keeps the admitted and the answers of those who left before. An
/// open sale keeps its queue.
async fn a_closed_sale_lets_go_of_its_waiting_users(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let attempts = queued(&q, &s, ["a", "b", "c", "d", "e"]).await;
    q.leave(attempts[1], &user("b")).await.unwrap();
    assert_eq!(admit_all(&q, &s, 1).await.len(), 1, "a");
    assert_eq!(q.forget_waiting(s.id).await.unwrap(), 0, "the sale is open");
    let c = q.view(attempts[2], &user("c")).await.unwrap();
    assert_eq!((c.position, c.waiting), (Some(1), 3));

    put_status(&q, &s, SaleStatus::Closed, 1).await;
    assert_eq!(q.forget_waiting(s.id).await.unwrap(), 3, "c, d and e");
    for (i, name) in [(2, "c"), (4, "e")] {
        let view = q.view(attempts[i], &user(name)).await.unwrap();
        assert_eq!(
            (view.owner, view.position, view.sale_closed),
            (None, None, true),
            "{name}"
        );
    }
    assert_eq!(q.stats(s.id).await.unwrap().waiting, 0);
    let a = q.view(attempts[0], &user("a")).await.unwrap();
    assert_eq!((a.owner, a.active), (Some(user("a")), true), "admitted");
    let b = q.view(attempts[1], &user("b")).await.unwrap();
    assert_eq!(
        (b.owner, b.position),
        (Some(user("b")), None),
        "left before"
    );
    assert_eq!(q.forget_waiting(s.id).await.unwrap(), 0, "once");
}

/// A store on Redis (a prefix of its own) holding a new sale of 5 units (max 10 active): the
/// store, the sale, the sale's key base and a connection to look at its keys.
async fn a_sale_on_redis() -> (
    Arc<dyn QueueStore>,
    Sale,
    String,
    redis::aio::MultiplexedConnection,
) {
    let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
    let q: Arc<dyn QueueStore> = Arc::new(
        RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2)).unwrap(),
    );
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let conn = redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let base = format!("{prefix}:{{sale:{}}}", s.id);
    (q, s, base, conn)
}

/// What a closed sale let go of leaves Redis: its serial and user buckets, and the sets that
/// only the waiting need; what the admitted need stays.
#[tokio::test]
async fn a_closed_sales_waiting_users_leave_redis() {
    let (q, s, base, conn) = a_sale_on_redis().await;
    let mut attempts = Vec::new();
    for i in 0..250 {
        match q.join(s.id, &user(&format!("u{i}")), 0).await.unwrap() {
            JoinOutcome::Queued { attempt, .. } => attempts.push(attempt),
            other => panic!("{other:?}"),
        }
    }
    admit_all(&q, &s, 1).await;
    let keys = async |pattern: &str| -> usize {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{base}:{pattern}"))
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        keys.len()
    };
    assert_eq!(keys("w:*").await, 8, "serials 1-250 in buckets of 32");
    assert!(keys("u:*").await > 200, "a user bucket for nearly each");
    let user_buckets: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{base}:u:*"))
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    let mut dumped = Vec::new();
    for key in &user_buckets {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        dumped.push((key, dump));
    }

    put_status(&q, &s, SaleStatus::Closed, 1).await;
    assert_eq!(q.forget_waiting(s.id).await.unwrap(), 249);
    assert_eq!((keys("w:*").await, keys("u:*").await), (0, 0));
    for kept in ["meta", "seq", "active", "owners", "stock"] {
        assert_eq!(keys(kept).await, 1, "{kept} stays");
    }
    // The user buckets' deletion cut short (here: every one of them left, as before the
    // close): the waiting users there are let go all the same, told nothing of a place.
    for (key, dump) in &dumped {
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(dump)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
    }
    for i in [1, 100, 249] {
        let view = q.view(attempts[i], &user(&format!("u{i}"))).await.unwrap();
        assert_eq!(
            (view.owner, view.position, view.sale_closed),
            (None, None, true),
            "u{i}"
        );
    }
    // A deletion cut short (here: two buckets left) is finished by the next call.
    for bucket in ["w:1", "u:77"] {
        let _: i64 = redis::cmd("HSET")
            .arg(format!("{base}:{bucket}"))
            .arg("x")
            .arg("y")
            .query_async(&mut conn.clone())
            .await
            .unwrap();
    }
    assert_eq!(q.forget_waiting(s.id).await.unwrap(), 0, "counted once");
    assert_eq!((keys("w:*").await, keys("u:*").await), (0, 0));
}

/// Every place is exact in a queue of thousands — more than one node of the in-process
/// store's order-statistic tree (1,024 entries), so places are counted across nodes, and
/// admission empties whole nodes — while every seventh user leaves and a batch is admitted.
async fn positions_stay_exact_in_a_queue_of_thousands(q: Arc<dyn QueueStore>) {
    const N: usize = 3_000;
    const ADMITTED: usize = 1_100;
    let s = fresh_sale(&q, Stock::Quantity(5), ADMITTED as u32).await;
    let mut waiting = Vec::new();
    for i in 0..N {
        let who = user(&format!("u{i}"));
        match q.join(s.id, &who, 0).await.unwrap() {
            JoinOutcome::Queued {
                attempt, position, ..
            } => {
                assert_eq!(position, i as u64 + 1);
                waiting.push((attempt, who));
            }
            other => panic!("{other:?}"),
        }
    }
    let (leaving, staying): (Vec<_>, Vec<_>) = waiting
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 7 == 3);
    for (_, (attempt, who)) in &leaving {
        assert_eq!(
            q.leave(*attempt, who).await.unwrap(),
            sluice::queue::LeaveOutcome::Left
        );
    }
    let admitted = admit_all(&q, &s, ADMITTED as u32).await;
    assert_eq!(admitted.len(), ADMITTED);
    let (first, rest) = staying.split_at(ADMITTED);
    let expected: Vec<_> = first.iter().map(|(_, (a, _))| *a).collect();
    let got: Vec<_> = admitted.iter().map(|a| a.attempt).collect();
    assert!(
        got == expected,
        "admitted in join order, over the places left"
    );
    for (place, (_, (attempt, who))) in rest.iter().enumerate() {
        let view = q.view(*attempt, who).await.unwrap();
        assert_eq!(
            (view.position, view.waiting),
            (Some(place as u64 + 1), rest.len() as u64),
            "{who:?}"
        );
    }
}

/// Status lookups asked at once (the Redis store sends those of one sale together, many to a
/// call) each get the answer for their own attempt and user: waiting ones their place, an
/// admitted one "active", one that left no place, another user's waiting attempt no owner; two
/// sales' lookups interleaved, more than one call can carry.
async fn lookups_asked_at_once_each_get_their_own_answer(q: Arc<dyn QueueStore>) {
    const N: usize = 150;
    let sales = [sale(Stock::Quantity(5), 10), sale(Stock::Quantity(5), 10)];
    let mut asks = Vec::new();
    for s in &sales {
        q.init_sale(s, 0, &SaleSnapshot::fresh(s), false)
            .await
            .unwrap();
        let attempts = queued(&q, s, (0..N).map(|i| format!("u{i}"))).await;
        admit_all(&q, s, 1).await; // u0
        q.leave(attempts[1], &user("u1")).await.unwrap();
        // (sale, attempt, asking user, expected owner, place, active)
        asks.push((s.id, attempts[0], "u0", Some("u0"), None, true));
        asks.push((s.id, attempts[1], "u1", Some("u1"), None, false));
        asks.push((s.id, attempts[5], "u6", None, None, false));
        for (i, attempt) in attempts.iter().enumerate().skip(2) {
            let who = format!("u{i}");
            let place = Some(i as u64 - 1);
            asks.push((s.id, *attempt, leak(&who), Some(leak(&who)), place, false));
        }
    }
    // Interleave the sales and reverse each one's order of joining.
    asks.sort_by_key(|(sale, attempt, ..)| (std::cmp::Reverse(attempt.local), *sale));
    let lookups = asks.iter().map(|(_, attempt, who, ..)| {
        let q = q.clone();
        async move { q.view(*attempt, &user(who)).await.unwrap() }
    });
    let views = futures_util::future::join_all(lookups).await;
    for ((_, _, who, owner, place, active), view) in asks.iter().zip(views) {
        let seen = (
            view.owner.as_ref().map(|u| u.as_str()),
            view.position,
            view.active,
        );
        assert_eq!(seen, (*owner, *place, *active), "{who}");
        assert_eq!(view.waiting, N as u64 - 2, "{who}");
    }
}

/// Joins asked at once (the Redis store sends those of one sale together, many to a call) each
/// get their own answer: every user a place of their own, the same attempt and place for a
/// user who joins twice, an admitted user their admitted attempt, a join of an unknown sale
/// "unknown".
async fn joins_asked_at_once_each_get_their_own_answer(q: Arc<dyn QueueStore>) {
    const N: usize = 150;
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    q.join(s.id, &user("u0"), 0).await.unwrap();
    let admitted = admit_all(&q, &s, 1).await[0].attempt;
    let unknown = sale(Stock::Quantity(5), 10).id;
    // u1..=uN, then u1..=u10 again, u0 and a join of the unknown sale, all at once.
    let mut asks: Vec<_> = (1..=N).chain(1..=10).map(|i| (s.id, i)).collect();
    asks.push((s.id, 0));
    asks.push((unknown, 1));
    let joins = asks.iter().map(|&(sale, i)| {
        let q = q.clone();
        async move { q.join(sale, &user(&format!("u{i}")), 0).await.unwrap() }
    });
    let outcomes = futures_util::future::join_all(joins).await;
    let mut first = std::collections::HashMap::new();
    let mut places = Vec::new();
    for (&(sale, i), outcome) in asks.iter().zip(outcomes) {
        match outcome {
            JoinOutcome::Queued {
                attempt, position, ..
            } if sale == s.id && i > 0 => {
                let view = q.view(attempt, &user(&format!("u{i}"))).await.unwrap();
                assert_eq!(view.position, Some(position), "u{i} is where the join said");
                match first.insert(i, (attempt, position)) {
                    Some(before) => assert_eq!(before, (attempt, position), "u{i} twice"),
                    None => places.push(position),
                }
            }
            JoinOutcome::Active { attempt } if i == 0 => assert_eq!(attempt, admitted),
            JoinOutcome::UnknownSale if sale == unknown => {}
            other => panic!("u{i}: {other:?}"),
        }
    }
    places.sort_unstable();
    assert_eq!(places, (1..=N as u64).collect::<Vec<_>>(), "a place each");
}

/// Two replicas of the store over one sale (for Redis and a Redis Cluster: two clients with
/// their own batches over the same keys; the in-process store lives in one process, so there
/// the two are two callers of it at once).
mod two_replicas {
    use super::*;

    #[tokio::test]
    async fn redis() {
        let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
        let replica = || -> Arc<dyn QueueStore> {
            Arc::new(
                RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2)).unwrap(),
            )
        };
        one_attempt_per_user_when_two_replicas_take_the_same_joins_at_once(replica(), replica())
            .await
    }

    #[tokio::test]
    async fn redis_cluster() {
        let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
        one_attempt_per_user_when_two_replicas_take_the_same_joins_at_once(
            redis_cluster_with(&prefix),
            redis_cluster_with(&prefix),
        )
        .await
    }

    #[tokio::test]
    async fn in_process() {
        let q = memory();
        one_attempt_per_user_when_two_replicas_take_the_same_joins_at_once(q.clone(), q).await
    }
}

/// Every user joins through both replicas at once, in a different order on each: each user
/// gets one attempt and one serial, whichever replica answers; the serials are 1..=N, each
/// once; the line admits them in serial order, each once.
async fn one_attempt_per_user_when_two_replicas_take_the_same_joins_at_once(
    a: Arc<dyn QueueStore>,
    b: Arc<dyn QueueStore>,
) {
    const N: usize = 400;
    let s = fresh_sale(&a, Stock::Quantity(5), 1000).await;
    let now = Utc::now().timestamp_millis();
    // b takes the users in another order: 7,919 is prime to N.
    let order_b = (0..N).map(|i| (i * 7919) % N);
    let joins = (0..N)
        .map(|i| (a.clone(), i))
        .chain(order_b.map(|i| (b.clone(), i)))
        .map(|(q, i)| async move {
            let outcome = q.join(s.id, &user(&format!("u{i}")), now).await.unwrap();
            (i, outcome)
        });
    let mut first: std::collections::HashMap<usize, (sluice::domain::AttemptId, u64)> =
        std::collections::HashMap::new();
    for (i, outcome) in futures_util::future::join_all(joins).await {
        let JoinOutcome::Queued {
            attempt, serial, ..
        } = outcome
        else {
            panic!("u{i}: {outcome:?}");
        };
        if let Some(before) = first.insert(i, (attempt, serial)) {
            assert_eq!(before, (attempt, serial), "u{i} got two attempts");
        }
    }
    let mut serials: Vec<u64> = first.values().map(|&(_, serial)| serial).collect();
    serials.sort_unstable();
    assert_eq!(serials, (1..=N as u64).collect::<Vec<_>>(), "a serial each");
    let by_serial: std::collections::HashMap<sluice::domain::AttemptId, u64> =
        first.values().copied().collect();
    let admitted: Vec<u64> = admit_all(&b, &s, N as u32)
        .await
        .iter()
        .map(|x| by_serial[&x.attempt])
        .collect();
    assert_eq!(
        admitted,
        (1..=N as u64).collect::<Vec<_>>(),
        "in line order, each once"
    );
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// Positions and the waiting count stay exact while users leave from the middle of a long
/// queue (whole runs of it), admission steps over the places they left, and an admission the
/// ledger refused is put back in front of everyone.
async fn positions_stay_exact_when_users_leave_out_of_turn(q: Arc<dyn QueueStore>) {
    const N: usize = 350;
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let names: Vec<String> = (0..N).map(|i| format!("u{i}")).collect();
    let attempts = queued(&q, &s, &names).await;
    // u1..=u200 leave, and u300.
    let leaving: Vec<usize> = (1..=200).chain([300]).collect();
    let leaves = leaving.iter().map(|&i| {
        let q = q.clone();
        let (attempt, who) = (attempts[i], user(&names[i]));
        async move { q.leave(attempt, &who).await.unwrap() }
    });
    for outcome in futures_util::future::join_all(leaves).await {
        assert_eq!(outcome, sluice::queue::LeaveOutcome::Left);
    }
    assert_eq!(
        q.leave(attempts[1], &user("u1")).await.unwrap(),
        sluice::queue::LeaveOutcome::NotQueued
    );
    let place = |i: usize| {
        let q = q.clone();
        let (attempt, who) = (attempts[i], user(&names[i]));
        async move {
            let view = q.view(attempt, &who).await.unwrap();
            (view.position, view.waiting)
        }
    };
    let waiting = (N - leaving.len()) as u64;
    assert_eq!(place(0).await, (Some(1), waiting));
    assert_eq!(place(201).await, (Some(2), waiting));
    assert_eq!(place(299).await, (Some(100), waiting));
    assert_eq!(place(301).await, (Some(101), waiting));
    assert_eq!(place(N - 1).await, (Some(waiting), waiting));
    assert_eq!(place(1).await, (None, waiting), "left");
    assert_eq!(q.stats(s.id).await.unwrap().waiting, waiting);
    // Another user's waiting attempt is not shown to this one.
    let theirs = q.view(attempts[0], &user("u2")).await.unwrap();
    assert_eq!((theirs.owner, theirs.position), (None, None));

    let admitted = admit_all(&q, &s, 2).await;
    let who: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    assert_eq!(who, ["u0", "u201"], "over the places left");
    assert_eq!(place(202).await, (Some(1), waiting - 2));
    q.unadmit(s.id, &admitted).await.unwrap();
    assert_eq!(place(0).await, (Some(1), waiting));
    assert_eq!(place(201).await, (Some(2), waiting));
    assert_eq!(place(202).await, (Some(3), waiting));
    let again = admit_all(&q, &s, 3).await;
    let who: Vec<&str> = again.iter().map(|a| a.user.as_str()).collect();
    assert_eq!(who, ["u0", "u201", "u202"]);
    assert_eq!(place(N - 1).await, (Some(waiting - 3), waiting - 3));
    // Who left may join again, at the back.
    match q.join(s.id, &user("u1"), 0).await.unwrap() {
        JoinOutcome::Queued {
            position,
            waiting: w,
            ..
        } => assert_eq!((position, w), (waiting - 2, waiting - 2)),
        other => panic!("{other:?}"),
    }
}

/// A batch bigger than what one Lua `unpack` can take (~8,000 values) is admitted and kept
/// for recording whole (the script once failed after popping, losing the batch).
async fn a_batch_larger_than_luas_stack_is_admitted_and_kept_whole(q: Arc<dyn QueueStore>) {
    const N: u32 = 9_000;
    let s = fresh_sale(&q, Stock::Quantity(5), N).await;
    for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
        let joins = chunk.iter().map(|i| {
            let q = q.clone();
            async move { q.join(s.id, &user(&format!("u{i}")), 0).await.unwrap() }
        });
        futures_util::future::join_all(joins).await;
    }
    let lease = q.lease(s.id, "me", 60_000).await.unwrap().expect("lease");
    let batch = match q.admit_batch(s.id, &lease, N, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Admitted(batch) => batch,
        other => panic!("{other:?}"),
    };
    assert_eq!(batch.len(), N as usize);
    match q.admit_batch(s.id, &lease, N, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Unrecorded(again) => assert_eq!(again.len(), N as usize),
        other => panic!("{other:?}"),
    }
}

/// Failover: an admitter that dies between admitting a batch and recording it in the ledger
/// leaves the batch marked; whoever holds the lease next gets exactly that batch back (and
/// nothing new) until it says the ledger has it.
async fn a_batch_not_yet_recorded_goes_to_the_next_lease_holder_first(q: Arc<dyn QueueStore>) {
    let s = three_joined(&q).await;
    let first = q.lease(s.id, "first", 150).await.unwrap().expect("lease");
    let batch = match q.admit_batch(s.id, &first, 2, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Admitted(batch) => batch,
        other => panic!("{other:?}"),
    };
    assert_eq!(batch.len(), 2);
    // "first" dies here. Its lease runs out; the next holder's first call hands the batch back.
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let next = q.lease(s.id, "next", 5000).await.unwrap().expect("lease");
    assert!(next.fence > first.fence);
    for _ in 0..2 {
        match q.admit_batch(s.id, &next, 5, 60_000, 0.0).await.unwrap() {
            AdmitOutcome::Unrecorded(again) => assert_eq!(again, batch),
            other => panic!("{other:?}"),
        }
    }
    // Only the batch's own first attempt settles it.
    q.admissions_recorded(s.id, batch[1].attempt).await.unwrap();
    assert!(matches!(
        q.admit_batch(s.id, &next, 5, 60_000, 0.0).await.unwrap(),
        AdmitOutcome::Unrecorded(_)
    ));
    q.admissions_recorded(s.id, batch[0].attempt).await.unwrap();
    let rest = match q.admit_batch(s.id, &next, 5, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Admitted(rest) => rest,
        other => panic!("{other:?}"),
    };
    assert_eq!(rest.len(), 1, "c, and nobody twice");
    assert!(rest[0].seq > batch[1].seq);
    // A batch put back (the ledger refused it) is not one to record either.
    q.unadmit(s.id, &rest).await.unwrap();
    let again = match q.admit_batch(s.id, &next, 5, 60_000, 0.0).await.unwrap() {
        AdmitOutcome::Admitted(again) => again,
        other => panic!("{other:?}"),
    };
    let ids = |b: &[sluice::queue::Admitted]| b.iter().map(|a| a.attempt).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&rest));
}

/// The lottery draw: everyone waiting, ordered by SHA-1 (hex) of `<seed>:<user id>`, once;
/// a join after the draw comes last.
async fn a_lottery_draw_orders_the_waiting_once_by_the_seed(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let names: Vec<String> = (0..10).map(|i| format!("u{i}")).collect();
    let attempts = queued(&q, &s, &names).await;
    assert_eq!(draw(&q, &s, "seed-1").await, LotteryDraw::Drawn(10));
    assert_eq!(
        draw(&q, &s, "seed-1").await,
        LotteryDraw::DrawnBefore,
        "once"
    );
    let mut expected = names.clone();
    expected.sort_by_key(|n| draw_key("seed-1", n));
    let waiting: Vec<_> = names.iter().cloned().zip(attempts).collect();
    assert_eq!(by_place(&q, &waiting).await, expected);
    match q.join(s.id, &user("later"), 0).await.unwrap() {
        JoinOutcome::Queued { position, .. } => assert_eq!(position, 11),
        other => panic!("{other:?}"),
    }
}

/// A later lottery phase: those who joined from its first serial on are not admitted while
/// the fence holds (those before are), then its draw orders them alone, once; the line before
/// them keeps its order.
async fn a_phases_pre_queue_waits_behind_a_fence_and_is_drawn_from_its_first_serial(
    q: Arc<dyn QueueStore>,
) {
    let s = fresh_sale(&q, Stock::Quantity(5), 100).await;
    let members: Vec<String> = (0..3).map(|i| format!("m{i}")).collect();
    queued(&q, &s, &members).await;
    let first = q.refresh(s.id, "", 0, &[]).await.unwrap().figures.last + 1;
    let general: Vec<String> = (0..8).map(|i| format!("g{i}")).collect();
    let attempts = queued(&q, &s, &general).await;
    let lease = q.lease(s.id, "me", 5000).await.unwrap().expect("lease");
    let admitted = match q
        .admit_batch_below(s.id, &lease, 100, 60_000, 0.0, Some(first))
        .await
        .unwrap()
    {
        AdmitOutcome::Admitted(a) => a,
        other => panic!("{other:?}"),
    };
    let names: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    assert_eq!(
        names,
        ["m0", "m1", "m2"],
        "the members only: the fence holds"
    );
    q.admissions_recorded(s.id, admitted[0].attempt)
        .await
        .unwrap();
    let ordered = loop {
        match q
            .draw_lottery_from(
                s.id,
                "phase-seed",
                first,
                std::time::Duration::from_millis(50),
            )
            .await
            .unwrap()
        {
            LotteryDraw::UnderWay => continue,
            done => break done,
        }
    };
    assert_eq!(ordered, LotteryDraw::Drawn(8));
    let again = q
        .draw_lottery_from(s.id, "phase-seed", first, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again, LotteryDraw::DrawnBefore, "once");
    let mut expected = general.clone();
    expected.sort_by_key(|n| draw_key("phase-seed", n));
    let waiting: Vec<_> = general.iter().cloned().zip(attempts).collect();
    assert_eq!(by_place(&q, &waiting).await, expected);
    let admitted = admit_all(&q, &s, 100).await;
    let names: Vec<String> = admitted
        .iter()
        .map(|a| a.user.as_str().to_owned())
        .collect();
    assert_eq!(names, expected, "admitted in the draw's order");
}

/// The lottery's draw, called until it is made; what the last call said.
async fn draw(q: &Arc<dyn QueueStore>, s: &Sale, seed: &str) -> LotteryDraw {
    loop {
        match q
            .draw_lottery(s.id, seed, std::time::Duration::from_millis(50))
            .await
            .unwrap()
        {
            LotteryDraw::UnderWay => continue,
            done => return done,
        }
    }
}

/// Support's lookup by user: a waiting user's attempt and place, kept exact as others leave
/// and are admitted; nothing for one who does not wait (admitted, or unknown).
async fn a_waiting_user_is_found_with_their_place(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let names: Vec<String> = (0..5).map(|i| format!("u{i}")).collect();
    let attempts = queued(&q, &s, &names).await;
    let place = |position, waiting| sluice::queue::WaitingPlace {
        attempt: attempts[3],
        position,
        waiting,
    };
    assert_eq!(
        q.waiting_of(s.id, &user("u3")).await.unwrap(),
        Some(place(4, 5))
    );
    q.leave(attempts[1], &user("u1")).await.unwrap();
    assert_eq!(
        q.waiting_of(s.id, &user("u3")).await.unwrap(),
        Some(place(3, 4))
    );
    admit_all(&q, &s, 1).await;
    assert_eq!(
        q.waiting_of(s.id, &user("u3")).await.unwrap(),
        Some(place(2, 3))
    );
    assert_eq!(
        q.waiting_of(s.id, &user("u0")).await.unwrap(),
        None,
        "admitted"
    );
    assert_eq!(q.waiting_of(s.id, &user("u1")).await.unwrap(), None, "left");
    assert_eq!(q.waiting_of(s.id, &user("nobody")).await.unwrap(), None);
}

/// SHA-1 (hex) of `<seed>:<user id>`: the lottery's order.
fn draw_key(seed: &str, name: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{seed}:{name}").as_bytes(),
    );
    hex::encode(d.as_ref())
}

/// The waiting users' names in the order of their places; asserts that the places are
/// 1..=n, each once.
async fn by_place(
    q: &Arc<dyn QueueStore>,
    waiting: &[(String, sluice::domain::AttemptId)],
) -> Vec<String> {
    let mut placed = Vec::new();
    for (name, attempt) in waiting {
        let view = q.view(*attempt, &user(name)).await.unwrap();
        placed.push((view.position.expect(name), name.clone()));
    }
    placed.sort();
    let places: Vec<u64> = placed.iter().map(|(p, _)| *p).collect();
    assert_eq!(places, (1..=waiting.len() as u64).collect::<Vec<_>>());
    placed.into_iter().map(|(_, n)| n).collect()
}

/// A draw over more waiting users than one call of the draw takes (lua/lottery.lua goes a
/// chunk a call), some of whom left before it: every one still waiting has one place, in the
/// draw's order, the count is kept, a later join comes last and admission follows the places.
async fn a_lottery_draw_over_thousands_gives_every_place_once(q: Arc<dyn QueueStore>) {
    let (s, names, attempts) = joined_by(&q, 2_500).await;
    let mut waiting = Vec::new();
    for (i, (name, attempt)) in names.iter().zip(&attempts).enumerate() {
        if i % 7 == 3 {
            q.leave(*attempt, &user(name)).await.unwrap();
        } else {
            waiting.push((name.clone(), *attempt));
        }
    }
    assert_eq!(
        draw(&q, &s, "seed-2").await,
        LotteryDraw::Drawn(waiting.len() as u64)
    );
    let mut expected: Vec<String> = waiting.iter().map(|(n, _)| n.clone()).collect();
    expected.sort_by_key(|n| draw_key("seed-2", n));
    assert_eq!(by_place(&q, &waiting).await, expected);
    assert_eq!(q.stats(s.id).await.unwrap().waiting, waiting.len() as u64);
    match q.join(s.id, &user("later"), 0).await.unwrap() {
        JoinOutcome::Queued { position, .. } => assert_eq!(position, waiting.len() as u64 + 1),
        other => panic!("{other:?}"),
    }
    let admitted = admit_all(&q, &s, 5).await;
    let who: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    assert_eq!(
        who,
        expected[..5].iter().map(String::as_str).collect::<Vec<_>>()
    );
}

/// After a lottery's draw, the store tells a replica's view what each serial of the numbering
/// before it became (read a page at a time), so that tickets of before the draw find their
/// holders' places with no lookup: the place the store gives each one still waiting; none for
/// those admitted or gone before the draw, nor for a later join's serial.
async fn a_lottery_draw_tells_what_each_serial_of_before_it_became(q: Arc<dyn QueueStore>) {
    use sluice::service::line::{LineSnapshot, Renumbered};
    const N: usize = 60;
    let (s, names, attempts) = joined_by(&q, N).await;
    let mut before = Vec::new();
    for (name, attempt) in names.iter().zip(&attempts) {
        let view = q.view(*attempt, &user(name)).await.unwrap();
        before.push((view.serial.expect("waiting"), view.epoch));
    }
    for (i, (name, attempt)) in names.iter().zip(&attempts).enumerate() {
        if i % 7 == 3 {
            q.leave(*attempt, &user(name)).await.unwrap();
        }
    }
    admit_all(&q, &s, 2).await;
    let old_epoch = before[0].1.clone();
    let undrawn = q.refresh(s.id, &old_epoch, 0, &[]).await.unwrap();
    assert_eq!(undrawn.renumbered, None, "no draw yet");
    let before_draw = LineSnapshot::empty()
        .next(&undrawn, Utc::now(), 1000)
        .unwrap();
    let left = (0..N).filter(|i| i % 7 == 3).count();
    assert_eq!(before_draw.logged(), left as u64);
    assert!(matches!(
        draw(&q, &s, "seed-5").await,
        LotteryDraw::Drawn(_)
    ));
    let later = queued(&q, &s, ["later"]).await[0];
    let digest = q
        .refresh(s.id, &old_epoch, before_draw.logged(), &[])
        .await
        .unwrap();
    let drawn = digest.renumbered.clone().expect("the draw's renumbering");
    assert_eq!(drawn.from_epoch, old_epoch);
    assert_ne!(digest.figures.epoch, old_epoch);
    assert_eq!(
        (digest.from, digest.departures.len()),
        (before_draw.logged(), 0),
        "the departure log goes on across the draw"
    );
    // Pages of 7, as a replica reads pages: a short page is padded, an empty one ends it.
    let mut serials = Vec::new();
    let mut from = drawn.first;
    while from <= drawn.last {
        let page = q.renumbered(s.id, &drawn, from, 7).await.unwrap();
        if page.is_empty() {
            break;
        }
        serials.extend(page);
        from += 7;
        serials.resize((from - drawn.first) as usize, 0);
    }
    let view = before_draw.next(&digest, Utc::now(), 1000).unwrap();
    assert!(view.lacks(&drawn));
    assert_eq!(
        view.serial_now(before[10].0, &old_epoch),
        None,
        "not learned"
    );
    let epoch = view.figures.epoch.clone();
    let learned = Renumbered::new(drawn.clone(), epoch.clone(), &serials).unwrap();
    let view = view.learned(Arc::new(learned));
    assert!(!view.lacks(&drawn));
    let mut places = 0;
    for (i, (name, attempt)) in names.iter().zip(&attempts).enumerate() {
        let store = q.view(*attempt, &user(name)).await.unwrap();
        let now = view.serial_now(before[i].0, &old_epoch);
        assert_eq!(now, store.serial, "{name}");
        if let Some(serial) = now {
            assert_eq!(view.place(serial, &epoch), store.position, "{name}");
            places += 1;
        }
    }
    assert_eq!(places, N - left - 2, "every one still waiting");
    let joined_later = q.view(later, &user("later")).await.unwrap();
    let later_serial = joined_later.serial.unwrap();
    assert_eq!(view.serial_now(later_serial, &old_epoch), None);
    assert_eq!(view.serial_now(later_serial, &epoch), Some(later_serial));
    assert_eq!(view.serial_now(before[10].0, "another"), None);
}

/// A sale of 5 units (max 10 active) that users u0, u1, .. u<n-1> joined, in that order: the
/// sale, their names and their attempts.
async fn joined_by(
    q: &Arc<dyn QueueStore>,
    n: usize,
) -> (Sale, Vec<String>, Vec<sluice::domain::AttemptId>) {
    let s = fresh_sale(q, Stock::Quantity(5), 10).await;
    let names: Vec<String> = (0..n).map(|i| format!("u{i}")).collect();
    let attempts = queued(q, &s, &names).await;
    (s, names, attempts)
}

/// Writes the sale's settings with `status` to the store, as the ledger's `version` of them.
async fn put_status(q: &Arc<dyn QueueStore>, s: &Sale, status: SaleStatus, version: u64) {
    let mut changed = s.clone();
    changed.status = status;
    assert_eq!(
        q.put_settings(&changed, version, false).await.unwrap(),
        Some(version)
    );
}

/// Two changes to a sale whose writes reach the store out of order (two replicas, or a replica
/// and the queue-sync worker): the store keeps the later, whichever arrives last, unless a
/// write is forced (the ledger's settings stand, as `sluice reconcile` writes them); and a
/// sale the store does not hold is not half made by a change's write.
async fn settings_older_than_those_the_store_has_are_left_out(q: Arc<dyn QueueStore>) {
    let s = sale(Stock::Quantity(5), 2);
    q.init_sale(&s, 3, &SaleSnapshot::fresh(&s), false)
        .await
        .unwrap();
    let waiting = q.join(s.id, &user("a"), 0).await.unwrap();
    let JoinOutcome::Queued { attempt, .. } = waiting else {
        panic!("{waiting:?}");
    };
    let rate = async || q.view(attempt, &user("a")).await.unwrap().configured_rate;
    let mut older = s.clone();
    older.status = SaleStatus::Closed;
    assert_eq!(
        q.put_settings(&older, 2, false).await.unwrap(),
        Some(3),
        "older"
    );
    assert!(!q.view(attempt, &user("a")).await.unwrap().sale_closed);

    let mut later = s.clone();
    later.admission = Admission::parse(90, 2, None).unwrap();
    later.status = SaleStatus::Paused;
    assert_eq!(q.put_settings(&later, 5, false).await.unwrap(), Some(5));
    let mut between = s.clone();
    between.admission = Admission::parse(30, 2, None).unwrap();
    assert_eq!(
        q.put_settings(&between, 4, false).await.unwrap(),
        Some(5),
        "after 5"
    );
    assert_eq!(rate().await, 90.0);
    assert_eq!(admit_all(&q, &s, 10).await.len(), 0, "still paused");
    // A rewrite from a ledger read before the later change leaves it alone too.
    let fresh = SaleSnapshot::fresh(&s);
    assert!(!q.init_sale(&between, 4, &fresh, false).await.unwrap());
    assert_eq!(rate().await, 90.0);
    // Forced, the older settings are written, and their version with them.
    assert_eq!(q.put_settings(&between, 4, true).await.unwrap(), Some(4));
    assert_eq!(rate().await, 30.0);
    assert_eq!(q.put_settings(&later, 5, false).await.unwrap(), Some(5));
    q.init_sale(&between, 4, &fresh, true).await.unwrap();
    assert_eq!(rate().await, 30.0, "a forced rebuild writes them too");

    later.status = SaleStatus::Closed;
    assert_eq!(q.put_settings(&later, 6, false).await.unwrap(), Some(6));
    assert_eq!(
        q.join(s.id, &user("b"), 0).await.unwrap(),
        JoinOutcome::Closed
    );

    let elsewhere = sale(Stock::Quantity(1), 1);
    assert_eq!(
        q.put_settings(&elsewhere, 1, false).await.unwrap(),
        None,
        "not held"
    );
    assert_eq!(
        q.join(elsewhere.id, &user("a"), 0).await.unwrap(),
        JoinOutcome::UnknownSale
    );
}

fn sale(stock: Stock, max_active: u32) -> Sale {
    let (quantity, seats) = match stock {
        Stock::Quantity(n) => (Some(n), None),
        Stock::Seats(s) => (None, Some(s)),
    };
    NewSale {
        name: "q".into(),
        opens_at: None,
        closes_at: None,
        quantity,
        seats,
        per_user_limit: 3,
        ttls: Ttls {
            admission_secs: 60,
            hold_secs: 60,
            payment_secs: 60,
        },
        rate_per_minute: 60,
        max_active,
        adaptive: None,
        lottery: None,
        layout: None,
        price: Default::default(),
        instant: false,
    }
    .parse(Utc::now())
    .unwrap()
}

/// A sale of 5 units (max 10 active) that users a, b and c joined, in that order.
async fn three_joined(q: &Arc<dyn QueueStore>) -> Sale {
    let s = fresh_sale(q, Stock::Quantity(5), 10).await;
    for name in ["a", "b", "c"] {
        q.join(s.id, &user(name), 0).await.unwrap();
    }
    s
}

/// A new sale of `stock` (at most `max_active` admitted at once), written to the store.
async fn fresh_sale(q: &Arc<dyn QueueStore>, stock: Stock, max_active: u32) -> Sale {
    let s = sale(stock, max_active);
    q.init_sale(&s, 0, &SaleSnapshot::fresh(&s), false)
        .await
        .unwrap();
    s
}

fn user(name: &str) -> UserId {
    UserId::parse(name).unwrap()
}

/// Joins `names` to the sale in order; each must be queued. Their attempts, in that order.
async fn queued(
    q: &Arc<dyn QueueStore>,
    s: &Sale,
    names: impl IntoIterator<Item = impl AsRef<str>>,
) -> Vec<sluice::domain::AttemptId> {
    let mut attempts = Vec::new();
    for name in names {
        match q.join(s.id, &user(name.as_ref()), 0).await.unwrap() {
            JoinOutcome::Queued { attempt, .. } => attempts.push(attempt),
            other => panic!("{other:?}"),
        }
    }
    attempts
}

async fn admit_all(q: &Arc<dyn QueueStore>, s: &Sale, wanted: u32) -> Vec<sluice::queue::Admitted> {
    let lease = q.lease(s.id, "me", 5000).await.unwrap().expect("lease");
    match q
        .admit_batch(s.id, &lease, wanted, 60_000, 0.0)
        .await
        .unwrap()
    {
        AdmitOutcome::Admitted(a) => {
            if let Some(first) = a.first() {
                q.admissions_recorded(s.id, first.attempt).await.unwrap();
            }
            a
        }
        other => panic!("{other:?}"),
    }
}

async fn join_is_fifo_and_idempotent_per_user(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    let now = Utc::now().timestamp_millis();
    let mut ids = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        match q.join(s.id, &user(name), now).await.unwrap() {
            JoinOutcome::Queued {
                attempt,
                position,
                waiting,
                ..
            } => {
                assert_eq!((position, waiting), (i as u64 + 1, i as u64 + 1));
                ids.push(attempt);
            }
            other => panic!("{other:?}"),
        }
    }
    match q.join(s.id, &user("b"), now).await.unwrap() {
        JoinOutcome::Queued {
            attempt,
            position,
            waiting,
            configured_rate,
            ..
        } => {
            assert_eq!((attempt, position, waiting), (ids[1], 2, 3));
            assert_eq!(configured_rate, s.admission.rate_per_minute as f64);
        }
        other => panic!("{other:?}"),
    }
    let admitted = admit_all(&q, &s, 2).await;
    let order: Vec<_> = admitted.iter().map(|a| a.attempt).collect();
    assert_eq!(order, ids[..2], "admission order is join order");
    assert!(admitted[0].seq < admitted[1].seq);
    assert_eq!(
        q.join(s.id, &user("a"), now).await.unwrap(),
        JoinOutcome::Active { attempt: ids[0] }
    );
    let view = q.view(ids[2], &user("c")).await.unwrap();
    assert_eq!(
        (view.position, view.waiting, view.active),
        (Some(1), 1, false)
    );
    assert_eq!(view.owner, Some(user("c")));

    put_status(&q, &s, SaleStatus::Closed, 1).await;
    assert_eq!(
        q.join(s.id, &user("z"), now).await.unwrap(),
        JoinOutcome::Closed
    );
    let unknown = sale(Stock::Quantity(1), 1);
    assert_eq!(
        q.join(unknown.id, &user("z"), now).await.unwrap(),
        JoinOutcome::UnknownSale
    );
}

/// One attempt per user: an admitted user who joins again gets their admitted attempt while it
/// lives (held or not), and a user whose attempt ended with nothing bought gets a new one at
/// the back of the line, which is admitted in turn.
async fn one_attempt_per_user_whose_admitted_attempt_lives_and_a_new_one_once_it_ended(
    q: Arc<dyn QueueStore>,
) {
    let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
    one_attempt_per_user_in(&q, &s).await;
}

/// A line of Redis written before meta.layout (16,384 user buckets, no admitted user's entry
/// in them, `lua/lib/queue.lua`) keeps one attempt per user and its order, as sluice reads it
/// after an upgrade.
#[tokio::test]
async fn a_line_written_before_its_layout_keeps_one_attempt_per_user() {
    let (q, s, base, mut conn) = a_sale_on_redis().await;
    let dropped: i64 = redis::cmd("HDEL")
        .arg(format!("{base}:meta"))
        .arg("layout")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(dropped, 1, "a new sale's line has a layout");
    one_attempt_per_user_in(&q, &s).await;
    // The admitted keep no entry in the old layout; one who waits has theirs in the old
    // layout's bucket (SHA-1 of "e" begins 58e6b: 364,139 % 16,384 = 3,691).
    let buckets = |conn: &mut redis::aio::MultiplexedConnection| {
        let pattern = format!("{base}:u:*");
        let mut conn = conn.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.iter()
                .map(|k| k.rsplit(':').next().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(buckets(&mut conn).await, Vec::<String>::new());
    queued(&q, &s, ["e"]).await;
    assert_eq!(buckets(&mut conn).await, ["3691"]);
}

/// Joins `name` to the sale, who must be queued at `position`: their attempt.
async fn queued_at(
    q: &Arc<dyn QueueStore>,
    s: &Sale,
    name: &str,
    position: u64,
) -> sluice::domain::AttemptId {
    match q.join(s.id, &user(name), 0).await.unwrap() {
        JoinOutcome::Queued {
            attempt,
            position: at,
            ..
        } => {
            assert_eq!(at, position, "{name}");
            attempt
        }
        other => panic!("{name}: {other:?}"),
    }
}

/// The sequence of `one_attempt_per_user_whose_admitted_attempt_lives_and_a_new_one_once_it_ended`
/// on the initialised sale `s`.
async fn one_attempt_per_user_in(q: &Arc<dyn QueueStore>, s: &Sale) {
    let ids = queued(q, s, ["a", "b", "c"]).await;
    let admitted = admit_all(q, s, 2).await;
    assert_eq!(
        admitted.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        ids[..2]
    );
    q.hold(ids[1], &user("b"), &Take::Quantity(1))
        .await
        .unwrap();
    let now = Utc::now().timestamp_millis();
    // a and b again, with d (new) and c (waiting).
    let mut again = Vec::new();
    for name in ["a", "d", "b", "c"] {
        again.push(q.join(s.id, &user(name), now).await.unwrap());
    }
    assert_eq!(again[0], JoinOutcome::Active { attempt: ids[0] });
    assert_eq!(again[2], JoinOutcome::Active { attempt: ids[1] });
    let (d, c) = match (&again[1], &again[3]) {
        (
            JoinOutcome::Queued {
                attempt: d,
                position: 2,
                waiting: 2,
                ..
            },
            JoinOutcome::Queued {
                attempt: c,
                position: 1,
                waiting: 2,
                ..
            },
        ) => (*d, *c),
        other => panic!("{other:?}"),
    };
    assert_eq!(c, ids[2]);
    // a's attempt ends with nothing held: a joins anew, behind d.
    assert!(!q.restore(ids[0], None).await.unwrap(), "a held nothing");
    let a = queued_at(q, s, "a", 3).await;
    assert_ne!(a, ids[0]);
    // b's hold gives its unit back and ends: b joins anew too.
    assert!(q.restore(ids[1], None).await.unwrap());
    let b = queued_at(q, s, "b", 4).await;
    // The line admits them in that order, and each once.
    let order: Vec<_> = admit_all(q, s, 10)
        .await
        .iter()
        .map(|x| x.attempt)
        .collect();
    assert_eq!(order, [c, d, a, b]);
    assert_eq!(
        q.join(s.id, &user("a"), now).await.unwrap(),
        JoinOutcome::Active { attempt: a }
    );
}

async fn admission_never_exceeds_max_active_and_needs_the_lease(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(5), 2).await;
    for name in ["a", "b", "c", "d"] {
        q.join(s.id, &user(name), 0).await.unwrap();
    }
    assert_eq!(admit_all(&q, &s, 10).await.len(), 2, "capped at max_active");
    assert_eq!(admit_all(&q, &s, 10).await.len(), 0, "still capped");

    // Another instance cannot take the lease, and a stale lease admits nobody.
    assert_eq!(q.lease(s.id, "other", 5000).await.unwrap(), None);
    let stale = sluice::queue::Lease {
        value: "1:someone-else".into(),
        fence: 1,
    };
    assert_eq!(
        q.admit_batch(s.id, &stale, 1, 60_000, 0.0).await.unwrap(),
        AdmitOutcome::LeaseLost
    );

    // Paused: nobody is admitted, whatever the admitter asks for.
    let mut changed = s.clone();
    changed.admission = Admission::parse(60, 3, None).unwrap();
    changed.status = SaleStatus::Paused;
    assert_eq!(q.put_settings(&changed, 1, false).await.unwrap(), Some(1));
    assert_eq!(admit_all(&q, &s, 10).await.len(), 0, "paused");
    // Open again with the raised cap: one more gets in.
    changed.status = SaleStatus::Open;
    assert_eq!(q.put_settings(&changed, 2, false).await.unwrap(), Some(2));
    assert_eq!(admit_all(&q, &s, 10).await.len(), 1);
}

/// The adaptive controller's published state is kept for its TTL and then gone.
async fn controller_state_expires_unless_renewed(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(&q, Stock::Quantity(1), 1).await;
    assert_eq!(q.controller(s.id).await.unwrap(), None);
    q.put_controller(s.id, r#"{"rate":60}"#, 300).await.unwrap();
    assert_eq!(
        q.controller(s.id).await.unwrap().as_deref(),
        Some(r#"{"rate":60}"#)
    );
    tokio::time::sleep(std::time::Duration::from_millis(450)).await;
    assert_eq!(q.controller(s.id).await.unwrap(), None, "expired");
}

async fn unadmit_puts_attempts_back_at_their_place(q: Arc<dyn QueueStore>) {
    let s = three_joined(&q).await;
    let first_two = admit_all(&q, &s, 2).await;
    q.unadmit(s.id, &first_two).await.unwrap();
    let again = admit_all(&q, &s, 3).await;
    let names: Vec<_> = again.iter().map(|a| a.user.as_str().to_owned()).collect();
    assert_eq!(names, ["a", "b", "c"]);
}

async fn holds_are_all_or_nothing_limited_and_restored_once(q: Arc<dyn QueueStore>) {
    let s = fresh_sale(
        &q,
        Stock::Seats(vec!["A1".into(), "A2".into(), "A3".into()]),
        10,
    )
    .await;
    for name in ["a", "b", "c"] {
        q.join(s.id, &user(name), 0).await.unwrap();
    }
    let admitted = admit_all(&q, &s, 3).await;
    let (a, b) = (admitted[0].attempt, admitted[1].attempt);
    let seats = |v: &[&str]| Take::Seats(v.iter().map(|s| s.to_string()).collect());

    assert_eq!(
        q.hold(a, &user("a"), &seats(&["A1", "A2"])).await.unwrap(),
        HoldOutcome::Held {
            take: seats(&["A1", "A2"])
        }
    );
    assert_eq!(
        q.hold(b, &user("b"), &seats(&["A2", "A3"])).await.unwrap(),
        HoldOutcome::SeatTaken { seat: "A2".into() }
    );
    assert_eq!(
        q.stats(s.id).await.unwrap().remaining,
        1,
        "nothing of the refused hold was taken"
    );
    assert_eq!(
        q.hold(b, &user("b"), &Take::Quantity(1)).await.unwrap(),
        HoldOutcome::WrongKind
    );
    let not_admitted = sluice::domain::AttemptId::new(s.id);
    assert_eq!(
        q.hold(not_admitted, &user("x"), &seats(&["A3"]))
            .await
            .unwrap(),
        HoldOutcome::NotAdmitted
    );

    // A hold the ledger could not take: the seats come back, the attempt stays admitted and
    // can hold again.
    let far = chrono::Utc::now().timestamp_millis() + 60_000;
    assert!(q.restore(a, Some(far)).await.unwrap());
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 3);
    assert_eq!(q.stats(s.id).await.unwrap().active, 3, "a keeps its slot");
    assert!(matches!(
        q.hold(a, &user("a"), &seats(&["A1"])).await.unwrap(),
        HoldOutcome::Held { .. }
    ));

    assert!(q.restore(a, None).await.unwrap());
    assert!(!q.restore(a, None).await.unwrap(), "restored once");
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 3);
    assert_eq!(q.stats(s.id).await.unwrap().active, 2, "a's slot is free");

    let qs = sale(Stock::Quantity(5), 10);
    q.init_sale(&qs, 0, &SaleSnapshot::fresh(&qs), false)
        .await
        .unwrap();
    for name in ["a", "b"] {
        q.join(qs.id, &user(name), 0).await.unwrap();
    }
    let admitted = admit_all(&q, &qs, 2).await;
    assert_eq!(
        q.hold(admitted[0].attempt, &user("a"), &Take::Quantity(4))
            .await
            .unwrap(),
        HoldOutcome::LimitReached { already: 0 }
    );
    assert_eq!(
        q.hold(admitted[0].attempt, &user("a"), &Take::Quantity(3))
            .await
            .unwrap(),
        HoldOutcome::Held {
            take: Take::Quantity(3)
        }
    );
    assert_eq!(
        q.hold(admitted[1].attempt, &user("b"), &Take::Quantity(3))
            .await
            .unwrap(),
        HoldOutcome::SoldOut { remaining: 2 }
    );
    finish(&q, admitted[0].attempt).await;
    assert_eq!(
        q.stats(qs.id).await.unwrap().remaining,
        2,
        "a confirmed hold keeps its units"
    );
}

async fn init_keeps_a_live_sale_and_rebuilds_from_a_snapshot(q: Arc<dyn QueueStore>) {
    let s = sale(Stock::Quantity(5), 10);
    assert!(
        q.init_sale(&s, 0, &SaleSnapshot::fresh(&s), false)
            .await
            .unwrap(),
        "a new sale is built"
    );
    q.join(s.id, &user("a"), 0).await.unwrap();
    let a = admit_all(&q, &s, 1).await[0].attempt;
    q.hold(a, &user("a"), &Take::Quantity(2)).await.unwrap();
    // Settings may be rewritten any time; a live sale keeps its counters.
    assert!(!q
        .init_sale(&s, 0, &SaleSnapshot::fresh(&s), false)
        .await
        .unwrap());
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 3);

    // A forced rebuild from the ledger's snapshot: a holds 2, 3 are free, b is admitted.
    let b = sluice::domain::AttemptId::new(s.id);
    let c = sluice::domain::AttemptId::new(s.id);
    let deadline_ms = Utc::now().timestamp_millis() + 60_000;
    let snapshot = SaleSnapshot {
        free: Stock::Quantity(3),
        live: vec![
            LiveAttempt {
                attempt: a,
                user: user("a"),
                deadline_ms,
                hold: Some(Take::Quantity(2)),
            },
            LiveAttempt {
                attempt: b,
                user: user("b"),
                deadline_ms,
                hold: None,
            },
        ],
        bought: vec![(user("a"), 2), (user("c"), 1)],
        buyers: vec![Buyer {
            user: user("c"),
            attempt: c,
            bought: Some(Take::Quantity(1)),
        }],
        reset: true,
    };
    assert!(q.init_sale(&s, 0, &snapshot, true).await.unwrap());
    // c bought before the rebuild: joining again answers that attempt, not a new place.
    assert_eq!(
        q.join(s.id, &user("c"), Utc::now().timestamp_millis())
            .await
            .unwrap(),
        JoinOutcome::Active { attempt: c }
    );
    let stats = q.stats(s.id).await.unwrap();
    assert_eq!((stats.remaining, stats.active), (3, 2));
    let view = q.view(b, &user("b")).await.unwrap();
    assert!(view.known_sale && view.rebuilt_at_ms > 0 && view.active);
    // The rebuilt state works like the original: b may hold, within a's limit a may not add 2.
    assert_eq!(
        q.hold(b, &user("b"), &Take::Quantity(1)).await.unwrap(),
        HoldOutcome::Held {
            take: Take::Quantity(1)
        }
    );
    assert_eq!(
        q.hold(a, &user("a"), &Take::Quantity(1)).await.unwrap(),
        HoldOutcome::Held {
            take: Take::Quantity(2)
        },
        "a's hold is known"
    );
    assert!(
        q.restore(a, None).await.unwrap(),
        "the rebuilt hold gives its units back"
    );
    assert!(!q.restore(a, None).await.unwrap(), "once");
    assert_eq!(q.stats(s.id).await.unwrap().remaining, 4);
}

/// Abandonment: a waiting attempt with no sign of life (join, status) for the store's time
/// loses its place; one that asks keeps it; the user may join again.
mod abandonment {
    use super::*;

    const IDLE_MS: u64 = 400;

    fn redis_store() -> Arc<dyn QueueStore> {
        let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
        let store = RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2))
            .unwrap()
            .with_abandonment(IDLE_MS);
        Arc::new(store)
    }

    fn in_process_store() -> Arc<dyn QueueStore> {
        Arc::new(in_process().with_abandonment(IDLE_MS))
    }

    // Each named test runs on both stores, abandonment on.
    on_queue_stores!(
        [redis: super::redis_store, in_process: super::in_process_store]
        idle_waiters_lose_their_place,
        signs_of_life_move_with_the_draw,
        signs_of_life_of_the_old_numbering_name_nobody,
        signs_of_life_written_apart_from_a_refresh_spare_the_same,
    );

    /// A sale that ten users (u0..u9) joined: the sale, their serials and the line's epoch.
    async fn ten_joined(q: &Arc<dyn QueueStore>) -> (Sale, Vec<u64>, String) {
        let s = fresh_sale(q, Stock::Quantity(5), 10).await;
        let now = chrono::Utc::now().timestamp_millis();
        let mut serials = Vec::new();
        for i in 0..10 {
            match q.join(s.id, &user(&format!("u{i}")), now).await.unwrap() {
                JoinOutcome::Queued { serial, .. } => serials.push(serial),
                other => panic!("{other:?}"),
            }
        }
        let epoch = q.refresh(s.id, "", 0, &[]).await.unwrap().figures.epoch;
        (s, serials, epoch)
    }

    /// Signs of life written in a call of their own (`seen`, for a replica's share beyond one
    /// refresh's) spare those they name as a refresh's do; under another numbering they name
    /// nobody. Of ten silent since they joined, the four named under the line's numbering are
    /// kept, the six others taken.
    async fn signs_of_life_written_apart_from_a_refresh_spare_the_same(q: Arc<dyn QueueStore>) {
        let (s, serials, epoch) = ten_joined(&q).await;
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS * 2 / 3)).await;
        q.seen(s.id, &epoch, &serials[..4]).await.unwrap();
        q.seen(s.id, "another", &serials[4..]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS / 2)).await;
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 6);
        let digest = q.refresh(s.id, &epoch, 0, &[]).await.unwrap();
        assert_eq!(digest.figures.waiting, 4);
    }

    /// Signs of life a replica gathered by the serials of the line before the draw reach the
    /// store after it: those serials name other users now, so they are not written, and the
    /// ten who are silent since they joined are all taken.
    async fn signs_of_life_of_the_old_numbering_name_nobody(q: Arc<dyn QueueStore>) {
        let (s, serials, before) = ten_joined(&q).await;
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS * 2 / 3)).await;
        assert_eq!(draw(&q, &s, "seed-1").await, LotteryDraw::Drawn(10));
        q.refresh(s.id, &before, 0, &serials).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS / 2)).await;
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 10);
    }

    /// The lottery's draw numbers the line anew, and each waiting user's last sign of life
    /// moves with them: of ten who joined, the one who asked since is kept, the nine others
    /// (silent for longer than the abandonment time) are taken.
    async fn signs_of_life_move_with_the_draw(q: Arc<dyn QueueStore>) {
        let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
        let names: Vec<String> = (0..10).map(|i| format!("u{i}")).collect();
        let now = chrono::Utc::now().timestamp_millis();
        let mut attempts = Vec::new();
        for name in &names {
            match q.join(s.id, &user(name), now).await.unwrap() {
                JoinOutcome::Queued { attempt, .. } => attempts.push(attempt),
                other => panic!("{other:?}"),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS * 2 / 3)).await;
        assert!(q
            .view(attempts[4], &user("u4"))
            .await
            .unwrap()
            .position
            .is_some());
        tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS / 2)).await;
        assert_eq!(draw(&q, &s, "seed-1").await, LotteryDraw::Drawn(10));
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 9);
        let kept = q.view(attempts[4], &user("u4")).await.unwrap();
        assert_eq!(
            (kept.abandoned, kept.position),
            (false, Some(1)),
            "{kept:?}"
        );
        let taken = q.view(attempts[0], &user("u0")).await.unwrap();
        assert!(taken.abandoned, "{taken:?}");
    }

    async fn idle_waiters_lose_their_place(q: Arc<dyn QueueStore>) {
        let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
        let now = || chrono::Utc::now().timestamp_millis();
        let joined = |name: &'static str| {
            let q = q.clone();
            async move {
                match q.join(s.id, &user(name), now()).await.unwrap() {
                    JoinOutcome::Queued { attempt, .. } => attempt,
                    other => panic!("{other:?}"),
                }
            }
        };
        let gone = joined("gone").await;
        let present = joined("present").await;
        for _ in 0..4 {
            tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS / 3)).await;
            assert!(q
                .view(present, &user("present"))
                .await
                .unwrap()
                .position
                .is_some());
        }
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 1);
        let view = q.view(gone, &user("gone")).await.unwrap();
        assert!(view.abandoned && view.position.is_none(), "{view:?}");
        let view = q.view(present, &user("present")).await.unwrap();
        assert_eq!((view.abandoned, view.position), (false, Some(1)));
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 0, "once");
        // The user may join again, at the back.
        let again = joined("gone").await;
        assert_ne!(again, gone);
        assert_eq!(
            q.view(again, &user("gone")).await.unwrap().position,
            Some(2)
        );
    }
}

/// On a Redis Cluster every key of a sale lives on one primary (the `{sale:<id>}` hash tag),
/// which is what lets each script touch them all atomically.
#[tokio::test]
async fn on_a_cluster_a_sales_keys_share_one_node() {
    let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
    let q = redis_cluster_with(&prefix);
    let s = three_joined(&q).await;
    let admitted = admit_all(&q, &s, 2).await;
    assert_eq!(admitted.len(), 2);

    let mut holders = Vec::new();
    for url in redis_cluster_nodes().split(',') {
        let mut conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
        let primary = matches!(&role[0], redis::Value::BulkString(b) if b == b"master");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        if primary && !keys.is_empty() {
            holders.push((url.to_string(), keys.len()));
        }
    }
    assert_eq!(holders.len(), 1, "keys of one sale on: {holders:?}");
    assert!(
        holders[0].1 >= 6,
        "queue, active, meta, seq, users, owners...: {holders:?}"
    );
}

/// The lottery's draw on Redis goes a step a call (lua/lottery.lua): while it is made, nobody
/// is admitted or abandoned, a leave is done at once, and whatever happens meanwhile, every
/// place is given once.
mod lottery_in_steps {
    use super::*;
    use futures_util::future::join_all;
    use redis::AsyncCommands;
    use sluice::queue::LeaveOutcome;

    /// A Redis store with abandonment on, and its key prefix.
    fn store() -> (Arc<dyn QueueStore>, String) {
        let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
        let store = RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2))
            .unwrap()
            .with_abandonment(60_000);
        (Arc::new(store), prefix)
    }

    async fn redis_conn() -> redis::aio::MultiplexedConnection {
        redis::Client::open(redis_url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// Admission takes everyone waiting, `order` (by place), once each and in that order.
    async fn admission_follows(q: &Arc<dyn QueueStore>, s: &Sale, order: &[String]) {
        let mut admitted = Vec::new();
        while admitted.len() < order.len() {
            let batch = admit_all(q, s, 1_000).await;
            assert!(!batch.is_empty(), "admission stalled at {}", admitted.len());
            admitted.extend(batch.into_iter().map(|a| a.user.as_str().to_owned()));
        }
        assert_eq!(
            admitted, order,
            "admitted once each, in the order of the places"
        );
    }

    /// None of these (who left) has a place.
    async fn none_waits<'a>(
        q: &Arc<dyn QueueStore>,
        left: impl Iterator<Item = (&'a String, sluice::domain::AttemptId)>,
    ) {
        for (name, attempt) in left {
            let view = q.view(attempt, &user(name)).await.unwrap();
            assert_eq!(view.position, None, "{name} left");
        }
    }

    /// A draw stopped halfway (meta.drawing over serials 1..=10): nobody is admitted or
    /// abandoned, no sign of life is written; a drawn user's leave and a later joiner's go
    /// through.
    #[tokio::test]
    async fn while_the_draw_is_made_nobody_is_admitted_or_abandoned() {
        let (q, prefix) = store();
        let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
        let names: Vec<String> = (0..11).map(|i| format!("u{i}")).collect();
        let attempts = queued(&q, &s, &names).await;
        let meta = format!("{prefix}:{{sale:{}}}:meta", s.id);
        let mut conn = redis_conn().await;
        let drawing = [("drawing", "scan"), ("draw_from", "1"), ("draw_to", "10")];
        let _: () = conn.hset_multiple(&meta, &drawing).await.unwrap();

        assert_eq!(
            q.leave(attempts[0], &user("u0")).await.unwrap(),
            LeaveOutcome::Left,
            "drawn, not yet read by the draw"
        );
        assert_eq!(
            q.leave(attempts[10], &user("u10")).await.unwrap(),
            LeaveOutcome::Left,
            "joined after the draw's line"
        );
        assert!(admit_all(&q, &s, 5).await.is_empty());
        let stale = format!("{prefix}:{{sale:{}}}:seen", s.id);
        let _: () = conn.zadd(&stale, 2, 0).await.unwrap();
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 0);
        // A drawn serial may name someone else by now: asking writes no sign of life for it.
        let _: () = conn.zadd(&stale, 2, 7).await.unwrap();
        q.view(attempts[1], &user("u1")).await.unwrap();
        q.join(s.id, &user("u1"), chrono::Utc::now().timestamp_millis())
            .await
            .unwrap();
        let sign: Option<i64> = conn.zscore(&stale, 2).await.unwrap();
        assert_eq!(sign, Some(7), "u1's serial's sign untouched");
    }

    /// 2,500 waiting, a draw made a step a call; after each step ten of them leave: some not
    /// yet read by the draw, some read and not yet placed, some placed. Each leave is done at
    /// once; afterwards the others keep the draw's order in places 1..=n, the count is right,
    /// admission takes each of them once in that order, and nobody who left is found waiting.
    #[tokio::test]
    async fn a_drawn_user_leaves_at_once_at_every_step_of_the_draw() {
        const N: usize = 2_500;
        let (q, _) = store();
        let s = fresh_sale(&q, Stock::Quantity(5), N as u32).await;
        let names: Vec<String> = (0..N).map(|i| format!("u{i}")).collect();
        let attempts = queued(&q, &s, &names).await;
        let mut left = std::collections::BTreeSet::new();
        let mut steps = 0;
        loop {
            let step = q
                .draw_lottery(s.id, "seed-7", std::time::Duration::ZERO)
                .await
                .unwrap();
            if step != LotteryDraw::UnderWay {
                assert!(matches!(step, LotteryDraw::Drawn(_)), "{step:?}");
                break;
            }
            steps += 1;
            for k in 0..10 {
                let i = (steps * 997 + k * 251) % N;
                if left.insert(i) {
                    assert_eq!(
                        q.leave(attempts[i], &user(&names[i])).await.unwrap(),
                        LeaveOutcome::Left,
                        "{} at step {steps}",
                        names[i]
                    );
                }
            }
        }
        assert!(steps >= 8, "a start, scans and placings: {steps} steps");
        none_waits(&q, left.iter().map(|&i| (&names[i], attempts[i]))).await;
        let waiting: Vec<(String, sluice::domain::AttemptId)> = (0..N)
            .filter(|i| !left.contains(i))
            .map(|i| (names[i].clone(), attempts[i]))
            .collect();
        let mut expected: Vec<String> = waiting.iter().map(|(n, _)| n.clone()).collect();
        expected.sort_by_key(|n| draw_key("seed-7", n));
        let order = by_place(&q, &waiting).await;
        assert_eq!(order, expected, "the draw's order");
        assert_eq!(q.stats(s.id).await.unwrap().waiting, waiting.len() as u64);
        admission_follows(&q, &s, &order).await;
        assert!(admit_all(&q, &s, 1_000).await.is_empty(), "nobody else");
    }

    /// No sign of life can be written while the draw is made, so for an abandonment time after
    /// it the reaper does not count the draw's time: fifty who joined just before a draw made
    /// over about 600 ms (past an abandonment time of 400 ms) are all kept right after it, and
    /// all taken once another abandonment time has passed with no sign from them.
    #[tokio::test]
    async fn the_draws_time_does_not_count_against_the_waiting() {
        let prefix = format!("q{}", uuid::Uuid::new_v4().simple());
        let q: Arc<dyn QueueStore> = Arc::new(
            RedisQueue::new(&redis_url(), &prefix, std::time::Duration::from_secs(2))
                .unwrap()
                .with_abandonment(400),
        );
        let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
        let now = chrono::Utc::now().timestamp_millis();
        for i in 0..50 {
            q.join(s.id, &user(&format!("u{i}")), now).await.unwrap();
        }
        let started = std::time::Instant::now();
        loop {
            let step = q
                .draw_lottery(s.id, "seed-6", std::time::Duration::ZERO)
                .await
                .unwrap();
            if step != LotteryDraw::UnderWay {
                assert_eq!(step, LotteryDraw::Drawn(50));
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        assert!(started.elapsed() >= std::time::Duration::from_millis(600));
        assert_eq!(
            q.abandon(s.id, 100).await.unwrap(),
            0,
            "kept after the draw"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(q.abandon(s.id, 100).await.unwrap(), 50, "silent since");
    }

    /// With no time to spend, each call takes one step and says the draw is under way;
    /// meanwhile nobody is admitted, and the calls that follow make it.
    #[tokio::test]
    async fn a_draw_goes_on_across_calls_that_spend_their_budget() {
        let (q, _) = store();
        let s = fresh_sale(&q, Stock::Quantity(5), 10).await;
        let names: Vec<String> = (0..2_500).map(|i| format!("u{i}")).collect();
        let attempts = queued(&q, &s, &names).await;
        let mut calls = 0;
        let drawn = loop {
            calls += 1;
            match q
                .draw_lottery(s.id, "seed-4", std::time::Duration::ZERO)
                .await
                .unwrap()
            {
                LotteryDraw::UnderWay => {
                    assert!(admit_all(&q, &s, 5).await.is_empty(), "admitted mid-draw");
                }
                done => break done,
            }
        };
        assert_eq!(drawn, LotteryDraw::Drawn(2_500));
        assert!(calls >= 10, "{calls} calls");
        let mut expected = names.clone();
        expected.sort_by_key(|n| draw_key("seed-4", n));
        let waiting: Vec<_> = names.into_iter().zip(attempts).collect();
        assert_eq!(by_place(&q, &waiting).await, expected);
    }

    /// 20,000 waiting; the draw runs while 300 of them leave and 300 others join. Then every
    /// one waiting has one place (1..=n), the drawn keep the draw's order among them, the
    /// count is right and admission takes everyone once, in the order of the places.
    #[tokio::test]
    async fn joins_and_leaves_during_the_draw_lose_and_double_no_place() {
        const N: usize = 20_000;
        const MOVING: usize = 300;
        let (q, _) = store();
        let s = fresh_sale(&q, Stock::Quantity(5), (N + MOVING) as u32).await;
        let names: Vec<String> = (0..N).map(|i| format!("u{i}")).collect();
        let attempts = queued(&q, &s, &names).await;
        let leaving: Vec<usize> = (0..MOVING).map(|i| i * (N / MOVING) + 1).collect();

        let drawing = {
            let (q, s) = (q.clone(), s.clone());
            tokio::spawn(async move { draw(&q, &s, "seed-3").await })
        };
        let leaves = join_all(leaving.iter().map(|&i| {
            let (q, name, attempt) = (q.clone(), names[i].clone(), attempts[i]);
            async move { q.leave(attempt, &user(&name)).await }
        }));
        let joins = join_all((0..MOVING).map(|i| {
            let q = q.clone();
            async move { q.join(s.id, &user(&format!("late{i}")), 0).await }
        }));
        let (left, joined) = tokio::join!(leaves, joins);
        assert!(matches!(drawing.await.unwrap(), LotteryDraw::Drawn(_)));
        for outcome in left {
            assert_eq!(outcome.unwrap(), LeaveOutcome::Left);
        }
        let mut waiting: Vec<(String, sluice::domain::AttemptId)> = names
            .iter()
            .zip(&attempts)
            .enumerate()
            .filter(|(i, _)| !leaving.contains(i))
            .map(|(_, (n, a))| (n.clone(), *a))
            .collect();
        let originals: Vec<String> = waiting.iter().map(|(n, _)| n.clone()).collect();
        for (i, outcome) in joined.into_iter().enumerate() {
            match outcome.unwrap() {
                JoinOutcome::Queued { attempt, .. } => waiting.push((format!("late{i}"), attempt)),
                other => panic!("{other:?}"),
            }
        }
        none_waits(&q, leaving.iter().map(|&i| (&names[i], attempts[i]))).await;

        let order = by_place(&q, &waiting).await;
        let drawn_order: Vec<&String> = order.iter().filter(|n| !n.starts_with("late")).collect();
        let mut expected: Vec<&String> = originals.iter().collect();
        expected.sort_by_key(|n| draw_key("seed-3", n));
        assert_eq!(drawn_order, expected, "the draw's order");
        assert_eq!(q.stats(s.id).await.unwrap().waiting, waiting.len() as u64);
        admission_follows(&q, &s, &order).await;
    }
}
