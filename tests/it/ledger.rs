//! The ledger contract, on PostgreSQL and on SQLite. The ledger alone is the last guard: with
//! the queue store bypassed (as if Redis were wiped or stale), concurrent holds still never take
//! more than the stock, and a seat has one holder.

use std::sync::Arc;

use chrono::Utc;
use futures_util::future::join_all;
use sluice::domain::{
    Admission, AdmissionMode, AttemptEvent, AttemptId, NewSale, Sale, SaleStatus, Stock, Ttls,
    UserId,
};
use sluice::ledger::{
    AdmissionPlan, ClaimAsk, Claimed, EventAsk, Ledger, LedgerError, PgLedger, SaleChange,
    SqliteLedger,
};
use sluice::queue::{Admitted, Take};

use crate::helpers::fresh_database;

async fn postgres() -> Arc<dyn Ledger> {
    let url = fresh_database().await;
    let ledger = PgLedger::new(&url, 20, std::time::Duration::from_secs(5)).unwrap();
    ledger.migrate().await.unwrap();
    Arc::new(ledger)
}

async fn sqlite() -> Arc<dyn Ledger> {
    let path = std::env::temp_dir()
        .join(format!("sluice-ledger-{}", uuid::Uuid::new_v4().simple()))
        .join("sluice.db");
    let ledger = SqliteLedger::open(&path, 4, std::time::Duration::from_secs(5)).unwrap();
    ledger.migrate().await.unwrap();
    Arc::new(ledger)
}

/// Each named test runs once per ledger.
macro_rules! on_every_ledger {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn postgres() {
                super::$name(super::postgres().await).await
            }
            #[tokio::test]
            async fn sqlite() {
                super::$name(super::sqlite().await).await
            }
        }
    )*};
}

on_every_ledger!(
    concurrent_holds_without_the_queue_store_never_oversell,
    a_batch_of_holds_is_one_transaction_and_each_keeps_its_outcome,
    concurrent_batches_of_holds_never_oversell,
    claims_are_recorded_once_and_a_user_claims_once,
    a_seat_has_one_holder_and_unknown_seats_are_named,
    admission_mode_and_bounds_are_kept,
    idempotency_claims_are_exclusive_and_stale_ones_are_taken_over,
    a_sale_is_read_with_its_free_units_counted_or_without,
    a_sale_is_behind_the_store_from_a_change_until_the_store_follows_it,
    the_settings_checked_are_of_the_open_sales_then_the_closed_newest_first,
);

/// A quantity sale's free units are one counter: a sale of a million units is made with one
/// row (it inserted a row per unit, 5.5 s), and a hold takes its units from that row however
/// many were sold before (claiming rows walked the free-units index past every row taken).
#[tokio::test]
async fn a_quantity_sale_is_one_counter_and_holds_take_from_it() {
    let (pg, ledger, _older) = ledger_with_an_older_sale().await;
    let sale = new_sale(Stock::Quantity(1_000_000));
    ledger.create_sale(&sale, None).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM stock_units WHERE sale_id = $1")
        .bind(sale.id.0)
        .fetch_one(pg.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0, "no row per unit");
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(1_000_000));
    let held = admitted(&ledger, &sale, 3).await;
    for (id, user) in &held {
        ledger
            .apply(
                *id,
                Some(user),
                AttemptEvent::Hold,
                Some(&Take::Quantity(2)),
            )
            .await
            .unwrap();
    }
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(999_994));
    assert_eq!(
        ledger.sale(sale.id).await.unwrap().unwrap().remaining,
        999_994
    );
    // A hold given back comes back to the counter, once.
    let (id, user) = &held[0];
    ledger
        .apply(*id, Some(user), AttemptEvent::Release, None)
        .await
        .unwrap();
    ledger
        .apply(*id, Some(user), AttemptEvent::Release, None)
        .await
        .unwrap();
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(999_996));
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN UPDATE quantity_stock SET free = free - 1 WHERE sale_id = $1 AND free >= 1",
    )
    .bind(sale.id.0)
    .fetch_all(pg.pool())
    .await
    .unwrap();
    assert!(
        plan.join("\n").contains("quantity_stock_pkey"),
        "one row by its key: {plan:?}"
    );
}

/// A hold of named seats reaches each seat by its id in the free-units index, even right after
/// its sale is made (the statistics know nothing of its seats). Claimed as a list (`unit_id IN
/// (…)` or `= ANY`), the planner read every free seat of the sale to find them.
#[tokio::test]
async fn a_hold_reaches_named_seats_by_id_even_on_stale_statistics() {
    let (pg, ledger, _older) = ledger_with_an_older_sale().await;
    sqlx::query("ANALYZE").execute(pg.pool()).await.unwrap();
    let seats: Vec<String> = (1..=5_000).map(|n| format!("A-1-{n}")).collect();
    let sale = new_sale(Stock::Seats(seats));
    ledger.create_sale(&sale, None).await.unwrap();
    let plan = |claim: &'static str, seat: &'static str| {
        let pg = pg.clone();
        async move {
            let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {claim}"))
                .bind(sale.id.0)
                .bind(uuid::Uuid::now_v7())
                .bind(seat)
                .fetch_all(pg.pool())
                .await
                .unwrap();
            lines.join("\n")
        }
    };
    let by_id = plan(sluice::ledger::postgres::CLAIM_SEAT, "A-1-42").await;
    assert!(
        by_id
            .lines()
            .any(|l| l.contains("Index Cond") && l.contains("unit_id =")),
        "the seat is found by its id:\n{by_id}"
    );
    // The setup does reproduce the hazard: the list form reads the sale's free seats.
    let list = plan(
        "UPDATE stock_units SET attempt_id = $2 WHERE sale_id = $1 AND attempt_id IS NULL
             AND unit_id IN (SELECT value FROM jsonb_array_elements_text($3::jsonb))
             RETURNING unit_id",
        r#"["A-1-42"]"#,
    )
    .await;
    assert!(list.contains("Join Filter"), "{list}");
}

/// A PostgreSQL ledger holding one sale of 20,000 units, for the plan tests.
async fn ledger_with_an_older_sale() -> (PgLedger, Arc<dyn Ledger>, Sale) {
    let pg = PgLedger::new(
        &fresh_database().await,
        5,
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    pg.migrate().await.unwrap();
    let ledger: Arc<dyn Ledger> = Arc::new(pg.clone());
    let older = new_sale(Stock::Quantity(20_000));
    ledger.create_sale(&older, None).await.unwrap();
    (pg, ledger, older)
}

/// One request per (user, key) runs; the others find its claim, then its answer. A failed
/// request frees its key; a claim whose process died is taken over once stale.
async fn idempotency_claims_are_exclusive_and_stale_ones_are_taken_over(ledger: Arc<dyn Ledger>) {
    let user = UserId::parse("claimer").unwrap();
    assert!(ledger.reserve_key(&user, "k1", "h1", 30).await.unwrap());
    assert!(
        !ledger.reserve_key(&user, "k1", "h1", 30).await.unwrap(),
        "claimed"
    );
    assert_eq!(
        ledger
            .saved_response(&user, "k1")
            .await
            .unwrap()
            .unwrap()
            .status,
        0
    );
    let answer = sluice::ledger::SavedResponse {
        request_hash: "h1".into(),
        status: 200,
        body: serde_json::json!({"ok": true}),
    };
    ledger.save_response(&user, "k1", &answer).await.unwrap();
    ledger.release_key(&user, "k1").await.unwrap(); // a finished answer stays
    let saved = ledger.saved_response(&user, "k1").await.unwrap().unwrap();
    assert_eq!(
        (saved.status, saved.body),
        (200, serde_json::json!({"ok": true}))
    );
    assert!(
        !ledger.reserve_key(&user, "k1", "h1", 0).await.unwrap(),
        "never taken over once answered"
    );

    assert!(ledger.reserve_key(&user, "k2", "h2", 30).await.unwrap());
    ledger.release_key(&user, "k2").await.unwrap();
    assert!(
        ledger.reserve_key(&user, "k2", "h2", 30).await.unwrap(),
        "free again after a failure"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(
        !ledger.reserve_key(&user, "k2", "h2", 30).await.unwrap(),
        "fresh claim holds"
    );
    assert!(
        ledger.reserve_key(&user, "k2", "h2", 1).await.unwrap(),
        "stale claim taken over"
    );
}

/// Adaptive bounds are stored, read back with the sale and by the admission loop, and
/// cleared when the sale goes back to manual.
async fn admission_mode_and_bounds_are_kept(ledger: Arc<dyn Ledger>) {
    let sale = new_sale(Stock::Quantity(5));
    ledger.create_sale(&sale, None).await.unwrap();
    let adaptive = Admission::parse(600, 50, Some((60, 3000))).unwrap();
    let record = ledger
        .change_sale(sale.id, SaleChange::Admission(adaptive), None)
        .await
        .unwrap();
    assert_eq!(
        record.sale.admission.mode,
        AdmissionMode::Adaptive { min: 60, max: 3000 }
    );
    let plans = ledger.admitting_sales().await.unwrap();
    let plan = plans.iter().find(|p| p.sale == sale.id).expect("open sale");
    assert_eq!(plan.admission, adaptive);
    let manual = Admission::parse(120, 50, None).unwrap();
    ledger
        .change_sale(sale.id, SaleChange::Admission(manual), None)
        .await
        .unwrap();
    let record = ledger.sale(sale.id).await.unwrap().unwrap();
    assert_eq!(record.sale.admission, manual);
}

fn new_sale(stock: Stock) -> Sale {
    let (quantity, seats) = match stock {
        Stock::Quantity(n) => (Some(n), None),
        Stock::Seats(s) => (None, Some(s)),
    };
    NewSale {
        name: "ledger".into(),
        opens_at: None,
        closes_at: None,
        quantity,
        seats,
        per_user_limit: 10,
        ttls: Ttls {
            admission_secs: 60,
            hold_secs: 60,
            payment_secs: 60,
        },
        rate_per_minute: 60,
        max_active: 1000,
        adaptive: None,
        lottery: None,
        layout: None,
        price: Default::default(),
        instant: false,
    }
    .parse(Utc::now())
    .unwrap()
}

/// `sale` counts the free units (a hold takes two of five); `sale_settings`, read every second
/// for the offer, is the same sale without the count; neither knows an unknown sale.
async fn a_sale_is_read_with_its_free_units_counted_or_without(ledger: Arc<dyn Ledger>) {
    let seated = new_sale(Stock::Seats(vec!["A1".into(), "A2".into()]));
    ledger.create_sale(&seated, None).await.unwrap();
    let sale = new_sale(Stock::Quantity(5));
    ledger.create_sale(&sale, None).await.unwrap();
    let (attempt, user) = admitted(&ledger, &sale, 1).await.remove(0);
    ledger
        .apply(
            attempt,
            Some(&user),
            AttemptEvent::Hold,
            Some(&Take::Quantity(2)),
        )
        .await
        .unwrap();
    let counted = ledger.sale(sale.id).await.unwrap().unwrap();
    assert_eq!(counted.remaining, 3);
    let settings = ledger.sale_settings(sale.id).await.unwrap().unwrap();
    assert_eq!(settings, counted.sale);
    let seats = ledger.sale_settings(seated.id).await.unwrap().unwrap();
    assert_eq!(seats.stock, Stock::Seats(vec!["A1".into(), "A2".into()]));
    let unknown = new_sale(Stock::Quantity(1)).id;
    assert!(ledger.sale(unknown).await.unwrap().is_none());
    assert!(ledger.sale_settings(unknown).await.unwrap().is_none());
}

/// A change to what the queue store keeps of a sale (status, admission, details; not its proof
/// of work) puts the sale behind the store at the change's version until the store is recorded
/// to have followed that version; a late record of an older version leaves a newer change
/// behind.
async fn a_sale_is_behind_the_store_from_a_change_until_the_store_follows_it(
    ledger: Arc<dyn Ledger>,
) {
    let sale = new_sale(Stock::Quantity(5));
    ledger.create_sale(&sale, None).await.unwrap();
    let behind = |ledger: Arc<dyn Ledger>| async move {
        let all = ledger.sales_behind_store(100).await.unwrap();
        all.into_iter()
            .filter(|(id, _)| *id == sale.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(behind(ledger.clone()).await, vec![], "a new sale");
    let followed = |ledger: Arc<dyn Ledger>| async move {
        let all = ledger.sales_followed_within(60_000, 100).await.unwrap();
        all.into_iter()
            .filter(|(id, _)| *id == sale.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(followed(ledger.clone()).await, vec![], "never followed");
    let pow = sluice::domain::ProofOfWork::parse(8).unwrap();
    ledger
        .change_sale(sale.id, SaleChange::ProofOfWork(&pow), None)
        .await
        .unwrap();
    assert_eq!(
        behind(ledger.clone()).await,
        vec![],
        "the store keeps no proof of work"
    );
    let paused = ledger
        .change_sale(
            sale.id,
            SaleChange::Status(sluice::domain::SaleStatus::Paused),
            None,
        )
        .await
        .unwrap();
    let first = paused.settings_version;
    assert_eq!(behind(ledger.clone()).await, vec![(sale.id, first)]);
    let details = SaleChange::Details {
        name: Some("renamed"),
        closes_at: None,
    };
    let renamed = ledger.change_sale(sale.id, details, None).await.unwrap();
    let manual = Admission::parse(120, 50, None).unwrap();
    let tuned = ledger
        .change_sale(sale.id, SaleChange::Admission(manual), None)
        .await
        .unwrap();
    assert!(first < renamed.settings_version && renamed.settings_version < tuned.settings_version);
    assert_eq!(
        ledger
            .sale(sale.id)
            .await
            .unwrap()
            .unwrap()
            .settings_version,
        tuned.settings_version
    );
    ledger.store_followed(sale.id, first).await.unwrap();
    assert_eq!(
        behind(ledger.clone()).await,
        vec![(sale.id, tuned.settings_version)]
    );
    ledger
        .store_followed(sale.id, tuned.settings_version)
        .await
        .unwrap();
    assert_eq!(behind(ledger.clone()).await, vec![]);
    ledger.store_followed(sale.id, first).await.unwrap();
    assert_eq!(
        behind(ledger.clone()).await,
        vec![],
        "an older version recorded late"
    );
    assert_eq!(
        followed(ledger.clone()).await,
        vec![(sale.id, tuned.settings_version)],
        "followed a moment ago, at the latest version the store took"
    );
    assert_eq!(
        ledger.sales_followed_within(0, 100).await.unwrap(),
        vec![],
        "not within the last 0 ms"
    );
}

/// The drift checker compares the settings of every sale not closed, then of the closed ones,
/// the newest first (a queue store restored from an old snapshot holds them open again), at
/// most as many as asked, each with its latest version.
async fn the_settings_checked_are_of_the_open_sales_then_the_closed_newest_first(
    ledger: Arc<dyn Ledger>,
) {
    let mut sales = Vec::new();
    for _ in 0..4 {
        let sale = new_sale(Stock::Quantity(5));
        ledger.create_sale(&sale, None).await.unwrap();
        sales.push(sale.id);
    }
    let [paused, older_closed, newer_closed, open] = sales[..] else {
        unreachable!()
    };
    let mut version = std::collections::HashMap::new();
    for (id, status) in [
        (paused, SaleStatus::Paused),
        // Closed in the other order than made: the newest made comes first.
        (newer_closed, SaleStatus::Closed),
        (older_closed, SaleStatus::Closed),
    ] {
        let record = ledger
            .change_sale(id, SaleChange::Status(status), None)
            .await
            .unwrap();
        version.insert(id, record.settings_version);
    }
    let open_version = ledger.sale(open).await.unwrap().unwrap().settings_version;
    version.insert(open, open_version);
    let expected: Vec<_> = [open, paused, newer_closed, older_closed]
        .into_iter()
        .map(|id| (id, version[&id]))
        .collect();
    let checked = ledger.sales_settings_to_check(100).await.unwrap();
    // The two open ones in either order, then the closed ones, the newest first.
    assert_eq!(
        checked[..2]
            .iter()
            .collect::<std::collections::HashSet<_>>(),
        expected[..2].iter().collect(),
        "the open sales first: {checked:?}"
    );
    assert_eq!(checked[2..], expected[2..], "then the closed, newest first");
    assert_eq!(ledger.sales_settings_to_check(3).await.unwrap().len(), 3);
}

/// `n` attempts admitted straight into the ledger.
async fn admitted(ledger: &Arc<dyn Ledger>, sale: &Sale, n: usize) -> Vec<(AttemptId, UserId)> {
    let admitted: Vec<Admitted> = (0..n)
        .map(|i| Admitted {
            attempt: AttemptId::new(sale.id),
            seq: i as u64 + 1,
            user: UserId::parse(&format!("u{i}")).unwrap(),
            deadline_ms: 0,
        })
        .collect();
    let plan = AdmissionPlan {
        sale: sale.id,
        admission: sale.admission,
        admission_ttl_secs: 60,
        opening: sale.opening.clone(),
        closes_at: None,
        instant: false,
    };
    ledger.record_admissions(&plan, &admitted).await.unwrap();
    admitted.into_iter().map(|a| (a.attempt, a.user)).collect()
}

/// Holds of one sale asked together: each gets its own outcome. One short of units is sold
/// out while a smaller one after it still fits; another user's attempt is not found; a hold
/// repeated in the batch answers the hold; a checkout in the same batch moves on. The units
/// taken are exactly those granted, and each granted attempt has its audit row and event.
async fn a_batch_of_holds_is_one_transaction_and_each_keeps_its_outcome(ledger: Arc<dyn Ledger>) {
    let sale = new_sale(Stock::Quantity(5));
    ledger.create_sale(&sale, None).await.unwrap();
    let a = admitted(&ledger, &sale, 5).await;
    let hold = |i: usize, n: u32| EventAsk {
        id: a[i].0,
        user: Some(a[i].1.clone()),
        event: AttemptEvent::Hold,
        take: Some(Take::Quantity(n)),
    };
    let mut stranger = hold(4, 1);
    stranger.user = Some(UserId::parse("stranger").unwrap());
    let asks = vec![
        hold(0, 2),
        hold(1, 2),
        hold(2, 2),
        hold(3, 1),
        stranger,
        hold(0, 2),
    ];
    let outcomes = ledger.apply_all(sale.id, &asks).await.unwrap();
    let states: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            Ok(applied) => applied.record.state.to_string(),
            Err(e) => format!("{e:?}"),
        })
        .collect();
    assert_eq!(
        states,
        ["HOLD", "HOLD", "SoldOut", "HOLD", "NotFound", "HOLD"],
        "{outcomes:?}"
    );
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(0));
    for i in [0, 1, 3] {
        let record = ledger.attempt(a[i].0).await.unwrap().unwrap();
        assert!(record.hold.is_some() && record.hold_expires_at.is_some());
        let trail = ledger.trail(a[i].0).await.unwrap();
        assert_eq!(trail.len(), 2, "admit, hold: {trail:?}");
    }
    assert!(ledger
        .attempt(a[2].0)
        .await
        .unwrap()
        .unwrap()
        .hold
        .is_none());
    // Checkouts and a release in one batch: each as alone.
    let event = |i: usize, event| EventAsk {
        id: a[i].0,
        user: Some(a[i].1.clone()),
        event,
        take: None,
    };
    let asks = vec![
        event(0, AttemptEvent::Checkout),
        event(1, AttemptEvent::Release),
        event(2, AttemptEvent::Checkout),
        event(3, AttemptEvent::Checkout),
    ];
    let outcomes = ledger.apply_all(sale.id, &asks).await.unwrap();
    assert_eq!(
        outcomes[0].as_ref().unwrap().record.state.name(),
        "PAYMENT_PENDING"
    );
    assert!(outcomes[0]
        .as_ref()
        .unwrap()
        .record
        .payment_reference
        .is_some());
    assert_eq!(outcomes[1].as_ref().unwrap().record.state.name(), "EXPIRED");
    assert!(
        matches!(outcomes[2], Err(LedgerError::Rejected(_))),
        "{:?}",
        outcomes[2]
    );
    assert_eq!(
        outcomes[3].as_ref().unwrap().record.state.name(),
        "PAYMENT_PENDING"
    );
    assert_eq!(
        ledger.free_units(sale.id).await.unwrap(),
        Some(2),
        "the release gave 2 back"
    );
}

/// Batches of holds from many writers at once (one sale, more asks than units): never more
/// units taken than the sale has, and the ledger's count equals what was granted.
async fn concurrent_batches_of_holds_never_oversell(ledger: Arc<dyn Ledger>) {
    let sale = new_sale(Stock::Quantity(50));
    ledger.create_sale(&sale, None).await.unwrap();
    let attempts = admitted(&ledger, &sale, 120).await;
    let batches = attempts.chunks(15).map(|chunk| {
        let ledger = ledger.clone();
        let asks: Vec<EventAsk> = chunk
            .iter()
            .map(|(id, user)| EventAsk {
                id: *id,
                user: Some(user.clone()),
                event: AttemptEvent::Hold,
                take: Some(Take::Quantity(1)),
            })
            .collect();
        async move { ledger.apply_all(sale.id, &asks).await.unwrap() }
    });
    let outcomes: Vec<_> = join_all(batches).await.into_iter().flatten().collect();
    let held = outcomes.iter().filter(|o| o.is_ok()).count();
    let sold_out = outcomes
        .iter()
        .filter(|o| matches!(o, Err(LedgerError::SoldOut)))
        .count();
    assert_eq!((held, sold_out), (50, 70));
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(0));
    let stats = ledger.stats(sale.id).await.unwrap();
    assert_eq!((stats.holding, stats.units_held), (50, 50));
}

/// An instant sale's claims: recorded CONFIRMED with one unit each while the ledger has
/// units, then sold out; recorded again, a claim answers as it is (nothing taken twice); a
/// user's claim under another attempt answers the first.
async fn claims_are_recorded_once_and_a_user_claims_once(ledger: Arc<dyn Ledger>) {
    let mut sale = new_sale(Stock::Quantity(3));
    sale.instant = true;
    ledger.create_sale(&sale, None).await.unwrap();
    let claim = |user: &str, seq: u64| ClaimAsk {
        attempt: AttemptId::new(sale.id),
        user: UserId::parse(user).unwrap(),
        seq,
    };
    let first = vec![claim("a", 1), claim("b", 2), claim("c", 3), claim("d", 4)];
    let outcomes = ledger.record_claims(sale.id, &first).await.unwrap();
    for o in &outcomes[..3] {
        match o {
            Ok(Claimed::Recorded(applied)) => {
                assert_eq!(applied.record.state.name(), "CONFIRMED");
                assert_eq!(applied.record.hold.as_ref().unwrap().quantity, 1);
                assert!(applied.decision().changed);
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        matches!(outcomes[3], Err(LedgerError::SoldOut)),
        "{:?}",
        outcomes[3]
    );
    assert_eq!(ledger.free_units(sale.id).await.unwrap(), Some(0));
    // The same claims again (a retry): as they are, nothing taken.
    let again = ledger.record_claims(sale.id, &first[..2]).await.unwrap();
    for (o, c) in again.iter().zip(&first) {
        match o {
            Ok(Claimed::Recorded(applied)) => {
                assert_eq!(applied.record.id, c.attempt);
                assert!(!applied.decision().changed);
            }
            other => panic!("{other:?}"),
        }
    }
    // User a again, under a new attempt (a store that lost the claim): the first answers.
    let lost = ledger
        .record_claims(sale.id, &[claim("a", 9)])
        .await
        .unwrap();
    match &lost[0] {
        Ok(Claimed::Before(record)) => assert_eq!(record.id, first[0].attempt),
        other => panic!("{other:?}"),
    }
    let stats = ledger.stats(sale.id).await.unwrap();
    assert_eq!(
        (stats.confirmed, stats.units_sold, stats.remaining),
        (3, 3, 0)
    );
    let trail = ledger.trail(first[0].attempt).await.unwrap();
    assert_eq!(
        trail.len(),
        1,
        "QUEUED -> CONFIRMED by its claim: {trail:?}"
    );
    assert_eq!(trail[0].cause, "claim");
}

async fn concurrent_holds_without_the_queue_store_never_oversell(ledger: Arc<dyn Ledger>) {
    let sale = new_sale(Stock::Quantity(20));
    ledger.create_sale(&sale, None).await.unwrap();
    let attempts = admitted(&ledger, &sale, 60).await;
    let results = join_all(attempts.iter().map(|(id, user)| {
        let ledger = ledger.clone();
        async move {
            ledger
                .apply(
                    *id,
                    Some(user),
                    AttemptEvent::Hold,
                    Some(&Take::Quantity(1)),
                )
                .await
        }
    }))
    .await;
    let held = results.iter().filter(|r| r.is_ok()).count();
    let sold_out = results
        .iter()
        .filter(|r| matches!(r, Err(LedgerError::SoldOut)))
        .count();
    assert_eq!((held, sold_out), (20, 40));
    let record = ledger.sale(sale.id).await.unwrap().unwrap();
    assert_eq!(record.remaining, 0);

    // Releasing one hold frees exactly its unit, once.
    let winner = attempts
        .iter()
        .zip(&results)
        .find(|(_, r)| r.is_ok())
        .unwrap()
        .0;
    for _ in 0..3 {
        ledger
            .apply(winner.0, Some(&winner.1), AttemptEvent::Release, None)
            .await
            .unwrap();
    }
    assert_eq!(ledger.sale(sale.id).await.unwrap().unwrap().remaining, 1);
}

async fn a_seat_has_one_holder_and_unknown_seats_are_named(ledger: Arc<dyn Ledger>) {
    let sale = new_sale(Stock::Seats(vec!["A1".into(), "A2".into()]));
    ledger.create_sale(&sale, None).await.unwrap();
    let attempts = admitted(&ledger, &sale, 10).await;
    let seat = Take::Seats(vec!["A1".into()]);
    let results = join_all(attempts.iter().map(|(id, user)| {
        let (ledger, seat) = (ledger.clone(), seat.clone());
        async move {
            ledger
                .apply(*id, Some(user), AttemptEvent::Hold, Some(&seat))
                .await
        }
    }))
    .await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results
        .iter()
        .filter(|r| r.is_err())
        .all(|r| matches!(r, Err(LedgerError::SeatTaken(s)) if s == "A1")));
    let (id, user) = &attempts
        .iter()
        .zip(&results)
        .find(|(_, r)| r.is_err())
        .unwrap()
        .0;
    let unknown = ledger
        .apply(
            *id,
            Some(user),
            AttemptEvent::Hold,
            Some(&Take::Seats(vec!["Z9".into()])),
        )
        .await;
    assert!(matches!(unknown, Err(LedgerError::UnknownSeat(s)) if s == "Z9"));
    assert_eq!(
        ledger.snapshot(sale.id).await.unwrap().free,
        Stock::Seats(vec!["A2".into()])
    );
}

/// An embedded ledger written before both schemas shared their column names (SQLite's times
/// were `*_ms` columns) is upgraded in place at start: its sale, attempt and audit trail read
/// back under the new names, and the attempt goes on through the machine.
#[tokio::test]
async fn an_embedded_ledger_of_the_earlier_schema_is_upgraded_in_place() {
    const ONE_VOCABULARY: i64 = 20261202000002;
    let path = std::env::temp_dir()
        .join(format!("sluice-ledger-{}", uuid::Uuid::new_v4().simple()))
        .join("sluice.db");
    let ledger = SqliteLedger::open(&path, 4, std::time::Duration::from_secs(5)).unwrap();
    let mut earlier = sqlx::migrate!("./migrations/sqlite");
    let before: Vec<_> = earlier
        .migrations
        .iter()
        .filter(|m| m.version < ONE_VOCABULARY)
        .cloned()
        .collect();
    assert!(
        before.len() < earlier.migrations.len(),
        "the renaming migration exists"
    );
    earlier.migrations = before.into();
    earlier.run(ledger.pool()).await.unwrap();

    let (sale, attempt) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let (opens, deadline) = (1_700_000_000_000i64, 4_000_000_000_000i64);
    for statement in [
        "INSERT INTO sales (id, name, opens_at_ms, stock_kind, total, per_user_limit, admission_ttl_secs, hold_ttl_secs, payment_ttl_secs, rate_per_minute, max_active, status, created_at_ms)
         VALUES (?1, 'Before', ?3, 'quantity', 2, 1, 60, 60, 60, 60, 10, 'open', ?3)",
        "INSERT INTO stock_units (sale_id, unit_id) VALUES (?1, '1'), (?1, '2')",
        "INSERT INTO attempts (id, sale_id, user_id, seq, state, admitted_at_ms, admission_expires_at_ms, updated_at_ms)
         VALUES (?2, ?1, 'u', 1, 'ADMITTED', ?3, ?4, ?3)",
        "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, cause, at_ms)
         VALUES (?2, 'QUEUED', 'ADMITTED', 'admit', ?3)",
    ] {
        sqlx::query(statement)
            .bind(sale)
            .bind(attempt)
            .bind(opens)
            .bind(deadline)
            .execute(ledger.pool())
            .await
            .unwrap();
    }

    ledger.migrate().await.unwrap();
    let id = AttemptId {
        sale: sluice::domain::SaleId(sale),
        local: attempt,
    };
    let record = ledger.sale(id.sale).await.unwrap().unwrap();
    assert_eq!(record.sale.name, "Before");
    assert_eq!(record.sale.opens_at.timestamp_millis(), opens);
    assert_eq!(record.remaining, 2);
    let before = ledger.attempt(id).await.unwrap().unwrap();
    assert_eq!(before.admission_expires_at.timestamp_millis(), deadline);
    let applied = ledger
        .apply(
            id,
            Some(&UserId::parse("u").unwrap()),
            AttemptEvent::Leave,
            None,
        )
        .await
        .unwrap();
    assert_eq!(applied.record.state.name(), "EXPIRED");
    let trail: Vec<(String, String)> = sqlx::query_as(
        "SELECT cause, to_state FROM attempt_transitions WHERE attempt_id = ? ORDER BY id",
    )
    .bind(attempt)
    .fetch_all(ledger.pool())
    .await
    .unwrap();
    assert_eq!(
        trail,
        [
            ("admit".into(), "ADMITTED".into()),
            ("leave".into(), "EXPIRED".into())
        ]
    );
}
