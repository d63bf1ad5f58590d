//! A sale run in phases (`sluice::service::phases`), on both configurations: a member presale
//! from a list, then holders of access codes, then everyone, with the stock carried from one
//! phase to the next and each phase's admission settings applied when it begins.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_presale_then_the_general_sale_runs_end_to_end,
    a_multi_use_code_lets_in_as_many_users_as_it_has_uses_once_each,
    a_general_sale_by_lottery_after_a_presale_draws_its_pre_queue_after_the_members,
    phases_lists_and_codes_refuse_what_they_cannot_take_and_change_nothing,
);

/// Seconds from the sale's opening to each later phase.
const CODES_AT: i64 = 3;
const GENERAL_AT: i64 = 6;

async fn join_with(t: &TestApp, sale: &str, user: &str, code: Option<&str>) -> reqwest::Response {
    let mut request = t.as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user);
    if let Some(code) = code {
        request = request.header("Sluice-Access-Code", code);
    }
    request.send().await.unwrap()
}

async fn put_phases(t: &TestApp, sale: &str, phases: Value) -> reqwest::Response {
    t.admin(Method::PUT, &format!("/v1/sales/{sale}/phases"))
        .json(&json!({ "phases": phases }))
        .send()
        .await
        .unwrap()
}

fn phase(name: &str, at: DateTime<Utc>, audience: &str, limit: u32) -> Value {
    json!({ "name": name, "starts_at": at, "audience": audience, "rate_per_minute": 600000,
            "max_active": 1000, "per_user_limit": limit })
}

async fn upload(t: &TestApp, sale: &str, position: u32, csv: &str) -> reqwest::Response {
    t.admin(
        Method::POST,
        &format!("/v1/sales/{sale}/phases/{position}/members"),
    )
    .header("Content-Type", "application/octet-stream")
    .body(csv.to_owned())
    .send()
    .await
    .unwrap()
}

async fn codes(t: &TestApp, sale: &str, position: u32, count: u32, uses: u32) -> Vec<String> {
    let resp = t
        .admin(
            Method::POST,
            &format!("/v1/sales/{sale}/phases/{position}/codes"),
        )
        .json(&json!({ "count": count, "max_uses": uses }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    body["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

/// A time to the millisecond, as the embedded ledger keeps it.
fn at_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap()
}

async fn problem_of(resp: reqwest::Response, status: u16) -> Value {
    let got = resp.status();
    if got != status {
        panic!("{got} (not {status}): {}", resp.text().await.unwrap());
    }
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/problem+json"));
    resp.json().await.unwrap()
}

async fn sleep_until(at: DateTime<Utc>) {
    let left = (at - Utc::now()).num_milliseconds() + 300;
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

/// Holds `units`, checks out and pays: CONFIRMED.
async fn buys(t: &TestApp, sale: &str, user: &str, units: u32) -> String {
    let (attempt, payment) = t.paying(sale, user, units).await;
    let reference = payment["reference"].as_str().unwrap();
    let event = format!("evt-{user}");
    assert_eq!(
        t.webhook(&event, "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    t.wait_for(&attempt, user, "CONFIRMED", Duration::from_secs(5))
        .await;
    attempt
}

async fn a_presale_then_the_general_sale_runs_end_to_end(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let opens = at_ms(Utc::now() + chrono::Duration::seconds(2));
    let sale = t
        .create_sale(json!({ "quantity": 6, "opens_at": opens, "per_user_limit": 4 }))
        .await;
    let codes_at = opens + chrono::Duration::seconds(CODES_AT);
    let general_at = opens + chrono::Duration::seconds(GENERAL_AT);
    let resp = put_phases(
        &t,
        &sale,
        json!([
            phase("Fan club presale", opens, "list", 2),
            phase("Card holders", codes_at, "codes", 1),
            phase("General sale", general_at, "everyone", 1),
        ]),
    )
    .await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    // The list, uploaded twice: the second changes nothing. Listed by page.
    let csv = "user_id\nfan-1\nfan-2\n\n";
    let first: Value = upload(&t, &sale, 0, csv).await.json().await.unwrap();
    assert_eq!(
        (first["added"].as_u64(), first["total"].as_u64()),
        (Some(2), Some(2))
    );
    let again: Value = upload(&t, &sale, 0, csv).await.json().await.unwrap();
    assert_eq!(
        (again["added"].as_u64(), again["total"].as_u64()),
        (Some(0), Some(2))
    );
    let page = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{sale}/phases/0/members?limit=1"),
        )
        .await;
    assert_eq!(page["user_ids"], json!(["fan-1"]));
    let next = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{sale}/phases/0/members?limit=1&after=fan-1"),
        )
        .await;
    assert_eq!(next["user_ids"], json!(["fan-2"]));
    let card_codes = codes(&t, &sale, 1, 2, 1).await;

    // Before the opening, a member waits; a stranger is told when the general sale opens.
    let member = join_with(&t, &sale, "fan-1", None).await;
    assert_eq!(member.status(), 202);
    let member: Value = member.json().await.unwrap();
    let stranger = problem_of(join_with(&t, &sale, "stranger", None).await, 403).await;
    assert_eq!(stranger["type"], "/problems/not-in-phase");
    assert!(
        stranger["detail"]
            .as_str()
            .unwrap()
            .contains("\"General sale\""),
        "{stranger}"
    );
    let told = DateTime::parse_from_rfc3339(stranger["next_phase_at"].as_str().unwrap()).unwrap();
    assert_eq!(told, general_at);

    // The presale: the member buys two (its limit), and no more.
    let attempt = member["attempt_id"].as_str().unwrap();
    t.wait_for(attempt, "fan-1", "ADMITTED", Duration::from_secs(10))
        .await;
    let fan = buys(&t, &sale, "fan-1", 2).await;
    assert_eq!(fan, attempt);

    // Card holders: a code works once, for its user, who joins again without it.
    sleep_until(codes_at).await;
    let phases = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases"))
        .await;
    assert_eq!(phases["phases"][1]["in_effect"], true, "{phases}");
    assert_eq!(phases["phases"][1]["begun"], true, "{phases}");
    let without = problem_of(join_with(&t, &sale, "card-1", None).await, 403).await;
    assert_eq!(without["type"], "/problems/not-in-phase");
    let code = card_codes[0].as_str();
    assert_eq!(
        join_with(&t, &sale, "card-1", Some(code)).await.status(),
        202
    );
    let taken = problem_of(join_with(&t, &sale, "card-2", Some(code)).await, 403).await;
    assert_eq!(taken["type"], "/problems/access-code");
    assert_eq!(taken["field"], "Sluice-Access-Code");
    assert!(taken["next_phase_at"].is_string(), "{taken}");
    assert_eq!(join_with(&t, &sale, "card-1", None).await.status(), 202);
    // This phase's limit is one unit.
    let (card, token) = t.admitted(&sale, "card-1").await;
    let two = t
        .hold(
            &card,
            "card-1",
            json!({ "admission_token": token, "quantity": 2 }),
        )
        .await;
    assert_eq!(
        problem_of(two, 409).await["type"],
        "/problems/limit-reached"
    );
    let one = t
        .hold(
            &card,
            "card-1",
            json!({ "admission_token": token, "quantity": 1 }),
        )
        .await;
    assert_eq!(one.status(), 200);
    let paying: Value = t.checkout(&card, "card-1").await.json().await.unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    let paid = t
        .webhook("evt-card-1", "payment.succeeded", reference)
        .await;
    assert_eq!(paid.status(), 200);
    t.wait_for(&card, "card-1", "CONFIRMED", Duration::from_secs(5))
        .await;

    // Everyone: what the presales left (3 of 6) sells, and no more.
    sleep_until(general_at).await;
    let mut sold_out = 0;
    let mut bought = 0;
    for i in 0..4 {
        let user = format!("fan-of-everyone-{i}");
        let (attempt, token) = t.admitted(&sale, &user).await;
        let held = t
            .hold(
                &attempt,
                &user,
                json!({ "admission_token": token, "quantity": 1 }),
            )
            .await;
        match held.status().as_u16() {
            200 => bought += 1,
            409 => sold_out += 1,
            other => panic!("hold answered {other}"),
        }
    }
    assert_eq!(
        (bought, sold_out),
        (3, 1),
        "the stock carried over: 3 left for everyone"
    );
    t.assert_stock_conserved(sluice::domain::SaleId::parse(&sale).unwrap(), 6)
        .await;
    let stats = t.stats(&sale).await;
    assert_eq!(stats["units"]["sold"], 3, "{stats}");

    // Each phase's figures.
    let phases = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases"))
        .await;
    let p = &phases["phases"];
    assert_eq!(p[2]["in_effect"], true);
    assert_eq!(
        (p[0]["admitted"].as_u64(), p[0]["bought"].as_u64()),
        (Some(1), Some(1)),
        "{p}"
    );
    assert_eq!(p[0]["members"], 2);
    assert_eq!(p[1]["bought"], 1, "{p}");
    assert_eq!(
        (p[1]["codes"].as_u64(), p[1]["codes_redeemed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(p[2]["admitted"], 4, "{p}");
    assert_eq!(p[2]["joined"], 4, "{p}");
    assert_eq!(p[2]["per_user_limit"], 1);
    // The operators' changes are in the admin audit log.
    let log = t
        .admin_json(Method::GET, &format!("/v1/admin/actions?sale_id={sale}"))
        .await;
    let actions: Vec<&str> = log["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    for action in ["setPhases", "addPhaseMembers", "generateAccessCodes"] {
        assert!(actions.contains(&action), "{action} not in {actions:?}");
    }
}

async fn a_general_sale_by_lottery_after_a_presale_draws_its_pre_queue_after_the_members(
    backend: Backend,
) {
    let t = TestApp::spawn_on(backend).await;
    let opens = at_ms(Utc::now() + chrono::Duration::milliseconds(1500));
    let sale = t
        .create_sale(json!({ "quantity": 50, "opens_at": opens }))
        .await;
    let prequeue = opens + chrono::Duration::milliseconds(2500);
    let draw_at = opens + chrono::Duration::seconds(5);
    let mut members = phase("Members", opens, "list", 2);
    members["rate_per_minute"] = json!(60); // one a second: some still wait at the pre-queue
    let mut general = phase("General draw", draw_at, "everyone", 2);
    general["lottery"] = json!(true);
    general["lottery_seed"] = json!("gen-seed");
    general["joins_from"] = json!(prequeue);
    let resp = put_phases(&t, &sale, json!([members, general])).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    upload(&t, &sale, 0, "m0\nm1\nm2\nm3\n").await;
    let mut member_attempts = Vec::new();
    for m in ["m0", "m1", "m2", "m3"] {
        member_attempts.push(attempt_of_join(join_with(&t, &sale, m, None).await).await);
    }
    // Before the pre-queue opens, a buyer is told when it does.
    let early = problem_of(join_with(&t, &sale, "g-early", None).await, 403).await;
    let told = DateTime::parse_from_rfc3339(early["next_phase_at"].as_str().unwrap()).unwrap();
    assert_eq!(told, prequeue);
    let offer = t
        .user_json(Method::GET, &format!("/v1/sales/{sale}/offer"), "g-early")
        .await;
    assert_eq!(offer["phases"][1]["opening"], "lottery_at_open", "{offer}");
    assert_eq!(offer["phases"][1]["lottery_seed"], "gen-seed");

    // The pre-queue: once it is open, everyone joins it.
    sleep_until(prequeue).await;
    let general_users: Vec<String> = (0..6).map(|i| format!("g{i}")).collect();
    let mut general_attempts = Vec::new();
    for g in &general_users {
        let mut joined = join_with(&t, &sale, g, None).await;
        for _ in 0..50 {
            if joined.status() == 202 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            joined = join_with(&t, &sale, g, None).await;
        }
        general_attempts.push(attempt_of_join(joined).await);
    }
    // Just before the draw, nobody of the pre-queue is admitted, though the members' rate
    // has room for them.
    sleep_until(draw_at - chrono::Duration::milliseconds(700)).await;
    for (g, attempt) in general_users.iter().zip(&general_attempts) {
        assert_eq!(t.status(attempt, g).await["state"], "QUEUED", "{g}");
    }
    // At the draw: every member before anyone of the pre-queue, which is in the draw's order.
    for (m, attempt) in ["m0", "m1", "m2", "m3"].iter().zip(&member_attempts) {
        t.wait_for(attempt, m, "ADMITTED", Duration::from_secs(10))
            .await;
    }
    for (g, attempt) in general_users.iter().zip(&general_attempts) {
        t.wait_for(attempt, g, "ADMITTED", Duration::from_secs(10))
            .await;
    }
    let seq = |attempt: &str| {
        let app = t.app.clone();
        let id = sluice::domain::AttemptId::parse(attempt).unwrap();
        async move { app.ledger.attempt(id).await.unwrap().unwrap().seq }
    };
    let mut member_seqs = Vec::new();
    for attempt in &member_attempts {
        member_seqs.push(seq(attempt).await);
    }
    let mut drawn = Vec::new();
    for (g, attempt) in general_users.iter().zip(&general_attempts) {
        drawn.push((seq(attempt).await, g.clone()));
    }
    assert!(
        member_seqs.iter().max() < drawn.iter().map(|(s, _)| s).min(),
        "members first: {member_seqs:?} {drawn:?}"
    );
    drawn.sort();
    let order: Vec<String> = drawn.into_iter().map(|(_, g)| g).collect();
    let mut expected = general_users.clone();
    expected.sort_by_key(|g| {
        let digest = ring::digest::digest(
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            format!("gen-seed:{g}").as_bytes(),
        );
        hex::encode(digest.as_ref())
    });
    assert_eq!(
        order, expected,
        "the pre-queue in the order of SHA-1(seed:user)"
    );
    let phases = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases"))
        .await;
    assert_eq!(phases["phases"][1]["joined"], 6, "{phases}");
    assert_eq!(phases["phases"][1]["admitted"], 6, "{phases}");
    assert_eq!(phases["phases"][0]["admitted"], 4, "{phases}");
}

async fn attempt_of_join(resp: reqwest::Response) -> String {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 202, "{body}");
    body["attempt_id"].as_str().unwrap().to_owned()
}

async fn a_multi_use_code_lets_in_as_many_users_as_it_has_uses_once_each(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let opens = at_ms(Utc::now() + chrono::Duration::seconds(30));
    let sale = t.create_sale(json!({ "opens_at": opens })).await;
    let resp = put_phases(
        &t,
        &sale,
        json!([
            phase("Invitations", opens, "codes", 2),
            phase(
                "Everyone",
                opens + chrono::Duration::hours(1),
                "everyone",
                2
            )
        ]),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let code = codes(&t, &sale, 0, 1, 2).await.remove(0);
    assert_eq!(join_with(&t, &sale, "a", Some(&code)).await.status(), 202);
    assert_eq!(join_with(&t, &sale, "a", Some(&code)).await.status(), 202);
    assert_eq!(join_with(&t, &sale, "b", Some(&code)).await.status(), 202);
    let c = problem_of(join_with(&t, &sale, "c", Some(&code)).await, 403).await;
    assert_eq!(c["type"], "/problems/access-code");
    let unknown = problem_of(join_with(&t, &sale, "d", Some("NOPE-NOPE-NOPE")).await, 403).await;
    assert_eq!(unknown["type"], "/problems/access-code");
    let export = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases/0/codes"))
        .await;
    assert_eq!(
        export["codes"],
        json!([{ "code": code, "max_uses": 2, "used": 2 }])
    );
    // The buyer's offer says who each phase lets in.
    let offer = t
        .user_json(Method::GET, &format!("/v1/sales/{sale}/offer"), "c")
        .await;
    assert_eq!(offer["phases"][0]["audience"], "codes", "{offer}");
    assert_eq!(offer["phases"][1]["name"], "Everyone");
}

async fn phases_lists_and_codes_refuse_what_they_cannot_take_and_change_nothing(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let opens = at_ms(Utc::now() + chrono::Duration::seconds(60));
    let sale = t.create_sale(json!({ "opens_at": opens })).await;
    let later = opens + chrono::Duration::hours(1);
    let cases = [
        (
            json!([phase("A", later, "everyone", 1)]),
            "phases.starts_at",
        ),
        (
            json!([
                phase("A", opens, "list", 1),
                phase("B", opens, "everyone", 1)
            ]),
            "phases.starts_at",
        ),
        (
            json!([
                phase("A", opens, "list", 1),
                phase("A", later, "everyone", 1)
            ]),
            "phases.name",
        ),
        (json!([phase("A", opens, "list", 0)]), "per_user_limit"),
        (json!([phase("", opens, "list", 1)]), "name"),
    ];
    for (phases, field) in cases {
        let problem = problem_of(put_phases(&t, &sale, phases.clone()).await, 422).await;
        assert!(
            problem["field"].as_str().unwrap().ends_with(field),
            "{phases} → {problem}"
        );
    }
    let none = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases"))
        .await;
    assert_eq!(none["phases"], json!([]), "nothing was set");
    let ok = put_phases(
        &t,
        &sale,
        json!([
            phase("Members", opens, "list", 1),
            phase("All", later, "everyone", 1)
        ]),
    )
    .await;
    assert_eq!(ok.status(), 200);
    // A bad line names itself, and nothing of the upload is kept.
    let bad = problem_of(upload(&t, &sale, 0, "ok-1\nbad\u{7}id\n").await, 422).await;
    assert!(bad["detail"].as_str().unwrap().contains("line 2"), "{bad}");
    let json_ids = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/phases/0/members"))
        .json(&json!({ "user_ids": ["ok-2", "tab\there"] }))
        .send()
        .await
        .unwrap();
    let bad_json = problem_of(json_ids, 422).await;
    assert!(
        bad_json["detail"].as_str().unwrap().contains("user_ids[1]"),
        "{bad_json}"
    );
    let members = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases/0/members"))
        .await;
    assert_eq!(members["user_ids"], json!([]));
    // As JSON, as a generated client sends it.
    let ok = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/phases/0/members"))
        .json(&json!({ "user_ids": ["ok-2", "ok-1"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let members = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/phases/0/members"))
        .await;
    assert_eq!(members["user_ids"], json!(["ok-1", "ok-2"]));
    // Codes are for a codes phase, a list for a list phase; a phase that is not there is not found.
    let wrong = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/phases/1/codes"))
        .json(&json!({ "count": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(problem_of(wrong, 422).await["field"], "position");
    assert_eq!(upload(&t, &sale, 1, "x\n").await.status(), 422);
    assert_eq!(upload(&t, &sale, 5, "x\n").await.status(), 404);
    // A support key reads, an operator's changes need an operator.
    let unknown_sale = put_phases(&t, &"0".repeat(32), json!([phase("A", opens, "list", 1)])).await;
    assert_eq!(unknown_sale.status(), 404);
}

/// The queue store loses a sale while a lottery phase's pre-queue is open (on Redis: its keys
/// gone). The rebuilt line is numbered anew from 1, and the phases move to it: whoever joins
/// the new line waits for the draw, as the pre-queue does, instead of falling below the lost
/// line's first serial of the pre-queue and being admitted before the phase starts. The join
/// that rebuilds the sale lands on a replica that does not admit, so the admitter learns of
/// the move from the ledger, not from its own rebuild.
#[tokio::test]
async fn a_pre_queue_the_store_lost_waits_for_its_draw_in_the_rebuilt_line() {
    let t = TestApp::spawn().await;
    let mut config = (*t.app.config).clone();
    config.workers.enabled = false;
    let joins_only = TestApp::spawn_config(config).await;
    let opens = at_ms(Utc::now() + chrono::Duration::milliseconds(1000));
    let sale = t
        .create_sale(json!({ "quantity": 50, "opens_at": opens }))
        .await;
    let prequeue = opens + chrono::Duration::milliseconds(1500);
    let draw_at = opens + chrono::Duration::seconds(5);
    let mut general = phase("General draw", draw_at, "everyone", 2);
    general["lottery"] = json!(true);
    general["lottery_seed"] = json!("gen-seed");
    general["joins_from"] = json!(prequeue);
    let early = phase("Early", opens, "everyone", 2);
    let resp = put_phases(&t, &sale, json!([early, general])).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    // Three join the first phase and are admitted: the pre-queue starts at serial 4.
    for user in ["e0", "e1", "e2"] {
        let attempt = attempt_of_join(join_with(&t, &sale, user, None).await).await;
        t.wait_for(&attempt, user, "ADMITTED", Duration::from_secs(10))
            .await;
    }
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let first_of_prequeue = || async { t.app.ledger.phases(id).await.unwrap()[1].first_serial };
    sleep_until(prequeue).await;
    for _ in 0..100 {
        if first_of_prequeue().await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(first_of_prequeue().await, Some(4));

    t.wipe_queue_keys().await;
    let late = attempt_of_join(join_with(&joins_only, &sale, "g0", None).await).await;
    assert_eq!(first_of_prequeue().await, Some(1), "moved to the new line");
    sleep_until(draw_at - chrono::Duration::milliseconds(700)).await;
    assert_eq!(t.status(&late, "g0").await["state"], "QUEUED");
    t.wait_for(&late, "g0", "ADMITTED", Duration::from_secs(10))
        .await;
}

/// `sluice reconcile` rebuilds a sale by force: a line the store still holds keeps its
/// numbering and the phases theirs; a line the store lost is numbered anew, and the phases'
/// first serials move to it, as when a join or the admitter rebuilds it.
#[tokio::test]
async fn a_forced_rebuild_moves_the_phases_only_when_the_line_was_lost() {
    let t = TestApp::spawn().await;
    let opens = at_ms(Utc::now() + chrono::Duration::seconds(60));
    let sale = t
        .create_sale(json!({ "quantity": 5, "opens_at": opens }))
        .await;
    let mut general = phase(
        "General draw",
        opens + chrono::Duration::seconds(60),
        "everyone",
        1,
    );
    general["lottery"] = json!(true);
    general["joins_from"] = json!(opens + chrono::Duration::seconds(30));
    let early = phase("Early", opens, "everyone", 1);
    let resp = put_phases(&t, &sale, json!([early, general])).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    // As the admitter writes it when the pre-queue opens, six joins in.
    assert!(t.app.ledger.open_prequeue(id, 1, 7).await.unwrap());
    let first_of_prequeue = || async { t.app.ledger.phases(id).await.unwrap()[1].first_serial };
    let reconcile = || async {
        assert!(sluice::service::sales::restore_in_queue(&t.app, id, true)
            .await
            .unwrap());
    };
    reconcile().await;
    assert_eq!(first_of_prequeue().await, Some(7), "the line was kept");
    t.wipe_queue_keys().await;
    reconcile().await;
    assert_eq!(
        first_of_prequeue().await,
        Some(1),
        "the line was numbered anew"
    );
}

/// A presale of 100,000 listed members: every member joins and a sample of non-members is
/// refused, with no ledger call on the join path (`sluice_ledger_calls_total{caller="join"}`):
/// the replica's worker read the sale's offer and its list before the opening, off the path,
/// and no join reads them. A member added to the list after is let in within about a second.
/// (Redis + PostgreSQL: the joins are the queue store's; the in-process store's list costs the
/// same.)
#[tokio::test]
async fn a_presale_of_a_hundred_thousand_members_joins_without_asking_the_ledger() {
    let backend = Backend::Servers;
    use futures_util::StreamExt;
    const MEMBERS: usize = 100_000;
    let t = TestApp::spawn_on(backend).await;
    let opens = at_ms(Utc::now() + chrono::Duration::seconds(6));
    let sale = t
        .create_sale(json!({ "quantity": 10, "opens_at": opens, "max_active": 10 }))
        .await;
    let resp = put_phases(&t, &sale, json!([phase("Members", opens, "list", 1)])).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let csv: String = (0..MEMBERS).map(|i| format!("member-{i}\n")).collect();
    let uploaded: Value = upload(&t, &sale, 0, &csv).await.json().await.unwrap();
    assert_eq!(uploaded["total"], MEMBERS as u64);
    // The worker reads the list once the offer (kept a second) has its count.
    let reads_uploaded = t.counter("sluice_phase_list_reads_total", &[]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while t.counter("sluice_phase_list_reads_total", &[]).await == reads_uploaded {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never reads the uploaded list"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sleep_until(opens).await;
    let on_path = [("caller", "join")];
    let (calls_before, reads_before) = (
        t.counter("sluice_ledger_calls_total", &on_path).await,
        t.counter("sluice_phase_list_reads_total", &[]).await,
    );
    let statuses: Vec<u16> = futures_util::stream::iter(0..MEMBERS)
        .map(|i| {
            let (t, sale) = (&t, &sale);
            async move {
                let user = format!("member-{i}");
                join_with(t, sale, &user, None).await.status().as_u16()
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 202), "every member joins");
    for i in 0..20 {
        let refused = join_with(&t, &sale, &format!("stranger-{i}"), None).await;
        assert_eq!(refused.status(), 403, "not on the list");
    }
    let calls = t.counter("sluice_ledger_calls_total", &on_path).await - calls_before;
    assert_eq!(calls, 0.0, "ledger calls on the join path of 100,020 joins");
    let reads = t.counter("sluice_phase_list_reads_total", &[]).await - reads_before;
    assert_eq!(
        reads, 0.0,
        "the list is not read again while it stays the same"
    );
    // A member added now is let in once the offer carries the list's new count.
    upload(&t, &sale, 0, "late-member\n").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let late = join_with(&t, &sale, "late-member", None).await.status();
        if late == 202 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the added member is never let in"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    t.stop().await;
}
