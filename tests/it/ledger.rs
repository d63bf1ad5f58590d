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
use sluice::ledger::{AdmissionPlan, Ledger, LedgerError, PgLedger, SaleChange, SqliteLedger};
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
    a_seat_has_one_holder_and_unknown_seats_are_named,
    admission_mode_and_bounds_are_kept,
    idempotency_claims_are_exclusive_and_stale_ones_are_taken_over,
    a_sale_is_read_with_its_free_units_counted_or_without,
    a_sale_is_behind_the_store_from_a_change_until_the_store_follows_it,
    the_settings_checked_are_of_the_open_sales_then_the_closed_newest_first,
);

/// A hold claims its units with one locking pass over the sale's free units, whatever the
/// statistics say. Taken while only an older sale's units were in the table (as right after a
/// sale is created), they make the planner think the new sale has next to no units; an
/// `IN (SELECT … FOR UPDATE SKIP LOCKED)` claim was then planned as a nested-loop semi-join that
/// runs the locking sub-select again for every unit, and holds stalled for minutes.
#[tokio::test]
async fn a_hold_claims_units_in_one_locking_pass_even_on_stale_statistics() {
    let (pg, ledger, _older) = ledger_with_an_older_sale().await;
    sqlx::query("ANALYZE").execute(pg.pool()).await.unwrap();
    let sale = new_sale(Stock::Quantity(20_000));
    ledger.create_sale(&sale, None).await.unwrap();

    let plan = explain_claim(&pg, &sale, sluice::ledger::postgres::CLAIM_FREE_UNITS, true).await;
    assert!(
        plan.contains("InitPlan") && plan.contains("Tid Scan") && !plan.contains("Loop"),
        "the locking sub-select runs once, then the claim goes by row address:\n{plan}"
    );
    // The setup does reproduce the hazard: the old form of the claim is planned as a semi-join.
    let old = explain_claim(
        &pg,
        &sale,
        "UPDATE stock_units SET attempt_id = $2 WHERE sale_id = $1 AND unit_id IN (
             SELECT unit_id FROM stock_units WHERE sale_id = $1 AND attempt_id IS NULL
             LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING unit_id",
        false,
    )
    .await;
    assert!(old.contains("Semi Join"), "{old}");
}

/// A new sale's units are stored behind the rows of older sales, whose units are held. A hold
/// reaches the new sale's free units through the free-units index, not by reading the table
/// from its start: for a `LIMIT`, the planner counted on free rows spread over the whole table
/// and chose a sequential scan, so every hold read all older sales' rows.
#[tokio::test]
async fn a_hold_reaches_a_new_sale_s_units_by_index_behind_older_held_units() {
    let (pg, ledger, older) = ledger_with_an_older_sale().await;
    sqlx::query("UPDATE stock_units SET attempt_id = gen_random_uuid() WHERE sale_id = $1")
        .bind(older.id.0)
        .execute(pg.pool())
        .await
        .unwrap();
    let sale = new_sale(Stock::Quantity(20_000));
    ledger.create_sale(&sale, None).await.unwrap();
    sqlx::query("ANALYZE").execute(pg.pool()).await.unwrap();

    let claim = sluice::ledger::postgres::CLAIM_FREE_UNITS;
    let plan = explain_claim(&pg, &sale, claim, true).await;
    assert!(
        plan.contains("Index Scan using stock_units_free") && !plan.contains("Seq Scan"),
        "the free units are found by index:\n{plan}"
    );
    // The setup does reproduce the hazard: left to itself, the planner scans the table.
    let unguided = explain_claim(&pg, &sale, claim, false).await;
    assert!(unguided.contains("Seq Scan"), "{unguided}");
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

/// The plan of a claim (`$1` sale, `$2` attempt, `$3` units) of one unit of `sale`, in a
/// transaction that first says what the ledger's holds say (`by_index`) or not.
async fn explain_claim(pg: &PgLedger, sale: &Sale, claim: &str, by_index: bool) -> String {
    let mut tx = pg.pool().begin().await.unwrap();
    if by_index {
        sqlx::query(sluice::ledger::postgres::FREE_UNITS_BY_INDEX)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {claim}"))
        .bind(sale.id.0)
        .bind(uuid::Uuid::now_v7())
        .bind(1_i64)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    lines.join("\n")
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
    };
    ledger.record_admissions(&plan, &admitted).await.unwrap();
    admitted.into_iter().map(|a| (a.attempt, a.user)).collect()
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
