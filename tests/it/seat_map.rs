//! Venue layouts and seat maps, on both configurations: a layout's round trip and its refused
//! seats, a sale made from one, and its seat map equal to the ledger's seats after holds,
//! releases, an expiry and purchases; its stream as `asyncapi.yaml` documents it; best
//! available for hundreds at once.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use sluice::domain::AttemptEvent;

use crate::catalogue::assert_seat_map_event_documented;
use crate::helpers::{assert_problem, Backend, SseStream, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_layout_round_trips_and_a_bad_seat_is_named,
    a_sale_of_a_layout_sells_its_seats_at_their_categorys_price,
    the_seat_map_equals_the_ledgers_seats_after_holds_releases_an_expiry_and_purchases,
    a_seat_map_stream_resumes_from_its_last_id_and_sends_each_change_once,
    a_map_refresh_reads_only_the_seats_changed,
    many_first_readers_of_a_map_cost_one_read,
    best_available_seats_two_hundred_buyers_side_by_side_and_sells_no_seat_twice,
    best_available_refuses_what_it_cannot_give_and_takes_nothing,
);

// Over Redis and PostgreSQL a map's read waits on them, so a request can go away in the middle
// of it (the embedded store answers at once).
crate::on_configurations!([servers: Servers] a_map_read_cut_short_does_not_stop_the_map_from_being_read_again);

/// A hall: sections A (VIP rows 1-2, R row 3) and B (R), `per_row` seats a row.
fn hall(per_row: u32) -> Value {
    let row = |id: &str, category: &str, y: f64| {
        let seats: Vec<Value> = (1..=per_row)
            .map(|n| {
                json!({ "number": n.to_string(), "x": 100.0 * n as f64, "y": y,
                        "category": category, "wheelchair": n == 1, "restricted_view": false })
            })
            .collect();
        json!({ "id": id, "seats": seats })
    };
    json!({
        "name": "Olympic Hall",
        "stage": { "label": "STAGE", "x": 0.0, "y": 0.0, "width": 2000.0, "height": 300.0 },
        "sections": [
            { "id": "A", "name": "Floor A",
              "rows": [row("1", "VIP", 400.0), row("2", "VIP", 500.0), row("3", "R", 600.0)] },
            { "id": "B", "name": "Balcony", "rows": [row("1", "R", 900.0)] }
        ],
        "single_gaps": false
    })
}

async fn upload(t: &TestApp, layout: &Value) -> reqwest::Response {
    t.admin(Method::POST, "/v1/layouts")
        .json(layout)
        .send()
        .await
        .unwrap()
}

async fn layout_id(t: &TestApp, layout: &Value) -> String {
    let resp = upload(t, layout).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

async fn a_layout_round_trips_and_a_bad_seat_is_named(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let layout = hall(4);
    let resp = upload(&t, &layout).await;
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["seats"], 16);
    let id = created["id"].as_str().unwrap();
    let back = t
        .admin_json(Method::GET, &format!("/v1/layouts/{id}"))
        .await;
    assert_eq!(back, layout, "the layout comes back as it went");

    let mut twice = hall(4);
    twice["sections"][0]["rows"][1]["seats"][2]["number"] = json!("2");
    let refused: Value = upload(&t, &twice).await.json().await.unwrap();
    assert_eq!(refused["status"], 422);
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("seat A-2-2 appears twice"),
        "{refused}"
    );
    let mut off = hall(4);
    off["sections"][1]["rows"][0]["seats"][3]["x"] = json!(-5.0);
    let refused: Value = upload(&t, &off).await.json().await.unwrap();
    assert!(
        refused["detail"].as_str().unwrap().contains("seat B-1-4"),
        "{refused}"
    );
    let listed = t.admin_json(Method::GET, "/v1/layouts").await;
    assert_eq!(
        listed["layouts"].as_array().unwrap().len(),
        1,
        "nothing else kept"
    );
    assert_eq!(listed["layouts"][0]["name"], "Olympic Hall");
}

async fn a_sale_of_a_layout_sells_its_seats_at_their_categorys_price(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let layout = layout_id(&t, &hall(3)).await;
    let sale = t
        .create_sale(
            json!({ "quantity": null, "layout_id": layout, "currency": "KRW",
            "unit_price": 10_000,
            "categories": [{ "name": "VIP", "unit_price": 150_000 },
                           { "name": "R", "unit_price": 99_000 }] }),
        )
        .await;
    let got = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(got["total"], 12, "{got}");
    assert_eq!(got["layout_id"], json!(layout));
    let (attempt, token) = t.admitted(&sale, "fan").await;
    let held = t
        .hold(
            &attempt,
            "fan",
            json!({ "admission_token": token, "seat_ids": ["A-1-2", "B-1-3"] }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let held: Value = held.json().await.unwrap();
    assert_eq!(held["hold"]["amount"], 150_000 + 99_000, "{held}");
    // A category the layout does not have is refused, as are seats given beside the layout.
    let unknown = t
        .admin(Method::POST, "/v1/sales")
        .json(
            &json!({ "name": "x", "layout_id": layout, "currency": "KRW", "unit_price": 1,
            "categories": [{ "name": "GOLD", "unit_price": 1 }] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 422);
    let both = t
        .admin(Method::POST, "/v1/sales")
        .json(&json!({ "name": "x", "layout_id": layout, "seats": ["A-1-1"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(both.status(), 422);
}

/// Each seat's state on the map, by its id (`A-1-3` → `f`).
fn decode(map: &Value) -> BTreeMap<String, char> {
    let mut seats = BTreeMap::new();
    for section in map["sections"].as_array().unwrap() {
        for row in section["rows"].as_array().unwrap() {
            let runs = row["states"].as_str().unwrap();
            let mut number = 1;
            let mut chars = runs.chars().peekable();
            while let Some(state) = chars.next() {
                let mut count = String::new();
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    count.push(chars.next().unwrap());
                }
                for _ in 0..count.parse::<u32>().unwrap() {
                    seats.insert(
                        format!(
                            "{}-{}-{number}",
                            section["id"].as_str().unwrap(),
                            row["id"].as_str().unwrap()
                        ),
                        state,
                    );
                    number += 1;
                }
            }
        }
    }
    seats
}

/// The ledger's seats: held (HOLD, PAYMENT_PENDING), sold (CONFIRMED), the rest free.
async fn ledger_seats(t: &TestApp, sale: &str, all: &[String]) -> BTreeMap<String, char> {
    let mut seats: BTreeMap<String, char> = all.iter().map(|s| (s.clone(), 'f')).collect();
    for state in ["HOLD", "PAYMENT_PENDING", "CONFIRMED"] {
        let mut cursor = String::new();
        loop {
            let page = t
                .admin_json(
                    Method::GET,
                    &format!("/v1/sales/{sale}/attempts?state={state}&limit=100{cursor}"),
                )
                .await;
            for attempt in page["attempts"].as_array().unwrap() {
                for seat in attempt["seat_ids"].as_array().into_iter().flatten() {
                    let mark = if state == "CONFIRMED" { 's' } else { 'h' };
                    seats.insert(seat.as_str().unwrap().to_owned(), mark);
                }
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
    }
    seats
}

async fn the_seat_map_equals_the_ledgers_seats_after_holds_releases_an_expiry_and_purchases(
    backend: Backend,
) {
    let t = TestApp::spawn_on(backend).await;
    let layout = layout_id(&t, &hall(10)).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "layout_id": layout, "per_user_limit": 3 }))
        .await;
    let all: Vec<String> = ["A-1", "A-2", "A-3", "B-1"]
        .iter()
        .flat_map(|row| (1..=10).map(move |n| format!("{row}-{n}")))
        .collect();
    let map_path = format!("/v1/public/sales/{sale}/seat-map");
    let first = t.get_json(&map_path).await;
    assert_eq!(first["free"], 40);

    // Twelve buyers take seats spread over the hall (in the order of k * 7 + 3 mod 40, a
    // permutation); then some release, one lets the hold run out, some pay, some stay held
    // or paying.
    let mut spread = (0..all.len()).map(|k| all[(k * 7 + 3) % all.len()].clone());
    let mut attempts = Vec::new();
    for i in 0..12 {
        let user = format!("buyer-{i}");
        let seats: Vec<String> = spread.by_ref().take(1 + i % 3).collect();
        let (attempt, token) = t.admitted(&sale, &user).await;
        let held = t
            .hold(
                &attempt,
                &user,
                json!({ "admission_token": token, "seat_ids": seats }),
            )
            .await;
        assert_eq!(held.status(), 200, "{}", held.text().await.unwrap());
        attempts.push((user, attempt));
    }
    for (i, (user, attempt)) in attempts.iter().enumerate() {
        match i % 4 {
            0 => {
                let released = t
                    .as_user(
                        Method::DELETE,
                        &format!("/v1/attempts/{attempt}/hold"),
                        user,
                    )
                    .send()
                    .await
                    .unwrap();
                assert_eq!(released.status(), 200);
            }
            1 => {
                let paying: Value = t.checkout(attempt, user).await.json().await.unwrap();
                let reference = paying["payment"]["reference"].as_str().unwrap();
                let paid = t
                    .webhook(&format!("evt-{i}"), "payment.succeeded", reference)
                    .await;
                assert_eq!(paid.status(), 200);
            }
            2 if i == 2 => t.pass_deadline(attempt, AttemptEvent::HoldTimeout).await,
            2 => assert_eq!(t.checkout(attempt, user).await.status(), 200),
            _ => {}
        }
    }
    // The hold that ran out is given back by the reaper first.
    let (user, attempt) = &attempts[2];
    t.wait_for(attempt, user, "EXPIRED", Duration::from_secs(10))
        .await;
    // The map catches up with the ledger within its refresh.
    let mut last = (BTreeMap::new(), BTreeMap::new());
    for _ in 0..60 {
        let map = t.get_json(&map_path).await;
        let ledger = ledger_seats(&t, &sale, &all).await;
        let drawn = decode(&map);
        if drawn == ledger {
            let counts = |c| ledger.values().filter(|v| **v == c).count() as u64;
            assert_eq!(map["free"], counts('f'));
            assert_eq!(map["held"], counts('h'));
            assert_eq!(map["sold"], counts('s'));
            assert!(counts('s') >= 3 && counts('h') >= 3, "{ledger:?}");
            // Unchanged, it is not sent again.
            let etag = t.http.get(t.url(&map_path)).send().await.unwrap().headers()["etag"].clone();
            let again = t
                .http
                .get(t.url(&map_path))
                .header("If-None-Match", etag)
                .send()
                .await
                .unwrap();
            assert_eq!(again.status(), 304);
            return;
        }
        last = (drawn, ledger);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "the map never equalled the ledger:\nmap    {:?}\nledger {:?}",
        last.0, last.1
    );
}

/// A stream of the seat map: the whole map first, then each change as it comes (the seats and
/// their new state); reopened with its last id, it sends the changes since, each once, and not
/// the ones before.
async fn a_seat_map_stream_resumes_from_its_last_id_and_sends_each_change_once(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.queue.line_refresh_ms = sluice::config::Millis(200)
    })
    .await;
    let layout = layout_id(&t, &hall(4)).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "layout_id": layout, "per_user_limit": 2 }))
        .await;
    let path = format!("/v1/public/sales/{sale}/seat-map/events");
    let within = Duration::from_secs(5);
    let mut stream = SseStream::open(t.http.get(t.url(&path))).await;
    let (event, first_id, first) = stream.next(within).await.expect("the map");
    assert_eq!(event, "map");
    assert_seat_map_event_documented(&event, &first);
    assert_eq!(first["map"]["free"], 16);
    assert_eq!(first_id, first["version"].to_string());

    // A hold: its seats come as held.
    let (attempt, token) = t.admitted(&sale, "streamer").await;
    let held = t
        .hold(
            &attempt,
            "streamer",
            json!({ "admission_token": token, "seat_ids": ["A-1-2", "B-1-4"] }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let mut seen = BTreeMap::new();
    let mut last_id = first_id.clone();
    while seen.len() < 2 {
        let (event, id, data) = stream.next(within).await.expect("the hold's seats");
        assert_eq!(event, "seats", "{data}");
        assert_seat_map_event_documented(&event, &data);
        assert_eq!(
            data["from_version"].to_string(),
            last_id,
            "one change after another"
        );
        for change in data["seats"].as_array().unwrap() {
            seen.insert(
                change["seat"].as_str().unwrap().to_owned(),
                change["state"].clone(),
            );
        }
        last_id = id;
    }
    assert_eq!(seen["A-1-2"], "held");
    assert_eq!(seen["B-1-4"], "held");
    drop(stream);

    // Away, the hold is released; back with the last id, only that comes, once.
    let released = t
        .as_user(
            Method::DELETE,
            &format!("/v1/attempts/{attempt}/hold"),
            "streamer",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(released.status(), 200);
    // Let this replica's view see it before the stream comes back.
    for _ in 0..50 {
        if t.get_json(&format!("/v1/public/sales/{sale}/seat-map"))
            .await["free"]
            == 16
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut again =
        SseStream::open(t.http.get(t.url(&path)).header("Last-Event-ID", &last_id)).await;
    let mut back = BTreeMap::new();
    while back.len() < 2 {
        let (event, _, data) = again.next(within).await.expect("the release's seats");
        assert_eq!(
            event, "seats",
            "the changes since, not the whole map: {data}"
        );
        for change in data["seats"].as_array().unwrap() {
            let seat = change["seat"].as_str().unwrap().to_owned();
            assert!(
                back.insert(seat, change["state"].clone()).is_none(),
                "each change once"
            );
        }
    }
    assert_eq!(back["A-1-2"], "free");
    assert_eq!(back["B-1-4"], "free");
    assert!(
        again.next(Duration::from_millis(800)).await.is_none(),
        "nothing more: the hold is not sent again"
    );
}

/// A request for the map that goes away while this replica reads it (a client gone) does not
/// leave the sale marked as being read: later requests read it again as it changes.
async fn a_map_read_cut_short_does_not_stop_the_map_from_being_read_again(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.queue.line_refresh_ms = sluice::config::Millis(200)
    })
    .await;
    let layout = layout_id(&t, &hall(4)).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "layout_id": layout }))
        .await;
    let path = format!("/v1/public/sales/{sale}/seat-map");
    assert_eq!(t.get_json(&path).await["free"], 16);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Cut short while it reads the stale map again: polled once, then dropped. (A read can
    // end at its first poll when a store fails fast, as a loaded machine has it do: then
    // again, once the map is stale.)
    use futures_util::FutureExt;
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let mut cut = Vec::new();
    for _ in 0..10 {
        match sluice::service::seat_map::seat_map(&t.app, id).now_or_never() {
            None => break,
            Some(ended) => cut.push(ended.map(|m| m.version)),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(cut.len() < 10, "never cut short: {cut:?}");
    let (attempt, token) = t.admitted(&sale, "late").await;
    let held = t
        .hold(
            &attempt,
            "late",
            json!({ "admission_token": token, "seat_ids": ["A-2-1"] }),
        )
        .await;
    assert_eq!(held.status(), 200);
    for _ in 0..30 {
        if t.get_json(&path).await["held"] == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the map was never read again after a read cut short");
}

/// Store calls of `call` this sluice made so far.
async fn store_calls(t: &TestApp, call: &str) -> f64 {
    t.counter(
        "sluice_queue_call_duration_seconds_count",
        &[("call", call)],
    )
    .await
}

/// After the first map, each refresh asks the store only for the seats changed since its
/// version (`seat_changes`); the sale's holdings are not read again however the seats change.
async fn a_map_refresh_reads_only_the_seats_changed(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.queue.line_refresh_ms = sluice::config::Millis(100);
        c.workers.drift_check_ms = sluice::config::Millis(3_600_000);
    })
    .await;
    let layout = layout_id(&t, &hall(10)).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "layout_id": layout, "per_user_limit": 2 }))
        .await;
    let map_path = format!("/v1/public/sales/{sale}/seat-map");
    assert_eq!(t.get_json(&map_path).await["free"], 40);
    let (holdings, changes) = (
        store_calls(&t, "holdings").await,
        store_calls(&t, "seat_changes").await,
    );
    for i in 0..6 {
        let user = format!("fan-{i}");
        let (attempt, token) = t.admitted(&sale, &user).await;
        let seat = format!("A-1-{}", i + 1);
        let held = t
            .hold(
                &attempt,
                &user,
                json!({ "admission_token": token, "seat_ids": [seat] }),
            )
            .await;
        assert_eq!(held.status(), 200);
        let mut map = t.get_json(&map_path).await;
        for _ in 0..50 {
            if map["held"] == i + 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            map = t.get_json(&map_path).await;
        }
        assert_eq!(map["held"], i + 1, "{map}");
    }
    assert_eq!(
        store_calls(&t, "holdings").await,
        holdings,
        "no whole read after the first map"
    );
    assert!(store_calls(&t, "seat_changes").await >= changes + 6.0);
}

/// `rows` rows of `per_row` seats, all category R, in one section.
fn block_hall(rows: u32, per_row: u32) -> Value {
    let rows: Vec<Value> = (1..=rows)
        .map(|r| {
            let seats: Vec<Value> = (1..=per_row)
                .map(|n| {
                    json!({ "number": n.to_string(), "x": 100.0 * n as f64,
                                 "y": 400.0 + 100.0 * r as f64, "category": "R" })
                })
                .collect();
            json!({ "id": r.to_string(), "seats": seats })
        })
        .collect();
    json!({
        "name": "Arena",
        "stage": { "label": "STAGE", "x": 0.0, "y": 0.0, "width": 10000.0, "height": 300.0 },
        "sections": [{ "id": "A", "name": "Floor", "rows": rows }]
    })
}

/// Seat `A-<row>-<n>` as (row, n).
fn row_and_number(seat: &str) -> (u32, u32) {
    let mut parts = seat.split('-').skip(1).map(|p| p.parse().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Two hundred admitted buyers ask for best available at once (ones, twos and threes): each
/// gets seats side by side in one row, no seat goes to two, no single seat is left stranded
/// in a row, and the ledger holds exactly what the answers say (0 oversold).
async fn best_available_seats_two_hundred_buyers_side_by_side_and_sells_no_seat_twice(
    backend: Backend,
) {
    use futures_util::future::join_all;
    use std::sync::Arc;
    const BUYERS: usize = 200;
    let (rows, per_row) = (10, 50);
    let t = Arc::new(TestApp::spawn_on(backend).await);
    let layout = layout_id(&t, &block_hall(rows, per_row)).await;
    let sale = t
        .create_sale(
            json!({ "quantity": null, "layout_id": layout, "per_user_limit": 3,
            "rate_per_minute": 600000, "max_active": BUYERS }),
        )
        .await;
    let gate = Arc::new(tokio::sync::Semaphore::new(50));
    let joined = join_all((0..BUYERS).map(|i| {
        let (t, sale, gate) = (t.clone(), sale.clone(), gate.clone());
        async move {
            let _permit = gate.acquire().await.unwrap();
            let user = format!("fan-{i}");
            let (attempt, token) = t.admitted(&sale, &user).await;
            (user, attempt, token)
        }
    }))
    .await;
    let start = Arc::new(tokio::sync::Barrier::new(BUYERS));
    let asks = joined
        .into_iter()
        .enumerate()
        .map(|(i, (user, attempt, token))| {
            let (t, start) = (t.clone(), start.clone());
            let count = [2, 1, 3, 2][i % 4];
            tokio::spawn(async move {
                start.wait().await;
                let resp = t
                    .hold(
                        &attempt,
                        &user,
                        json!({ "admission_token": token, "best_available": { "count": count } }),
                    )
                    .await;
                let status = resp.status().as_u16();
                (count, status, resp.json::<Value>().await.unwrap())
            })
        });
    let mut given: BTreeMap<String, char> = BTreeMap::new();
    for answer in join_all(asks).await {
        let (count, status, body) = answer.unwrap();
        assert_eq!(status, 200, "{body}");
        let seats: Vec<String> = body["hold"]["seat_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(seats.len(), count);
        let places: Vec<(u32, u32)> = seats.iter().map(|s| row_and_number(s)).collect();
        assert!(
            places
                .windows(2)
                .all(|w| w[0].0 == w[1].0 && w[0].1 + 1 == w[1].1),
            "side by side in one row: {seats:?}"
        );
        for seat in seats {
            assert!(
                given.insert(seat.clone(), 'h').is_none(),
                "{seat} given twice"
            );
        }
    }
    assert_eq!(given.len(), 50 * (2 + 1 + 3 + 2));
    let all: Vec<String> = (1..=rows)
        .flat_map(|r| (1..=per_row).map(move |n| format!("A-{r}-{n}")))
        .collect();
    let ledger = ledger_seats(&t, &sale, &all).await;
    let held: BTreeMap<String, char> = ledger
        .iter()
        .filter(|(_, state)| **state == 'h')
        .map(|(seat, state)| (seat.clone(), *state))
        .collect();
    assert_eq!(
        held, given,
        "the ledger holds what the answers gave, no more"
    );
    for r in 1..=rows {
        let free = |n: u32| n >= 1 && n <= per_row && ledger[&format!("A-{r}-{n}")] == 'f';
        for n in 1..=per_row {
            assert!(
                !(free(n) && !free(n - 1) && !free(n + 1)) || (1..=per_row).all(free),
                "A-{r}-{n} is left alone"
            );
        }
    }
    let stats = t.stats(&sale).await;
    assert_eq!(
        stats["remaining"],
        (all.len() - given.len()) as u64,
        "{stats}"
    );
}

/// Best available on a sale without a layout, a category or section the layout lacks, or
/// beside `seat_ids` is refused (422); with no seats together left it is 409
/// `no-adjacent-seats`; none of them takes a seat.
async fn best_available_refuses_what_it_cannot_give_and_takes_nothing(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let layout = layout_id(&t, &block_hall(1, 3)).await;
    let sale = t
        .create_sale(json!({ "quantity": null, "layout_id": layout, "per_user_limit": 3 }))
        .await;
    let (attempt, token) = t.admitted(&sale, "fan").await;
    for (body, field) in [
        (
            json!({ "best_available": { "count": 2, "category": "VIP" } }),
            "best_available.category",
        ),
        (
            json!({ "best_available": { "count": 2, "section": "Z" } }),
            "best_available.section",
        ),
        (
            json!({ "best_available": { "count": 2 }, "seat_ids": ["A-1-1"] }),
            "best_available",
        ),
    ] {
        let mut body = body;
        body["admission_token"] = json!(token);
        let refused = assert_problem(
            t.hold(&attempt, "fan", body).await,
            422,
            "/problems/validation",
        )
        .await;
        assert!(
            refused["detail"].as_str().unwrap().contains(field)
                || refused.to_string().contains(field),
            "{refused}"
        );
    }
    // Three seats in a row: two together would strand the third.
    let none = assert_problem(
        t.hold(
            &attempt,
            "fan",
            json!({ "admission_token": token, "best_available": { "count": 2 } }),
        )
        .await,
        409,
        "/problems/no-adjacent-seats",
    )
    .await;
    assert!(
        none["detail"]
            .as_str()
            .unwrap()
            .contains("3 seats are free"),
        "{none}"
    );
    let held = t
        .hold(
            &attempt,
            "fan",
            json!({ "admission_token": token, "best_available": { "count": 3, "category": "R" } }),
        )
        .await;
    assert_eq!(held.status(), 200);
    let held: Value = held.json().await.unwrap();
    assert_eq!(held["hold"]["seat_ids"], json!(["A-1-1", "A-1-2", "A-1-3"]));

    let plain = t
        .create_sale(json!({ "quantity": null, "seats": ["S1", "S2"] }))
        .await;
    let (attempt, token) = t.admitted(&plain, "other").await;
    assert_problem(
        t.hold(
            &attempt,
            "other",
            json!({ "admission_token": token, "best_available": { "count": 1 } }),
        )
        .await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(t.stats(&plain).await["remaining"], 2);
}

/// Fifty buyers opening a sale's map at once on a replica that has none yet (streams opening
/// at a sale's start) cost the store one read of the sale's seats, as one buyer does: the
/// others wait for it instead of each reading the holdings whole.
async fn many_first_readers_of_a_map_cost_one_read(backend: Backend) {
    use futures_util::future::join_all;
    let t = TestApp::spawn_on_with(backend, |c| {
        c.workers.drift_check_ms = sluice::config::Millis(3_600_000)
    })
    .await;
    let layout = layout_id(&t, &hall(10)).await;
    let one = t
        .create_sale(json!({ "quantity": null, "layout_id": layout }))
        .await;
    let many = t
        .create_sale(json!({ "quantity": null, "layout_id": layout }))
        .await;
    let before = store_calls(&t, "holdings").await;
    assert_eq!(
        t.get_json(&format!("/v1/public/sales/{one}/seat-map"))
            .await["free"],
        40
    );
    let a_read = store_calls(&t, "holdings").await - before;
    assert!(a_read >= 1.0);
    let path = format!("/v1/public/sales/{many}/seat-map");
    let maps = join_all((0..50).map(|_| t.get_json(&path))).await;
    assert!(maps.iter().all(|m| m["free"] == 40));
    assert_eq!(
        store_calls(&t, "holdings").await - before - a_read,
        a_read,
        "fifty first readers read the seats once"
    );
}
