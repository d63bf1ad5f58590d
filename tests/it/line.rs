//! Status off the store: a waiting user who presents the queue ticket of their last answer is
//! answered from the replica's view of the line, refreshed every `queue.line_refresh_ms`, and
//! the store is asked only when something happened to them. On both configurations.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{Backend, SseStream, TestApp};
use crate::on_both_configurations;

/// The refresh interval of these tests.
const REFRESH: Duration = Duration::from_millis(200);

on_both_configurations!(
    positions_from_the_view_equal_the_stores_after_departures_out_of_turn,
    a_user_is_told_admitted_within_one_refresh_of_admission,
    abandonment_expires_the_silent_and_spares_those_who_poll_with_a_ticket,
    the_lottery_order_is_kept_for_tickets_issued_before_the_draw,
    a_ticket_of_another_user_attempt_or_sale_or_a_forged_one_is_refused,
    a_stream_is_pushed_admitted_and_expired_within_one_refresh_and_resumes_from_its_last_id,
    the_store_is_not_asked_while_a_thousand_waiting_users_poll,
    signs_of_life_past_one_calls_share_go_in_calls_of_their_own,
    a_waiting_users_sign_of_life_is_sent_once_a_window,
);

async fn spawn(backend: Backend, abandon_after_secs: u64) -> TestApp {
    TestApp::spawn_on_with(backend, |c| {
        c.queue.line_refresh_ms = sluice::config::Millis(REFRESH.as_millis() as u64);
        c.workers.abandon_after_secs = sluice::config::Seconds(abandon_after_secs);
    })
    .await
}

/// A paused sale (joins wait) of `quantity` units.
async fn paused_sale(t: &TestApp, overrides: Value) -> String {
    let sale = t.create_sale(overrides).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    sale
}

/// The status as asked with `ticket`.
async fn status_with(t: &TestApp, attempt: &str, user: &str, ticket: &str) -> Value {
    let resp = t
        .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), user)
        .query(&[("ticket", ticket)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    resp.json().await.unwrap()
}

fn ticket_of(answer: &Value) -> String {
    answer["queue_ticket"]
        .as_str()
        .unwrap_or_else(|| panic!("no queue ticket: {answer}"))
        .to_owned()
}

/// Users `name-0`.. joined in order: (user, attempt, ticket) each.
async fn joined(t: &TestApp, sale: &str, name: &str, n: usize) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("{name}-{i:04}");
        let answer = t.join(sale, &user).await;
        let attempt = answer["attempt_id"].as_str().unwrap().to_owned();
        out.push((user, attempt, ticket_of(&answer)));
    }
    out
}

/// `n` users `crowd-0000`.. joined at once, in any order: (user, attempt, ticket) each.
async fn crowd(t: &TestApp, sale: &str, n: usize) -> Vec<(String, String, String)> {
    let joins = (0..n).map(|i| async move {
        let user = format!("crowd-{i:04}");
        let answer = t.join(sale, &user).await;
        (
            user,
            answer["attempt_id"].as_str().unwrap().to_owned(),
            ticket_of(&answer),
        )
    });
    futures_util::stream::iter(joins)
        .buffer_unordered(50)
        .collect()
        .await
}

/// Each user's status, asked at once with their ticket, in their order.
async fn poll_all(t: &TestApp, users: &[(String, String, String)]) -> Vec<Value> {
    let polls = users
        .iter()
        .map(|(user, attempt, ticket)| status_with(t, attempt, user, ticket));
    futures_util::stream::iter(polls)
        .buffered(50)
        .collect()
        .await
}

/// A counter without labels, so far.
async fn unlabelled(t: &TestApp, name: &str) -> f64 {
    let metrics = t.metrics().await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Queue tickets refused so far.
async fn tickets_refused(t: &TestApp) -> f64 {
    unlabelled(t, "sluice_queue_tickets_refused_total").await
}

async fn answers_from(t: &TestApp, source: &str) -> f64 {
    t.counter("sluice_status_answers_total", &[("source", source)])
        .await
}

/// Queue-store calls of one kind made for status answers.
async fn store_calls(t: &TestApp, call: &str) -> f64 {
    t.counter("sluice_status_store_calls_total", &[("call", call)])
        .await
}

/// Queue-store lookups made for status answers.
async fn lookups(t: &TestApp) -> f64 {
    store_calls(t, "lookup").await
}

/// After users leave from the middle of the line, every waiting user's position answered from
/// the view (with their ticket) equals the one the store computes (without), once a refresh
/// has passed; the answers say when their figures were exact, and they came from the view.
async fn positions_from_the_view_equal_the_stores_after_departures_out_of_turn(backend: Backend) {
    let t = spawn(backend, 0).await;
    let sale = paused_sale(&t, json!({})).await;
    let users = joined(&t, &sale, "line", 30).await;
    // Ask once so the view exists, then leave out of turn.
    status_with(&t, &users[29].1, &users[29].0, &users[29].2).await;
    for i in [0, 3, 7, 12, 20] {
        let (user, attempt, _) = &users[i];
        let resp = t
            .as_user(Method::DELETE, &format!("/v1/attempts/{attempt}"), user)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    tokio::time::sleep(REFRESH * 3).await;
    let from_line = answers_from(&t, "line").await;
    let mut expected = 0;
    for (i, (user, attempt, ticket)) in users.iter().enumerate() {
        if [0, 3, 7, 12, 20].contains(&i) {
            continue;
        }
        expected += 1;
        let viewed = status_with(&t, attempt, user, ticket).await;
        let stored = t.status(attempt, user).await;
        assert_eq!(viewed["state"], "QUEUED", "{viewed}");
        assert_eq!(viewed["position"], expected, "{user}: {viewed}");
        assert_eq!(viewed["position"], stored["position"], "{user}");
        assert_eq!(viewed["waiting"], stored["waiting"], "{user}");
        assert_eq!(viewed["waiting"], 25);
        let as_of: chrono::DateTime<chrono::Utc> =
            viewed["as_of"].as_str().unwrap().parse().unwrap();
        let age = chrono::Utc::now() - as_of;
        assert!(age < chrono::Duration::seconds(2), "as_of {as_of}");
    }
    assert_eq!(answers_from(&t, "line").await - from_line, 25.0);
    t.stop().await;
}

/// Polling with its ticket, a user learns of their admission within one refresh of the moment
/// the store's own answer (asked without a ticket) says ADMITTED.
async fn a_user_is_told_admitted_within_one_refresh_of_admission(backend: Backend) {
    let t = spawn(backend, 0).await;
    let sale = paused_sale(&t, json!({ "rate_per_minute": 6000 })).await;
    let users = joined(&t, &sale, "turn", 1).await;
    let (user, attempt, ticket) = &users[0];
    let first = status_with(&t, attempt, user, ticket).await;
    assert_eq!(first["state"], "QUEUED");
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut store_said = None;
    let line_said = loop {
        assert!(Instant::now() < deadline, "never admitted");
        if store_said.is_none() && t.status(attempt, user).await["state"] == "ADMITTED" {
            store_said = Some(Instant::now());
        }
        let viewed = status_with(&t, attempt, user, ticket).await;
        if viewed["state"] == "ADMITTED" {
            assert!(viewed["admission_token"].is_string(), "{viewed}");
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let store_said = store_said.unwrap_or(line_said);
    let late = line_said.saturating_duration_since(store_said);
    assert!(late <= REFRESH * 2, "told {late:?} after the store knew");
    t.stop().await;
}

/// With abandonment on, a user polling only with their ticket keeps their place (their signs
/// of life reach the store in the refreshes) and one who stops polling loses it.
async fn abandonment_expires_the_silent_and_spares_those_who_poll_with_a_ticket(backend: Backend) {
    let t = spawn(backend, 3).await;
    let sale = paused_sale(&t, json!({ "rate_per_minute": 1 })).await;
    let users = joined(&t, &sale, "presence", 2).await;
    let (gone, stays) = (&users[0], &users[1]);
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    // The first question makes this replica's view of the line (answered by the store).
    status_with(&t, &stays.1, &stays.0, &stays.2).await;
    tokio::time::sleep(REFRESH * 2).await;
    let lookups_before = lookups(&t).await;
    let until = Instant::now() + Duration::from_millis(5000);
    let mut ticket = stays.2.clone();
    while Instant::now() < until {
        let status = status_with(&t, &stays.1, &stays.0, &ticket).await;
        assert_eq!(status["state"], "QUEUED", "{status}");
        ticket = ticket_of(&status);
        let poll = status["poll_after_ms"].as_u64().unwrap();
        tokio::time::sleep(Duration::from_millis(poll.min(1000))).await;
    }
    assert_eq!(
        lookups(&t).await,
        lookups_before,
        "answered from the view throughout"
    );
    let other = status_with(&t, &gone.1, &gone.0, &gone.2).await;
    assert_eq!(other["state"], "EXPIRED", "{other}");
    assert_eq!(other["reason"], "abandoned", "{other}");
    // The silent user's departure reached the view: the one who stayed moved up.
    tokio::time::sleep(REFRESH * 2).await;
    let status = status_with(&t, &stays.1, &stays.0, &ticket).await;
    assert_eq!(status["state"], "QUEUED");
    assert_eq!(status["position"], 1, "moved up: {status}");
    t.stop().await;
}

/// Tickets issued before a lottery's draw carry the numbering of before: the view learns what
/// the draw made of each serial, so their holders are answered from it (no store lookup each)
/// in the drawn order and given tickets of the new numbering, which the view answers in that
/// same order.
async fn the_lottery_order_is_kept_for_tickets_issued_before_the_draw(backend: Backend) {
    let t = spawn(backend, 0).await;
    let opens_at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let sale = t
        .create_sale(json!({
            "opens_at": opens_at, "rate_per_minute": 1, "quantity": 100,
            "opening": "lottery_at_open", "lottery_seed": "drand-round-77"
        }))
        .await;
    let users = joined(&t, &sale, "draw", 10).await;
    for (user, attempt, ticket) in &users {
        status_with(&t, attempt, user, ticket).await;
    }
    let key = |user: &str| {
        let d = ring::digest::digest(
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            format!("drand-round-77:{user}").as_bytes(),
        );
        hex::encode(d.as_ref())
    };
    let mut expected: Vec<String> = users.iter().map(|u| u.0.clone()).collect();
    expected.sort_by_key(|u| key(u));
    tokio::time::sleep(Duration::from_millis(2500) + REFRESH * 2).await;
    let (lookups_before, from_line) = (lookups(&t).await, answers_from(&t, "line").await);
    // (user, position, the new ticket) by the old tickets, then by the new ones.
    let mut placed = Vec::new();
    let mut queued = 0.0;
    for (user, attempt, ticket) in &users {
        let answer = status_with(&t, attempt, user, ticket).await;
        let position = answer["position"].as_u64().unwrap_or(0);
        let new_ticket = answer["queue_ticket"].as_str().map(str::to_owned);
        if answer["state"] == "QUEUED" {
            queued += 1.0;
            assert_ne!(
                new_ticket.as_ref(),
                Some(ticket),
                "a ticket of the new numbering"
            );
        }
        placed.push((position, user.clone(), attempt.clone(), new_ticket));
    }
    assert!(queued >= 9.0, "{queued}");
    assert_eq!(
        answers_from(&t, "line").await - from_line,
        queued,
        "every waiting holder of a ticket of before the draw answered from the view"
    );
    assert_eq!(
        lookups(&t).await - lookups_before,
        10.0 - queued,
        "only the admitted one's answer asked the store"
    );
    placed.sort();
    let order: Vec<&String> = placed.iter().map(|p| &p.1).collect();
    assert_eq!(
        order,
        expected.iter().collect::<Vec<_>>(),
        "the drawn order"
    );
    tokio::time::sleep(REFRESH * 2).await;
    let from_line = answers_from(&t, "line").await;
    let mut asked = 0.0;
    for (position, user, attempt, ticket) in &placed {
        let Some(ticket) = ticket else { continue }; // the one admitted
        let again = status_with(&t, attempt, user, ticket).await;
        assert_eq!(again["position"].as_u64().unwrap(), *position, "{user}");
        asked += 1.0;
    }
    assert!(asked >= 9.0);
    assert_eq!(answers_from(&t, "line").await - from_line, asked);
    t.stop().await;
}

/// A ticket counts only for the attempt and user it was issued to: another user's, one of
/// another sale's attempt, or an altered one is refused (counted) and the answer is the
/// store's, with the user's own ticket.
async fn a_ticket_of_another_user_attempt_or_sale_or_a_forged_one_is_refused(backend: Backend) {
    let t = spawn(backend, 0).await;
    let sale = paused_sale(&t, json!({})).await;
    let other_sale = paused_sale(&t, json!({})).await;
    let users = joined(&t, &sale, "owner", 3).await;
    let elsewhere = joined(&t, &other_sale, "far", 1).await;
    let (alice, alices, alice_ticket) = &users[0];
    let (_, _, carols_ticket) = &users[2];
    status_with(&t, alices, alice, alice_ticket).await;
    tokio::time::sleep(REFRESH * 2).await;
    let (serial, rest) = carols_ticket.split_once('.').unwrap();
    let one_more: u64 = serial.parse::<u64>().unwrap() + 1;
    let forged = [
        carols_ticket.clone(),
        elsewhere[0].2.clone(),
        format!("{one_more}.{rest}"),
        format!("{}.{}", serial, "0.AAAA"),
        "garbage".to_owned(),
    ];
    for (n, ticket) in forged.iter().enumerate() {
        let refused = tickets_refused(&t).await;
        let answer = status_with(&t, alices, alice, ticket).await;
        assert_eq!(answer["position"], 1, "{ticket}: {answer}");
        assert_eq!(ticket_of(&answer), *alice_ticket, "her own ticket back");
        let counted = tickets_refused(&t).await;
        assert_eq!(counted, refused + 1.0, "ticket {n} refused");
    }
    // Someone else presenting Alice's ticket for Alice's attempt is still not her.
    let resp = t
        .as_user(Method::GET, &format!("/v1/attempts/{alices}"), &users[1].0)
        .query(&[("ticket", alice_ticket)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    t.stop().await;
}

/// An open status stream.
struct Stream;

impl Stream {
    async fn open(
        t: &TestApp,
        attempt: &str,
        user: &str,
        ticket: &str,
        last: Option<&str>,
    ) -> SseStream {
        let mut req = t
            .as_user(Method::GET, &format!("/v1/attempts/{attempt}/events"), user)
            .query(&[("ticket", ticket)]);
        if let Some(last) = last {
            req = req.header("Last-Event-ID", last);
        }
        SseStream::open(req).await
    }
}

/// A stream is pushed the change of its attempt within one refresh: a departure ahead (its
/// position), its admission, the sale closing on the one still waiting, and at once its own
/// user's leave through the same replica. Each event says `event: status` and an id; a stream
/// opened again with the last id is not sent the same answer again, and gets the next one.
async fn a_stream_is_pushed_admitted_and_expired_within_one_refresh_and_resumes_from_its_last_id(
    backend: Backend,
) {
    let t = spawn(backend, 0).await;
    let sale = paused_sale(&t, json!({ "rate_per_minute": 6000, "max_active": 1 })).await;
    let users = joined(&t, &sale, "stream", 4).await;
    let open = |i: usize, last: Option<String>| {
        let (user, attempt, ticket) = users[i].clone();
        let t = &t;
        async move { Stream::open(t, &attempt, &user, &ticket, last.as_deref()).await }
    };
    let within = REFRESH * 2 + Duration::from_millis(500);
    let mut second = open(1, None).await;
    let (event, first_id, first) = second.next(within).await.expect("a first event");
    assert_eq!(
        (event.as_str(), first["position"].as_u64()),
        ("status", Some(2))
    );
    assert_eq!(first_id.len(), 16, "{first_id}");
    let mut leaver = open(3, None).await;
    leaver.next(within).await.expect("a first event");

    // Reopened with the last id: the same answer is not sent again.
    drop(second);
    let mut second = open(1, Some(first_id.clone())).await;
    assert!(
        second.next(REFRESH * 3).await.is_none(),
        "sent the same answer again"
    );

    // The user of the fourth leaves through this replica: their stream says so at once.
    let started = Instant::now();
    let (user, attempt, _) = &users[3];
    t.as_user(Method::DELETE, &format!("/v1/attempts/{attempt}"), user)
        .send()
        .await
        .unwrap();
    let (_, _, left) = leaver.next(within).await.expect("the leave pushed");
    assert_eq!(
        (left["state"].as_str(), left["reason"].as_str()),
        (Some("EXPIRED"), Some("left"))
    );
    assert!(
        started.elapsed() < REFRESH,
        "pushed at once: {:?}",
        started.elapsed()
    );

    // The first in line leaves: the second's position moves at the next refresh.
    let (user, attempt, _) = &users[0];
    t.as_user(Method::DELETE, &format!("/v1/attempts/{attempt}"), user)
        .send()
        .await
        .unwrap();
    // (An event for the fourth's departure may come first: the waiting count changed.)
    let started = Instant::now();
    let (moved_id, moved) = loop {
        let (_, id, next) = second.next(within).await.expect("the new position pushed");
        if next["position"] == 1 {
            break (id, next);
        }
    };
    assert!(started.elapsed() <= within, "{:?}", started.elapsed());
    assert_eq!(moved["waiting"], 2, "{moved}");
    assert_ne!(moved_id, first_id);

    // Admission (one slot): the second is admitted, the third still waits; then the sale
    // closes on the third.
    let mut third = open(2, None).await;
    third.next(within).await.expect("a first event");
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    let admitted = loop {
        let (_, _, next) = second
            .next(Duration::from_secs(5))
            .await
            .expect("admission pushed");
        if next["state"] == "ADMITTED" {
            break next;
        }
    };
    assert!(admitted["admission_token"].is_string());
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    let started = Instant::now();
    let closed = loop {
        let (_, _, next) = third.next(within).await.expect("the close pushed");
        if next["state"] == "EXPIRED" {
            break next;
        }
    };
    assert_eq!(closed["reason"], "sale_closed", "{closed}");
    assert!(started.elapsed() <= within, "{:?}", started.elapsed());
    assert!(
        third.next(REFRESH).await.is_none(),
        "the stream ends with its attempt"
    );
    t.stop().await;
}

/// 1,000 waiting users polling with their tickets cost the store no lookup at all: its calls
/// for status are the line's refreshes, one per interval, however many ask.
async fn the_store_is_not_asked_while_a_thousand_waiting_users_poll(backend: Backend) {
    const USERS: usize = 1000;
    let t = spawn(backend, 0).await;
    let sale = paused_sale(&t, json!({})).await;
    let users = crowd(&t, &sale, USERS).await;
    // The view exists and is refreshed before the count starts.
    status_with(&t, &users[0].1, &users[0].0, &users[0].2).await;
    tokio::time::sleep(REFRESH * 2).await;
    let (lookups, refreshes, from_line) = (
        store_calls(&t, "lookup").await,
        store_calls(&t, "refresh").await,
        answers_from(&t, "line").await,
    );
    let started = Instant::now();
    for answer in poll_all(&t, &users).await {
        assert_eq!(answer["state"], "QUEUED");
    }
    let elapsed = started.elapsed();
    assert_eq!(
        store_calls(&t, "lookup").await,
        lookups,
        "no lookup in the store"
    );
    assert_eq!(answers_from(&t, "line").await - from_line, USERS as f64);
    let refreshed = store_calls(&t, "refresh").await - refreshes;
    let most = (elapsed.as_millis() / REFRESH.as_millis()) as f64 + 2.0;
    assert!(refreshed <= most, "{refreshed} refreshes in {elapsed:?}");
    t.stop().await;
}

/// A ticket from before the store lost the sale never names a place in the line rebuilt from
/// the ledger (which numbers from 1 again): its holder is told to rejoin, even once a newcomer
/// holds the same serial.
#[tokio::test]
async fn a_ticket_from_before_a_wiped_store_leads_to_rejoin_not_to_a_place() {
    let t = spawn(Backend::Servers, 0).await;
    let sale = paused_sale(&t, json!({})).await;
    let users = joined(&t, &sale, "wiped", 2).await;
    let (user, attempt, ticket) = &users[0];
    assert_eq!(status_with(&t, attempt, user, ticket).await["position"], 1);
    t.wipe_queue_keys().await;
    tokio::time::sleep(REFRESH * 2).await;
    let ask = || {
        t.as_user(Method::GET, &format!("/v1/attempts/{attempt}"), user)
            .query(&[("ticket", ticket)])
            .send()
    };
    crate::helpers::assert_problem(ask().await.unwrap(), 410, "/problems/rejoin").await;
    let newcomer = t.join(&sale, "newcomer").await;
    assert_eq!(newcomer["position"], 1, "{newcomer}");
    tokio::time::sleep(REFRESH * 2).await;
    crate::helpers::assert_problem(ask().await.unwrap(), 410, "/problems/rejoin").await;
    t.stop().await;
}

/// With abandonment on, the signs of life a replica gathers between two refreshes beyond one
/// store call's share (2,000) are written in calls of their own, so that no call holds the
/// sale's primary for long, and abandonment works as before: every one of a crowd of 2,500
/// that keeps polling keeps their place, the one who fell silent loses it.
async fn signs_of_life_past_one_calls_share_go_in_calls_of_their_own(backend: Backend) {
    const REFRESH_MS: u64 = 3_000;
    let t = TestApp::spawn_on_with(backend, |c| {
        c.queue.line_refresh_ms = sluice::config::Millis(REFRESH_MS);
        c.workers.abandon_after_secs = sluice::config::Seconds(9);
    })
    .await;
    let sale = paused_sale(&t, json!({ "rate_per_minute": 1 })).await;
    let head = joined(&t, &sale, "head", 1).await;
    let silent = &joined(&t, &sale, "silent", 1).await[0];
    let users = crowd(&t, &sale, 2_500).await;
    let before = store_calls(&t, "seen").await;
    // The view exists before the first round is counted.
    status_with(&t, &head[0].1, &head[0].0, &head[0].2).await;
    let refresh = Duration::from_millis(REFRESH_MS + 200);
    tokio::time::sleep(refresh).await;
    poll_all(&t, &users).await;
    tokio::time::sleep(refresh).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    let until = Instant::now() + Duration::from_secs(8);
    let mut tickets = users.clone();
    while Instant::now() < until {
        for (answer, user) in poll_all(&t, &tickets).await.iter().zip(&mut tickets) {
            assert_eq!(answer["state"], "QUEUED", "{}: {answer}", user.0);
            user.2 = ticket_of(answer);
        }
    }
    assert!(
        store_calls(&t, "seen").await > before,
        "signs of life written apart from a refresh"
    );
    let other = status_with(&t, &silent.1, &silent.0, &silent.2).await;
    assert_eq!(other["state"], "EXPIRED", "{other}");
    assert_eq!(other["reason"], "abandoned", "{other}");
    t.stop().await;
}

/// A waiting user who asks again and again within a third of the abandonment time has one sign
/// of life sent to the store, not one an answer: twenty users polling three times in quick
/// succession (under a window of 1 s: abandonment 3 s, refreshes every 200 ms) are sent at most
/// twice each (their rounds may straddle two windows), not once an answer (60).
async fn a_waiting_users_sign_of_life_is_sent_once_a_window(backend: Backend) {
    let t = spawn(backend, 3).await;
    let sale = paused_sale(&t, json!({})).await;
    let users = joined(&t, &sale, "often", 20).await;
    status_with(&t, &users[0].1, &users[0].0, &users[0].2).await;
    tokio::time::sleep(REFRESH * 2).await;
    let signs = "sluice_queue_signs_of_life_total";
    let before = unlabelled(&t, signs).await;
    for _ in 0..3 {
        for answer in poll_all(&t, &users).await {
            assert_eq!(answer["state"], "QUEUED");
        }
    }
    tokio::time::sleep(REFRESH * 2).await;
    let sent = unlabelled(&t, signs).await - before;
    assert!(
        (20.0..=40.0).contains(&sent),
        "{sent} signs of life sent for 60 answers"
    );
    t.stop().await;
}
