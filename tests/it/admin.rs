//! Admin operations, the spec, health, keys and metrics.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, TestApp};

#[tokio::test]
async fn pause_resume_close_and_admission_settings() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 7 })).await;
    let got = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(
        (
            got["status"].as_str(),
            got["total"].as_u64(),
            got["remaining"].as_u64()
        ),
        (Some("open"), Some(7), Some(7))
    );

    let paused = t
        .admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    assert_eq!(paused["status"], "paused");
    // While paused, joins queue up but nobody is admitted.
    let joined = t.join(&sale, "alice").await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        t.status(joined["attempt_id"].as_str().unwrap(), "alice")
            .await["state"],
        "QUEUED"
    );
    let resumed = t
        .admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    assert_eq!(resumed["status"], "open");
    t.wait_for(
        joined["attempt_id"].as_str().unwrap(),
        "alice",
        "ADMITTED",
        std::time::Duration::from_secs(10),
    )
    .await;

    let tuned = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 120, "max_active": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(tuned.status(), 200);
    let tuned: serde_json::Value = tuned.json().await.unwrap();
    assert_eq!(
        (
            tuned["rate_per_minute"].as_u64(),
            tuned["max_active"].as_u64()
        ),
        (Some(120), Some(5))
    );
    let bad = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 0, "max_active": 5 }))
        .send()
        .await
        .unwrap();
    assert_problem(bad, 422, "/problems/validation").await;

    let closed = t
        .admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    assert_eq!(closed["status"], "closed");
    let reopen = t
        .admin(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .send()
        .await
        .unwrap();
    assert_problem(reopen, 409, "/problems/sale-closed").await;
    let missing = t
        .admin(
            Method::POST,
            &format!("/v1/sales/{}/pause", uuid::Uuid::now_v7()),
        )
        .send()
        .await
        .unwrap();
    assert_problem(missing, 404, "/problems/not-found").await;

    let stats = t.stats(&sale).await;
    assert_eq!(stats["admitted"], 1);
    assert_eq!(stats["total"], 7);
    assert_eq!(stats["expired"]["left"], 0);
    t.stop().await;
}

#[tokio::test]
async fn scheduled_sales_take_joins_but_admit_only_when_open() {
    let t = TestApp::spawn().await;
    let opens = chrono::Utc::now() + chrono::Duration::seconds(2);
    let sale = t.create_sale(json!({ "opens_at": opens })).await;
    let got = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(got["status"], "scheduled");
    let joined = t.join(&sale, "early").await;
    let attempt = joined["attempt_id"].as_str().unwrap();
    assert_eq!(t.status(attempt, "early").await["state"], "QUEUED");
    let admitted = t
        .wait_for(
            attempt,
            "early",
            "ADMITTED",
            std::time::Duration::from_secs(10),
        )
        .await;
    assert!(chrono::Utc::now() >= opens, "{admitted}");
    t.stop().await;
}

#[tokio::test]
async fn spec_docs_health_keys_and_metrics_are_served() {
    let t = TestApp::spawn().await;
    let spec = t.get_json("/openapi.json").await;
    assert!(spec["paths"]["/v1/attempts/{attempt_id}/hold"]["post"]["operationId"] == "holdStock");
    assert_eq!(
        t.http.get(t.url("/docs")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        t.http
            .get(t.url("/health/live"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        t.http
            .get(t.url("/health/ready"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let jwks = t.get_json("/.well-known/jwks.json").await;
    assert_eq!(jwks["keys"][0]["crv"], "Ed25519");

    let sale = t.create_sale(json!({})).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    t.hold(
        &attempt,
        "alice",
        json!({ "admission_token": token, "quantity": 1 }),
    )
    .await;
    let metrics = t.metrics().await;
    for name in [
        "sluice_http_requests_total",
        "sluice_http_request_duration_seconds_bucket",
        "sluice_transitions_total",
        "sluice_queue_waiting",
        "sluice_stock_remaining",
        "sluice_holds_total",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    // Redis as sluice sees it, per operation, in buckets below a millisecond.
    for call in ["join", "status", "hold"] {
        let count = format!("sluice_queue_call_duration_seconds_count{{call=\"{call}\"}}");
        assert!(metrics.contains(&count), "{count} missing from /metrics");
    }
    assert!(
        metrics.contains("sluice_queue_call_duration_seconds_bucket{call=\"hold\",le=\"0.0001\"}"),
        "Redis calls are timed in sub-millisecond buckets"
    );
    assert!(
        metrics.contains("operation=\"holdStock\""),
        "requests are labelled by operation"
    );
    t.stop().await;
}

#[tokio::test]
async fn status_streams_over_server_sent_events() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "rate_per_minute": 60 })).await;
    // Someone far back in a paused sale is told to poll slowly; the stream still sends the
    // current status at once, not one interval late.
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    for i in 0..30 {
        t.join(&sale, &format!("ahead-{i}")).await;
    }
    let joined = t.join(&sale, "alice").await;
    assert!(
        joined["poll_after_ms"].as_u64().unwrap() >= 1000,
        "{joined}"
    );
    let attempt = joined["attempt_id"].as_str().unwrap();
    let opened = std::time::Instant::now();
    let mut resp = t
        .as_user(
            Method::GET,
            &format!("/v1/attempts/{attempt}/events"),
            "alice",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let first = resp.chunk().await.unwrap().expect("a first event");
    let first = String::from_utf8_lossy(&first).to_string();
    assert!(
        first.contains("\"QUEUED\"") && first.contains("\"position\":31"),
        "{first}"
    );
    assert!(
        opened.elapsed() < std::time::Duration::from_millis(900),
        "the first event came after {:?}",
        opened.elapsed()
    );
    let faster = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 600000, "max_active": 1000 }))
        .send()
        .await
        .unwrap();
    assert_eq!(faster.status(), 200);
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !seen.contains("\"ADMITTED\"") {
        assert!(
            std::time::Instant::now() < deadline,
            "no ADMITTED event: {seen}"
        );
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(15), resp.chunk())
            .await
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("stream open")));
    }
    assert!(seen.contains("data: "), "{seen}");
    t.stop().await;
}

#[tokio::test]
async fn the_committed_spec_matches_the_served_one() {
    let t = TestApp::spawn().await;
    let served = t.get_json("/openapi.json").await;
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../openapi/openapi.json"))
            .expect("openapi/openapi.json is JSON");
    assert!(
        served == committed,
        "openapi/openapi.json is stale: run scripts/openapi and commit it"
    );
    t.stop().await;
}

/// An offer's "remaining" is the queue store's stock counter (the ledger would have to count
/// the free units every second); when the queue store lost the sale (flushed), the ledger
/// counts them.
#[tokio::test]
async fn an_offers_stock_comes_from_the_queue_store_and_from_the_ledger_without_it() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let (attempt, token) = t.admitted(&sale, "buyer").await;
    let body = json!({ "admission_token": token, "quantity": 2 });
    assert_eq!(t.hold(&attempt, "buyer", body).await.status(), 200);
    let offer = || offer_of(&t, &sale);
    // (The join read the offer, 5 left, for its proof of work: it is kept a second.)
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(offer().await["remaining"], 3);
    // What the offer says is the queue store's counter: set apart from the ledger, it shows.
    // (Below it: units over the ledger's the admitter takes back within two ticks.)
    let client = redis::Client::open(crate::helpers::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let prefix = &t.app.config.queue.key_prefix;
    let stock = format!("{prefix}:{{sale:{sale}}}:stock");
    let _: () = redis::cmd("SET")
        .arg(&stock)
        .arg(2)
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(offer().await["remaining"], 2, "the queue store's counter");
    // The queue store loses every key of this app (as a flush would).
    t.wipe_queue_keys().await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(offer().await["remaining"], 3, "counted by the ledger");
    t.stop().await;
}

/// Every waiting user's page asks for the offer, so it is served from memory for a second:
/// the ledger sees one read a second per sale, and a buyer sees stock at most a second old.
#[tokio::test]
async fn offers_are_kept_for_a_second() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let offer = || offer_of(&t, &sale);
    assert_eq!(offer().await["remaining"], 5);
    let (attempt, token) = t.admitted(&sale, "buyer").await;
    let held = t
        .hold(
            &attempt,
            "buyer",
            json!({ "admission_token": token, "quantity": 2 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    assert_eq!(offer().await["remaining"], 5, "served from memory");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(offer().await["remaining"], 3, "fresh after a second");
    t.stop().await;
}

/// The sale's offer as a shopper sees it.
async fn offer_of(t: &TestApp, sale: &str) -> serde_json::Value {
    t.user_json(Method::GET, &format!("/v1/sales/{sale}/offer"), "shopper")
        .await
}

/// `/metrics`, the spec and the docs UI are open by default; each can be put behind the admin
/// key (as `X-Admin-Key`, or as the bearer token Prometheus's `authorization` sends) or turned
/// off, and the sandbox provider is off with PostgreSQL unless asked for.
#[tokio::test]
async fn operational_routes_can_be_closed_or_put_behind_the_admin_key() {
    let open = TestApp::spawn().await;
    for path in ["/metrics", "/openapi.json", "/docs"] {
        let resp = open.http.get(open.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path} is open by default");
    }
    let sandbox = open
        .http
        .post(open.url(&format!("/sandbox/payments/{}", uuid::Uuid::new_v4())))
        .json(&json!({ "outcome": "approve" }))
        .send()
        .await
        .unwrap();
    assert_eq!(sandbox.status(), 404, "no sandbox in production");
    open.stop().await;

    let guarded = TestApp::spawn_with(|c| {
        c.http.metrics = sluice::config::Exposure::Admin;
        c.http.docs = sluice::config::Exposure::Off;
    })
    .await;
    let anonymous = guarded
        .http
        .get(guarded.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_problem(anonymous, 401, "/problems/unauthorized").await;
    let wrong = guarded
        .http
        .get(guarded.url("/metrics"))
        .bearer_auth("not-the-admin-key-0123")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let by_header = guarded.admin(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(by_header.status(), 200);
    assert!(by_header.text().await.unwrap().contains("sluice_"));
    let by_bearer = guarded
        .http
        .get(guarded.url("/metrics"))
        .bearer_auth(crate::helpers::ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(by_bearer.status(), 200);
    for path in ["/openapi.json", "/docs"] {
        let resp = guarded.admin(Method::GET, path).send().await.unwrap();
        assert_problem(resp, 404, "/problems/not-found").await;
    }
    guarded.stop().await;
}

crate::on_both_configurations!(
    a_visitor_reads_the_public_offer_without_a_token_and_caches_it,
    an_offer_says_how_its_queue_opens,
);

/// A page must tell a lottery sale's visitors that joining early gives no advantage: the
/// offer says how the queue opens, and a lottery's published seed.
async fn an_offer_says_how_its_queue_opens(backend: crate::helpers::Backend) {
    let t = TestApp::spawn_on(backend).await;
    let fifo = t.create_sale(json!({})).await;
    let opens_at = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let lottery = t
        .create_sale(
            json!({ "opens_at": opens_at, "opening": "lottery_at_open", "lottery_seed": "s-1" }),
        )
        .await;
    let public = |sale: &str| {
        let url = t.url(&format!("/v1/public/sales/{sale}/offer"));
        let http = t.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let offer = public(&fifo).await;
    assert_eq!(offer["opening"], "fifo", "{offer}");
    assert!(offer.get("lottery_seed").is_none(), "{offer}");
    for offer in [public(&lottery).await, offer_of(&t, &lottery).await] {
        assert_eq!(
            (&offer["opening"], &offer["lottery_seed"]),
            (&json!("lottery_at_open"), &json!("s-1")),
            "{offer}"
        );
    }
    t.stop().await;
}

/// A shop shows "312 left" before login: the public offer needs no token, leaves out the
/// proof-of-work settings, is cacheable for a second and answers 304 to its own ETag.
async fn a_visitor_reads_the_public_offer_without_a_token_and_caches_it(
    backend: crate::helpers::Backend,
) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let proof_of_work = |bits: u32| {
        t.admin(Method::PUT, &format!("/v1/sales/{sale}/proof-of-work"))
            .json(&json!({ "difficulty_bits": bits }))
            .send()
    };
    assert_eq!(proof_of_work(4).await.unwrap().status(), 200);
    let path = format!("/v1/public/sales/{sale}/offer");
    let resp = t.http.get(t.url(&path)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let header = |resp: &reqwest::Response, name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header(&resp, "cache-control").as_deref(),
        Some("public, max-age=1")
    );
    let etag = header(&resp, "etag").expect("an ETag");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        (body["remaining"].as_u64(), body["name"].as_str()),
        (Some(5), Some("Test sale"))
    );
    assert!(body.get("proof_of_work").is_none(), "{body}");
    assert!(
        offer_of(&t, &sale).await["proof_of_work"].is_object(),
        "a buyer still sees it"
    );

    let again = t
        .http
        .get(t.url(&path))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(header(&again, "etag").as_deref(), Some(etag.as_str()));

    // Stock moves: after the offer's second, a new version with a new ETag.
    assert_eq!(proof_of_work(0).await.unwrap().status(), 200);
    t.holding(&sale, "alice", 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let changed = t
        .http
        .get(t.url(&path))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_ne!(header(&changed, "etag"), Some(etag));
    assert_eq!(
        changed.json::<serde_json::Value>().await.unwrap()["remaining"],
        3
    );
    let unknown = t
        .http
        .get(t.url(&format!("/v1/public/sales/{}/offer", uuid::Uuid::new_v4())))
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "/problems/not-found").await;
    t.stop().await;
}

crate::on_both_configurations!(
    two_changes_whose_writes_to_the_queue_store_cross_leave_it_with_the_later,
    a_change_stands_when_the_queue_store_has_a_later_version_than_the_ledger,
    the_drift_checker_writes_the_ledgers_settings_over_a_version_the_ledger_never_reached,
    a_change_the_ledger_took_from_a_replica_that_died_before_the_store_reaches_the_store,
    a_closed_sale_that_a_queue_store_restored_from_an_old_snapshot_holds_open_is_closed_again,
);

/// Two changes to a sale's admission, made at once through two replicas: the ledger orders
/// them (600, then 60 a minute), but the earlier one's write reaches the queue store last, and
/// its replica dies right after (or Redis goes away before it could write again). The store
/// keeps the later version of the settings, so it admits at the ledger's rate, not at the
/// stale one, with nobody left to put it right.
async fn two_changes_whose_writes_to_the_queue_store_cross_leave_it_with_the_later(
    backend: crate::helpers::Backend,
) {
    let (t, sale, id, carol) = paused_sale_with_carol_waiting(backend).await;
    let earlier = sluice::domain::Admission::parse(600, 5, None).unwrap();
    // The earlier change: in the ledger, its write to the store still on its way.
    let earlier_record = t
        .app
        .ledger
        .change_sale(id, sluice::ledger::SaleChange::Admission(earlier), None)
        .await
        .unwrap();
    // The later one, through the API: ledger, then store.
    let later = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 60, "max_active": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(later.status(), 200);
    // The earlier write arrives now; its replica goes no further.
    let held = t
        .app
        .queue
        .put_settings(&earlier_record.sale, earlier_record.settings_version, false)
        .await
        .unwrap();
    assert!(
        held.unwrap() > earlier_record.settings_version,
        "the store has a later version of the settings"
    );

    assert_eq!(
        rate_in_store(&t, carol).await,
        60.0,
        "the store admits at the ledger's rate"
    );
    assert!(
        t.app
            .ledger
            .sales_behind_store(100)
            .await
            .unwrap()
            .is_empty(),
        "and the ledger knows it"
    );
    t.stop().await;
}

/// A replica took a close into the ledger and died before writing the queue store: another
/// replica's queue-sync worker finds the sale behind and writes it, so that joins are refused
/// and the attempt still waiting ends EXPIRED (`sale_closed`) within a few of its rounds.
async fn a_change_the_ledger_took_from_a_replica_that_died_before_the_store_reaches_the_store(
    backend: crate::helpers::Backend,
) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.workers.queue_sync_ms = sluice::config::Millis(100)
    })
    .await;
    let sale = t.create_sale(json!({})).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let alice = t.join(&sale, "alice").await;
    let alice = alice["attempt_id"].as_str().unwrap();
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    let closed = sluice::ledger::SaleChange::Status(sluice::domain::SaleStatus::Closed);
    t.app.ledger.change_sale(id, closed, None).await.unwrap();

    let started = std::time::Instant::now();
    loop {
        let join = t
            .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), "bob")
            .send()
            .await
            .unwrap();
        if join.status() == 409 {
            assert_problem(join, 409, "/problems/sale-closed").await;
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the queue store still takes joins: {}",
            join.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    ended_by_the_close(&t, alice, "alice").await;
    // The worker records the sale followed once the closed sale's buckets are deleted, after
    // the close took effect.
    let followed = std::time::Instant::now();
    while !t
        .app
        .ledger
        .sales_behind_store(100)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            followed.elapsed() < std::time::Duration::from_secs(5),
            "the ledger still has the sale behind the store"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    t.stop().await;
}

/// A change the ledger took from a replica that died before writing the queue store, which
/// had meanwhile lost the sale (a flush): the queue-sync worker finds the sale behind and
/// rebuilds it whole from the ledger, closed, before anyone asks for it.
#[tokio::test]
async fn a_change_to_a_sale_the_queue_store_lost_rebuilds_it_from_the_ledger() {
    let t = TestApp::spawn_with(|c| c.workers.queue_sync_ms = sluice::config::Millis(100)).await;
    let sale = t.create_sale(json!({})).await;
    t.join(&sale, "alice").await;
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    t.wipe_queue_keys().await;
    assert!(t.app.queue.holdings(id).await.unwrap().is_none(), "lost");
    let closed = sluice::ledger::SaleChange::Status(sluice::domain::SaleStatus::Closed);
    t.app.ledger.change_sale(id, closed, None).await.unwrap();

    let started = std::time::Instant::now();
    while !t
        .app
        .ledger
        .sales_behind_store(100)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the queue-sync worker does not follow the change"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        t.app.queue.holdings(id).await.unwrap().is_some(),
        "rebuilt before anyone asked"
    );
    join_is_refused_as_closed(&t, &sale, "bob").await;
    t.stop().await;
}

/// The ledger went back (restored from a backup) past the version of a sale's settings the
/// queue store holds: an operator's change after that is still the store's, not refused as
/// older than what it holds.
async fn a_change_stands_when_the_queue_store_has_a_later_version_than_the_ledger(
    backend: crate::helpers::Backend,
) {
    let (t, sale, id, carol) = paused_sale_with_carol_waiting(backend).await;
    // What the store kept of the sale before the ledger went back: version 1000.
    let mut before = t.app.ledger.sale(id).await.unwrap().unwrap().sale;
    before.admission = sluice::domain::Admission::parse(600, 5, None).unwrap();
    t.app.queue.put_settings(&before, 1000, true).await.unwrap();

    let change = t
        .admin(Method::PUT, &format!("/v1/sales/{sale}/admission"))
        .json(&json!({ "rate_per_minute": 60, "max_active": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(change.status(), 200);
    assert_eq!(
        rate_in_store(&t, carol).await,
        60.0,
        "the operator's change stands"
    );
    t.stop().await;
}

/// The ledger went back (restored from a backup) past the version of a paused sale's
/// settings the queue store holds, and nobody changes the sale: the drift checker finds the
/// two apart at two checks in a row and writes the ledger's settings over the store's.
async fn the_drift_checker_writes_the_ledgers_settings_over_a_version_the_ledger_never_reached(
    backend: crate::helpers::Backend,
) {
    let (t, _, id, carol) = paused_sale_with_carol_waiting_on(backend, |c| {
        c.workers.drift_check_ms = sluice::config::Millis(100)
    })
    .await;
    let mut before = t.app.ledger.sale(id).await.unwrap().unwrap().sale;
    before.admission = sluice::domain::Admission::parse(600, 5, None).unwrap();
    t.app.queue.put_settings(&before, 1000, true).await.unwrap();
    assert_eq!(rate_in_store(&t, carol).await, 600.0);

    let started = std::time::Instant::now();
    while rate_in_store(&t, carol).await != 30.0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the store still admits at the settings the ledger never had"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    t.stop().await;
}

/// The queue store was restored from a snapshot taken before a sale's close, longer ago than
/// the queue-sync worker's replay looks back (here: its first round comes after the test): it
/// holds the sale open at its settings of before the close, and takes a join. The drift
/// checker finds the store's version apart from the ledger's at two checks in a row and
/// writes the ledger's: the joiner's attempt ends EXPIRED (`sale_closed`) and joins are
/// refused again.
async fn a_closed_sale_that_a_queue_store_restored_from_an_old_snapshot_holds_open_is_closed_again(
    backend: crate::helpers::Backend,
) {
    let (t, sale, id, _) = paused_sale_with_carol_waiting_on(backend, |c| {
        // Two checks half a second apart: the join below comes well before the repair.
        c.workers.drift_check_ms = sluice::config::Millis(500);
        c.workers.queue_sync_ms = sluice::config::Millis(600_000);
    })
    .await;
    let before = t.app.ledger.sale(id).await.unwrap().unwrap();
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/close"))
        .await;
    let closed = t.app.ledger.sale(id).await.unwrap().unwrap();
    assert_eq!(
        t.app.queue.settings_version(id).await.unwrap(),
        Some(closed.settings_version)
    );

    // The snapshot: the sale as the store had it before the close.
    t.app
        .queue
        .put_settings(&before.sale, before.settings_version, true)
        .await
        .unwrap();
    let dave = t.join(&sale, "dave").await;
    let dave = dave["attempt_id"].as_str().unwrap();

    let started = std::time::Instant::now();
    while t.app.queue.settings_version(id).await.unwrap() != Some(closed.settings_version) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the queue store still holds the closed sale open"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    ended_by_the_close(&t, dave, "dave").await;
    join_is_refused_as_closed(&t, &sale, "erin").await;
    t.stop().await;
}

/// `user`'s attempt ended EXPIRED because its sale closed.
async fn ended_by_the_close(t: &TestApp, attempt: &str, user: &str) {
    let ended = t.status(attempt, user).await;
    assert_eq!(
        (ended["state"].as_str(), ended["reason"].as_str()),
        (Some("EXPIRED"), Some("sale_closed")),
        "{ended}"
    );
}

/// `user`'s join of `sale` is refused: the sale is closed.
async fn join_is_refused_as_closed(t: &TestApp, sale: &str, user: &str) {
    let join = t
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
        .send()
        .await
        .unwrap();
    assert_problem(join, 409, "/problems/sale-closed").await;
}

/// A paused sale admitting 30 a minute, where carol waits: its id as the API and the domain
/// write it, and carol's attempt.
async fn paused_sale_with_carol_waiting(
    backend: crate::helpers::Backend,
) -> (
    TestApp,
    String,
    sluice::domain::SaleId,
    sluice::domain::AttemptId,
) {
    paused_sale_with_carol_waiting_on(backend, |_| {}).await
}

/// [`paused_sale_with_carol_waiting`] on an app configured by `tweak`.
async fn paused_sale_with_carol_waiting_on(
    backend: crate::helpers::Backend,
    tweak: impl FnOnce(&mut sluice::config::Config),
) -> (
    TestApp,
    String,
    sluice::domain::SaleId,
    sluice::domain::AttemptId,
) {
    let t = TestApp::spawn_on_with(backend, tweak).await;
    let sale = t.create_sale(json!({ "rate_per_minute": 30 })).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let carol = t.join(&sale, "carol").await;
    let carol = sluice::domain::AttemptId::parse(carol["attempt_id"].as_str().unwrap()).unwrap();
    let id = sluice::domain::SaleId::parse(&sale).unwrap();
    (t, sale, id, carol)
}

/// The admission rate the queue store has for carol's sale (as her place there shows it).
async fn rate_in_store(t: &TestApp, carol: sluice::domain::AttemptId) -> f64 {
    let user = sluice::domain::UserId::parse("carol").unwrap();
    t.app
        .queue
        .view(carol, &user)
        .await
        .unwrap()
        .configured_rate
}
