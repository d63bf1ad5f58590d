//! Support and operations reads, on both configurations: the sales and a sale's attempts by
//! page (stable while sales are created and buyers admitted), a buyer found by user id (with
//! their place in the queue while they wait), and an attempt's whole story.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    sales_are_listed_newest_first_by_stable_pages,
    a_buyers_attempts_are_found_by_user_and_state_by_stable_pages,
    an_attempts_file_tells_its_whole_purchase,
    a_waiting_buyer_is_found_with_their_place,
);

/// A buyer still waiting has no ledger row: looked up by user id, the list says where they
/// wait; once admitted, the ledger has them instead.
async fn a_waiting_buyer_is_found_with_their_place(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({})).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    t.join(&sale, "first").await;
    let joined = t.join(&sale, "second").await;
    let attempt = joined["attempt_id"].as_str().unwrap();
    let by_user = format!("/v1/sales/{sale}/attempts?user_id=second");
    let page = t.admin_json(Method::GET, &by_user).await;
    assert_eq!(page["attempts"], json!([]), "{page}");
    assert_eq!(
        page["waiting"],
        json!({ "attempt_id": attempt, "position": 2, "waiting": 2 })
    );
    let other = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{sale}/attempts?user_id=nobody"),
        )
        .await;
    assert!(other.get("waiting").is_none(), "{other}");
    let by_state = t
        .admin_json(Method::GET, &format!("{by_user}&state=ADMITTED"))
        .await;
    assert!(by_state.get("waiting").is_none(), "{by_state}");
    // Its file is written at admission: until then support is told where to look instead.
    let file = t
        .admin(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .send()
        .await
        .unwrap();
    let problem = assert_problem(file, 404, "/problems/not-found").await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("still waiting") && detail.contains("user_id"),
        "{detail}"
    );

    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    t.wait_for(
        attempt,
        "second",
        "ADMITTED",
        std::time::Duration::from_secs(10),
    )
    .await;
    let page = t.admin_json(Method::GET, &by_user).await;
    assert!(page.get("waiting").is_none(), "{page}");
    assert_eq!(page["attempts"][0]["attempt_id"], attempt, "{page}");
    t.stop().await;
}

/// Every page of `path` (which has no query yet), `limit` at a time; `between` runs after each
/// page (to add items meanwhile). Returns the items' `key` values in order.
async fn all_pages<F, Fut>(
    t: &TestApp,
    path: &str,
    list: &str,
    key: &str,
    limit: u32,
    between: F,
) -> Vec<String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = format!("{path}{sep}limit={limit}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page = t.admin_json(Method::GET, &url).await;
        let items = page[list].as_array().unwrap_or_else(|| panic!("{page}"));
        assert!(items.len() <= limit as usize);
        seen.extend(items.iter().map(|i| i[key].as_str().unwrap().to_owned()));
        between().await;
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return seen,
        }
    }
    panic!("more pages than items");
}

async fn sales_are_listed_newest_first_by_stable_pages(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(t.create_sale(json!({ "name": format!("sale {i}") })).await);
    }
    let closed = created[1].clone();
    assert_eq!(
        t.admin(Method::POST, &format!("/v1/sales/{closed}/close"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    // Pages of two while new sales are created between them: the new ones are newer than the
    // first page, so the pages read are exactly the five, newest first.
    let listed = all_pages(&t, "/v1/sales", "sales", "id", 2, || async {
        t.create_sale(json!({ "name": "created while paging" }))
            .await;
    })
    .await;
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first);

    let only_closed = t.admin_json(Method::GET, "/v1/sales?status=closed").await;
    let ids: Vec<&str> = only_closed["sales"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [closed.as_str()]);
    assert_eq!(only_closed["sales"][0]["status"], "closed");
    assert_eq!(only_closed["sales"][0]["total"], 10);

    let bad = t
        .admin(Method::GET, "/v1/sales?cursor=not-a-cursor")
        .send()
        .await
        .unwrap();
    assert_problem(bad, 422, "/problems/validation").await;
    let too_many = t
        .admin(Method::GET, "/v1/sales?limit=1000")
        .send()
        .await
        .unwrap();
    assert!(
        matches!(too_many.status().as_u16(), 400 | 422),
        "{}",
        too_many.status()
    );
    let anonymous = t.http.get(t.url("/v1/sales")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    t.stop().await;
}

async fn a_buyers_attempts_are_found_by_user_and_state_by_stable_pages(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 20, "per_user_limit": 2 }))
        .await;
    let users: Vec<String> = (0..6).map(|i| format!("buyer-{i}")).collect();
    let mut attempts = Vec::new();
    for user in &users {
        attempts.push(t.holding(&sale, user, 1).await);
    }
    let (bought, payment) = t.paying(&sale, "buyer-paid", 1).await;
    let paid = t
        .webhook(
            "evt-paid",
            "payment.succeeded",
            payment["reference"].as_str().unwrap(),
        )
        .await;
    assert_eq!(paid.status(), 200);
    attempts.push(bought.clone());

    // Found by user id: that buyer's attempt only.
    let found = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{sale}/attempts?user_id=buyer-3"),
        )
        .await;
    let rows = found["attempts"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{found}");
    assert_eq!(rows[0]["attempt_id"], attempts[3].as_str());
    assert_eq!(rows[0]["user_id"], "buyer-3");
    assert_eq!(rows[0]["state"], "HOLD");
    assert_eq!(rows[0]["units"], 1);

    // By state.
    let confirmed = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{sale}/attempts?state=CONFIRMED"),
        )
        .await;
    let ids: Vec<&str> = confirmed["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [bought.as_str()]);
    assert!(confirmed["attempts"][0]["payment_reference"].is_string());

    // Pages of three while more buyers are admitted between them: exactly the seven, newest
    // first, none twice.
    let path = format!("/v1/sales/{sale}/attempts");
    let listed = all_pages(&t, &path, "attempts", "attempt_id", 3, || async {
        join_all((0..3).map(|_| {
            let user = format!("late-{}", uuid::Uuid::new_v4().simple());
            let (t, sale) = (&t, &sale);
            async move { t.admitted(sale, &user).await }
        }))
        .await;
    })
    .await;
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "no attempt twice");
    let newest_first: Vec<String> = attempts.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first);

    let unknown = t
        .admin(
            Method::GET,
            &format!("/v1/sales/{}/attempts", uuid::Uuid::now_v7()),
        )
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "/problems/not-found").await;
    let bad_user = t
        .admin(
            Method::GET,
            &format!("/v1/sales/{sale}/attempts?user_id=%20"),
        )
        .send()
        .await
        .unwrap();
    assert_problem(bad_user, 422, "/problems/validation").await;
    t.stop().await;
}

async fn an_attempts_file_tells_its_whole_purchase(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({})).await;
    let (attempt, payment) = t.paying(&sale, "buyer", 2).await;
    let reference = payment["reference"].as_str().unwrap();
    for _ in 0..2 {
        // The provider delivers its event twice: the ledger records it once.
        let resp = t.webhook("evt-file", "payment.succeeded", reference).await;
        assert_eq!(resp.status(), 200);
    }
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .await;
    assert_eq!(file["attempt"]["state"], "CONFIRMED", "{file}");
    assert_eq!(file["attempt"]["units"], 2);
    assert_eq!(file["attempt"]["payment_reference"], reference);
    let trail: Vec<(String, String, String)> = file["trail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap().to_owned();
            (text("from"), text("to"), text("cause"))
        })
        .collect();
    let expected = [
        ("QUEUED", "ADMITTED", "admit"),
        ("ADMITTED", "HOLD", "hold"),
        ("HOLD", "PAYMENT_PENDING", "checkout"),
        ("PAYMENT_PENDING", "CONFIRMED", "payment_succeeded"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(trail, expected);
    assert!(file["trail"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["at"].is_string()));
    let events: Vec<&Value> = file["payment_events"].as_array().unwrap().iter().collect();
    assert_eq!(events.len(), 1, "{file}");
    assert_eq!(events[0]["provider_event_id"], "evt-file");
    assert_eq!(events[0]["kind"], "succeeded");

    // Under another sale's path, or without the key, the attempt is not there.
    let other = t.create_sale(json!({})).await;
    let elsewhere = t
        .admin(
            Method::GET,
            &format!("/v1/sales/{other}/attempts/{attempt}"),
        )
        .send()
        .await
        .unwrap();
    assert_problem(elsewhere, 404, "/problems/not-found").await;
    let anonymous = t
        .http
        .get(t.url(&format!("/v1/sales/{sale}/attempts/{attempt}")))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    t.stop().await;
}
