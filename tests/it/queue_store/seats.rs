//! Named seats in the queue store, on every store: best available (seats side by side, none
//! stranded, the same pick on every store as `domain::best_seats::pick`, and hundreds asking
//! at once never sharing a seat) and the seat log a replica's seat map reads.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use sluice::domain::best_seats::{self, BestAsk, Blocks};
use sluice::domain::venue::{Layout, Row, Seat, SeatState, Section, Stage};
use sluice::domain::{Sale, SaleSnapshot, Stock, StockChange};
use sluice::queue::{Admitted, HoldOutcome, QueueStore, SeatChanges, SyncChange, Take};

use super::{admit_all, change, fresh_sale, queued, user};

on_every_queue_store!(
    best_available_takes_seats_side_by_side_nearest_the_stage_and_strands_none,
    two_hundred_asking_at_once_get_seats_side_by_side_and_never_the_same,
    the_seat_log_brings_a_version_up_to_date_or_says_to_read_whole,
    best_available_finds_seats_freed_in_blocks_it_had_found_full,
    best_available_finds_room_another_ask_made_in_a_block_it_had_passed,
);

/// `rows` rows of `per_row` seats in one section, row 1 nearest the stage, every seat "R".
fn layout(rows: u32, per_row: u32) -> Layout {
    Layout {
        name: "Hall".into(),
        stage: Stage {
            label: "STAGE".into(),
            x: 0.0,
            y: 0.0,
            width: 100.0 * f64::from(per_row + 1),
            height: 100.0,
        },
        sections: vec![Section {
            id: "A".into(),
            name: "A".into(),
            rows: (1..=rows)
                .map(|r| Row {
                    id: r.to_string(),
                    seats: (1..=per_row)
                        .map(|n| Seat {
                            number: n.to_string(),
                            x: 100.0 * f64::from(n),
                            y: 100.0 + 100.0 * f64::from(r),
                            category: Some("R".into()),
                            wheelchair: false,
                            restricted_view: false,
                        })
                        .collect(),
                })
                .collect(),
        }],
        single_gaps: false,
    }
}

fn ask(count: u32) -> BestAsk {
    BestAsk {
        count,
        category: None,
        section: None,
    }
}

fn seats_of(outcome: &HoldOutcome) -> Vec<String> {
    match outcome {
        HoldOutcome::Held {
            take: Take::Seats(seats),
        } => seats.clone(),
        other => panic!("not held: {other:?}"),
    }
}

/// The seat's row and number (`A-3-12`: 3, 12).
fn place(seat: &str) -> (u32, u32) {
    let mut parts = seat.split('-').skip(1).map(|p| p.parse().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Rows (by their id) where a single free seat sits between taken ones or a taken one and the
/// row's end.
fn stranded(free: &HashSet<String>, rows: u32, per_row: u32) -> Vec<String> {
    let mut out = Vec::new();
    for r in 1..=rows {
        let is_free = |n: u32| free.contains(&format!("A-{r}-{n}"));
        let taken_any = (1..=per_row).any(|n| !is_free(n));
        for n in 1..=per_row {
            let left_closed = n == 1 || !is_free(n - 1);
            let right_closed = n == per_row || !is_free(n + 1);
            if taken_any && is_free(n) && left_closed && right_closed {
                out.push(format!("A-{r}-{n}"));
            }
        }
    }
    out
}

/// A sale of `hall`'s seats (at most `max_active` admitted) that `names` joined, in order,
/// and were all admitted to.
async fn admitted_to(
    q: &Arc<dyn QueueStore>,
    hall: &Layout,
    max_active: u32,
    names: impl IntoIterator<Item = impl AsRef<str>>,
) -> (Sale, Vec<Admitted>) {
    let s = fresh_sale(q, Stock::Seats(hall.seat_ids()), max_active).await;
    let attempts = queued(q, &s, names).await;
    let admitted = admit_all(q, &s, attempts.len() as u32).await;
    assert_eq!(admitted.len(), attempts.len());
    (s, admitted)
}

async fn free_seats(q: &Arc<dyn QueueStore>, sale: sluice::domain::SaleId) -> HashSet<String> {
    match q.holdings(sale).await.unwrap().unwrap().free {
        Stock::Seats(free) => free.into_iter().collect(),
        Stock::Quantity(_) => panic!("a sale of seats"),
    }
}

async fn best_available_takes_seats_side_by_side_nearest_the_stage_and_strands_none(
    q: Arc<dyn QueueStore>,
) {
    let hall = layout(2, 6);
    let names = ["a", "b", "c", "d", "e"];
    let (s, admitted) = admitted_to(&q, &hall, 10, names).await;
    let blocks: Blocks = best_seats::blocks(&hall, None);
    // Row 1 of 6: the stage spans the row, every seat as near; a pair at the row's start
    // leaves 4 together.
    let a = q
        .hold_best(admitted[0].attempt, &user("a"), &ask(2), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&a), ["A-1-1", "A-1-2"]);
    // Three more cannot go in row 1's four without stranding one: row 2.
    let b = q
        .hold_best(admitted[1].attempt, &user("b"), &ask(3), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&b), ["A-2-1", "A-2-2", "A-2-3"]);
    // Asked again, the same hold comes back (idempotent), nothing more taken.
    let again = q
        .hold_best(admitted[1].attempt, &user("b"), &ask(3), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&again), seats_of(&b));
    // Every store picks what the reference picks, seat for seat.
    for (i, count) in [(2, 2), (3, 1)] {
        let free = free_seats(&q, s.id).await;
        let expected = best_seats::pick(&blocks, &ask(count), |id| free.contains(id));
        let got = q
            .hold_best(admitted[i].attempt, &user(names[i]), &ask(count), &blocks)
            .await
            .unwrap();
        assert_eq!(Some(seats_of(&got)), expected, "ask {i} of {count}");
    }
    let free = free_seats(&q, s.id).await;
    assert!(stranded(&free, 2, 6).is_empty(), "{free:?}");
    // What is left cannot seat three together without stranding one.
    let left = q
        .hold_best(admitted[4].attempt, &user("e"), &ask(3), &blocks)
        .await
        .unwrap();
    assert_eq!(
        left,
        HoldOutcome::NoAdjacent {
            free: free.len() as u32
        },
        "{free:?}"
    );
    assert_eq!(
        free_seats(&q, s.id).await,
        free,
        "a refused ask takes nothing"
    );
}

async fn two_hundred_asking_at_once_get_seats_side_by_side_and_never_the_same(
    q: Arc<dyn QueueStore>,
) {
    let (rows, per_row) = (10, 50);
    let hall = layout(rows, per_row);
    let names: Vec<String> = (0..200).map(|i| format!("u{i}")).collect();
    let (s, admitted) = admitted_to(&q, &hall, 200, &names).await;
    assert_eq!(admitted.len(), 200);
    let blocks = Arc::new(best_seats::blocks(&hall, None));
    let asks = admitted.iter().enumerate().map(|(i, a)| {
        let (q, blocks, who) = (Arc::clone(&q), Arc::clone(&blocks), a.user.clone());
        let attempt = a.attempt;
        // Ones, twos and threes, as friends come.
        let count = [2, 1, 3, 2][i % 4];
        tokio::spawn(async move {
            (
                count,
                q.hold_best(attempt, &who, &ask(count), &blocks)
                    .await
                    .unwrap(),
            )
        })
    });
    let mut taken = HashSet::new();
    let mut held = 0;
    for outcome in futures_util::future::join_all(asks).await {
        let (count, outcome) = outcome.unwrap();
        let seats = seats_of(&outcome);
        assert_eq!(seats.len(), count as usize);
        let places: Vec<(u32, u32)> = seats.iter().map(|s| place(s)).collect();
        assert!(
            places
                .windows(2)
                .all(|w| w[0].0 == w[1].0 && w[0].1 + 1 == w[1].1),
            "side by side in one row: {seats:?}"
        );
        for seat in seats {
            assert!(taken.insert(seat.clone()), "{seat} given twice");
            held += 1;
        }
    }
    assert_eq!(held, 50 * 2 + 50 + 50 * 3 + 50 * 2, "every buyer got seats");
    let free = free_seats(&q, s.id).await;
    assert_eq!(
        free.len() + taken.len(),
        (rows * per_row) as usize,
        "0 oversold"
    );
    assert!(free.is_disjoint(&taken));
    assert!(
        stranded(&free, rows, per_row).is_empty(),
        "{:?}",
        stranded(&free, rows, per_row)
    );
}

async fn the_seat_log_brings_a_version_up_to_date_or_says_to_read_whole(q: Arc<dyn QueueStore>) {
    let hall = layout(1, 6);
    let s = fresh_sale(&q, Stock::Seats(hall.seat_ids()), 10).await;
    let SeatChanges::Whole { version, epoch } = q.seat_changes(s.id, 0, "").await.unwrap() else {
        panic!("a reader with nothing reads whole");
    };
    queued(&q, &s, ["a", "b"]).await;
    let admitted = admit_all(&q, &s, 2).await;
    let (a, b) = (admitted[0].attempt, admitted[1].attempt);
    let take = |v: &[&str]| Take::Seats(v.iter().map(|s| s.to_string()).collect());
    q.hold(a, &user("a"), &take(&["A-1-1", "A-1-2"]))
        .await
        .unwrap();
    q.hold(b, &user("b"), &take(&["A-1-5"])).await.unwrap();
    q.apply_sync(&change(a, SyncChange::Finish)).await.unwrap();
    q.apply_sync(&change(b, SyncChange::Restore)).await.unwrap();
    q.adjust_stock(s.id, &StockChange::WithdrawSeats(vec!["A-1-6".into()]))
        .await
        .unwrap();
    let SeatChanges::Since {
        version: now,
        epoch: same,
        changes,
    } = q.seat_changes(s.id, version, &epoch).await.unwrap()
    else {
        panic!("the log has every change since");
    };
    assert_eq!(same, epoch);
    let mut states: BTreeMap<String, SeatState> = BTreeMap::new();
    let mut versions = Vec::new();
    for c in &changes {
        versions.push(c.version);
        for seat in &c.seats {
            states.insert(seat.clone(), c.state);
        }
    }
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(
        states,
        BTreeMap::from([
            ("A-1-1".to_owned(), SeatState::Sold),
            ("A-1-2".to_owned(), SeatState::Sold),
            ("A-1-5".to_owned(), SeatState::Free),
            ("A-1-6".to_owned(), SeatState::Off),
        ])
    );
    // From the middle: only what came after.
    let SeatChanges::Since { changes: tail, .. } =
        q.seat_changes(s.id, versions[2], &epoch).await.unwrap()
    else {
        panic!("from the middle");
    };
    assert_eq!(tail, changes[3..]);
    // Up to date: nothing. Another epoch, or a version the store never had: read whole.
    let SeatChanges::Since { changes: none, .. } = q.seat_changes(s.id, now, &epoch).await.unwrap()
    else {
        panic!("up to date");
    };
    assert!(none.is_empty());
    assert!(matches!(
        q.seat_changes(s.id, version, "another").await.unwrap(),
        SeatChanges::Whole { .. }
    ));
    assert!(matches!(
        q.seat_changes(s.id, now + 100, &epoch).await.unwrap(),
        SeatChanges::Whole { .. }
    ));
    // A rebuild starts the log anew: a reader from before reads whole.
    q.init_sale(&s, 0, &SaleSnapshot::fresh(&s), true)
        .await
        .unwrap();
    assert!(matches!(
        q.seat_changes(s.id, now, &epoch).await.unwrap(),
        SeatChanges::Whole { .. }
    ));
}

/// Best available skips the blocks it found full on earlier asks, until seats are freed: a
/// released hold or seats put back on sale in the front rows are found again.
async fn best_available_finds_seats_freed_in_blocks_it_had_found_full(q: Arc<dyn QueueStore>) {
    let hall = layout(3, 2);
    let names = ["a", "b", "c", "d", "e"];
    let (s, admitted) = admitted_to(&q, &hall, 10, names).await;
    let blocks = best_seats::blocks(&hall, None);
    for (i, row) in [(0, 1), (1, 2), (2, 3)] {
        let got = q
            .hold_best(admitted[i].attempt, &user(names[i]), &ask(2), &blocks)
            .await
            .unwrap();
        assert_eq!(seats_of(&got), [format!("A-{row}-1"), format!("A-{row}-2")]);
    }
    let full = q
        .hold_best(admitted[3].attempt, &user("d"), &ask(1), &blocks)
        .await
        .unwrap();
    assert_eq!(full, HoldOutcome::NoAdjacent { free: 0 });
    // Row 1 is released: the next ask finds it, though every block was full before.
    q.restore(admitted[0].attempt, None).await.unwrap();
    let again = q
        .hold_best(admitted[3].attempt, &user("d"), &ask(2), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&again), ["A-1-1", "A-1-2"]);
    // Row 2's seats withdrawn and one put back on sale: found as well.
    q.restore(admitted[1].attempt, None).await.unwrap();
    let row2 = vec!["A-2-1".to_owned(), "A-2-2".to_owned()];
    q.adjust_stock(s.id, &StockChange::WithdrawSeats(row2.clone()))
        .await
        .unwrap();
    let none = q
        .hold_best(admitted[4].attempt, &user("e"), &ask(1), &blocks)
        .await
        .unwrap();
    assert_eq!(none, HoldOutcome::NoAdjacent { free: 0 });
    q.adjust_stock(s.id, &StockChange::AddSeats(row2[1..].to_vec()))
        .await
        .unwrap();
    let back = q
        .hold_best(admitted[4].attempt, &user("e"), &ask(1), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&back), ["A-2-2"]);
}

/// A block best available passed for lack of room for two (three free: two would strand the
/// third) gets room once a buyer of one takes its end seat: the next ask for two finds it.
async fn best_available_finds_room_another_ask_made_in_a_block_it_had_passed(
    q: Arc<dyn QueueStore>,
) {
    let hall = layout(2, 3);
    let (_, admitted) = admitted_to(&q, &hall, 10, ["a", "b"]).await;
    let blocks = best_seats::blocks(&hall, None);
    let none = q
        .hold_best(admitted[0].attempt, &user("a"), &ask(2), &blocks)
        .await
        .unwrap();
    assert_eq!(none, HoldOutcome::NoAdjacent { free: 6 });
    let one = q
        .hold_best(admitted[1].attempt, &user("b"), &ask(1), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&one), ["A-1-1"]);
    let two = q
        .hold_best(admitted[0].attempt, &user("a"), &ask(2), &blocks)
        .await
        .unwrap();
    assert_eq!(seats_of(&two), ["A-1-2", "A-1-3"]);
}
