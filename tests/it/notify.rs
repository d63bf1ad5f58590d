//! "It's your turn" (`sluice::notify`), on both configurations: Web Push through the push
//! service stand-in of `tests/standins/push`, which verifies the VAPID token with the
//! `cryptography` package and decrypts the message with `http_ece` (PyPI, the reference
//! implementation of RFC 8188/8291); and the shop's `attempt.admitted` webhook, whose
//! signature the stand-in checks with Python's hmac. Neither is checked by sluice's code.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use sluice::config::Config;

use crate::helpers::{Backend, StandIn, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_waiting_user_who_subscribed_is_pushed_once_when_admitted,
    a_push_service_that_says_gone_costs_nothing_more,
    the_shop_hears_of_each_admission_once_and_signed,
    the_shop_webhook_is_bounded_in_rate,
    subscriptions_sluice_would_not_send_to_are_refused_and_change_nothing,
);

const HOOK_SECRET: &str = "shop-hook-secret-0123456789";

async fn spawn(
    backend: Backend,
    tweak: impl FnOnce(&mut Config, &StandIn),
) -> (TestApp, StandIn, Value) {
    let push = StandIn::start("push/push_service.py", &[HOOK_SECRET]).await;
    let vapid = push.control("/_test/vapid", json!({})).await;
    let t = TestApp::spawn_on_with(backend, |c| {
        c.notify.vapid_private_key = vapid["private_key"].as_str().unwrap().into();
        c.notify.vapid_public_key = vapid["public_key"].as_str().unwrap().into();
        c.notify.vapid_subject = "mailto:ops@shop.example".into();
        c.notify.web_push_hosts = vec!["127.0.0.1".into()];
        tweak(c, &push);
    })
    .await;
    (t, push, vapid)
}

/// A sale that takes joins but admits nobody until [`open`].
async fn paused_sale(t: &TestApp) -> String {
    let sale = t.create_sale(json!({ "admission_ttl_secs": 120 })).await;
    let paused = t
        .admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    sale
}

async fn open(t: &TestApp, sale: &str) {
    let resumed = t
        .admin_json(Method::POST, &format!("/v1/sales/{sale}/resume"))
        .await;
    assert_eq!(resumed["status"], "open", "{resumed}");
}

async fn subscribe(t: &TestApp, attempt: &str, user: &str, body: &Value) -> reqwest::Response {
    t.as_user(
        Method::PUT,
        &format!("/v1/attempts/{attempt}/web-push"),
        user,
    )
    .json(body)
    .send()
    .await
    .unwrap()
}

/// The stand-in's records of `kind`, once at least `n` arrived (fails after 10 s).
async fn arrived(stand_in: &StandIn, kind: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let got: Vec<Value> = stand_in
            .calls()
            .await
            .into_iter()
            .filter(|c| c["kind"] == kind)
            .collect();
        if got.len() >= n {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} {kind} messages arrived");
}

fn attempt_of(joined: &Value) -> String {
    joined["attempt_id"].as_str().unwrap().to_owned()
}

async fn a_waiting_user_who_subscribed_is_pushed_once_when_admitted(backend: Backend) {
    let (t, push, vapid) = spawn(backend, |_, _| {}).await;
    let key = t.http.get(t.url("/v1/web-push/key")).send().await.unwrap();
    assert_eq!(key.status(), 200);
    let key: Value = key.json().await.unwrap();
    assert_eq!(key["public_key"], vapid["public_key"]);

    let sale = paused_sale(&t).await;
    let ko = attempt_of(&t.join(&sale, "ko-buyer").await);
    let silent = attempt_of(&t.join(&sale, "silent-buyer").await);
    let mut subscription = push.control("/_test/subscribe", json!({})).await;
    subscription["lang"] = json!("ko");
    let resp = subscribe(&t, &ko, "ko-buyer", &subscription).await;
    assert_eq!(resp.status(), 204, "{}", resp.text().await.unwrap());
    // Subscribing again replaces the first: still one message.
    assert_eq!(
        subscribe(&t, &ko, "ko-buyer", &subscription).await.status(),
        204
    );

    open(&t, &sale).await;
    let admitted = t
        .wait_for(&ko, "ko-buyer", "ADMITTED", Duration::from_secs(10))
        .await;
    t.wait_for(&silent, "silent-buyer", "ADMITTED", Duration::from_secs(10))
        .await;
    let pushes = arrived(&push, "push", 1).await;
    let message = &pushes[0];
    assert_eq!(message["status"], 201, "{message}");
    assert_eq!(message["vapid_key"], vapid["public_key"]);
    let payload = &message["payload"];
    assert_eq!(payload["type"], "attempt.admitted");
    assert_eq!(payload["attempt"], json!(ko));
    assert_eq!(payload["sale"], json!(sale));
    assert_eq!(payload["lang"], "ko");
    assert_eq!(payload["url"], json!(format!("/?sale={sale}")));
    let until = chrono::DateTime::parse_from_rfc3339(payload["until"].as_str().unwrap()).unwrap();
    let expires =
        chrono::DateTime::parse_from_rfc3339(admitted["admission_expires_at"].as_str().unwrap())
            .unwrap();
    assert!(
        (until - expires).num_seconds().abs() <= 1,
        "{until} vs {expires}"
    );
    let ttl: i64 = message["ttl"].as_str().unwrap().parse().unwrap();
    assert!(
        (100..=120).contains(&ttl),
        "kept no longer than the admission: {ttl}"
    );
    assert_eq!(message["urgency"], "high");
    assert_eq!(message["topic"].as_str().unwrap().len(), 32);
    assert_eq!(
        message["topic"].as_str().unwrap(),
        &ko[32..],
        "the topic is the attempt's: a push service keeps one message per attempt"
    );
    // The subscription was taken: a while later, still one message, none for the other user.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(arrived(&push, "push", 1).await.len(), 1);
    // Once admitted, the attempt no longer takes a subscription.
    let late = subscribe(&t, &ko, "ko-buyer", &subscription).await;
    assert_eq!(late.status(), 409);
    let problem: Value = late.json().await.unwrap();
    assert_eq!(problem["type"], "/problems/not-waiting");
    let metrics = t.metrics().await;
    assert!(
        metrics.contains(r#"sluice_turn_notifications_total{channel="web_push",outcome="sent"} 1"#),
        "{metrics}"
    );
}

async fn a_push_service_that_says_gone_costs_nothing_more(backend: Backend) {
    let (t, push, _) = spawn(backend, |_, _| {}).await;
    let sale = paused_sale(&t).await;
    let attempt = attempt_of(&t.join(&sale, "gone").await);
    let subscription = push.control("/_test/subscribe", json!({})).await;
    push.control("/_test/answer", json!({ "subscription": 1, "status": 410 }))
        .await;
    assert_eq!(
        subscribe(&t, &attempt, "gone", &subscription)
            .await
            .status(),
        204
    );
    open(&t, &sale).await;
    t.wait_for(&attempt, "gone", "ADMITTED", Duration::from_secs(10))
        .await;
    arrived(&push, "push", 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        arrived(&push, "push", 1).await.len(),
        1,
        "a 410 is not tried again"
    );
    let metrics = t.metrics().await;
    assert!(
        metrics.contains(r#"sluice_turn_notifications_total{channel="web_push",outcome="gone"} 1"#),
        "{metrics}"
    );
}

async fn hooked(backend: Backend, per_second: u32) -> (TestApp, StandIn) {
    let (t, shop, _) = spawn(backend, |c, shop| {
        c.notify.vapid_private_key = Default::default();
        c.notify.webhook_url = Some(crate::helpers::url(format!("{}/hook", shop.url())));
        c.notify.webhook_secret = HOOK_SECRET.into();
        c.notify.max_per_second = std::num::NonZeroU32::new(per_second).unwrap();
    })
    .await;
    (t, shop)
}

async fn the_shop_hears_of_each_admission_once_and_signed(backend: Backend) {
    let (t, shop) = hooked(backend, 200).await;
    // Web Push is off: its key is not found, and a subscription is refused.
    let key = t.http.get(t.url("/v1/web-push/key")).send().await.unwrap();
    assert_eq!(key.status(), 404);
    let sale = paused_sale(&t).await;
    let mut attempts = Vec::new();
    for i in 0..5 {
        attempts.push(attempt_of(&t.join(&sale, &format!("member-{i}")).await));
    }
    let off = subscribe(
        &t,
        &attempts[0],
        "member-0",
        &json!({
            "endpoint": format!("{}/push/1", shop.url()),
            "keys": { "p256dh": "B".repeat(87), "auth": "A".repeat(22) }
        }),
    )
    .await;
    assert_eq!(off.status(), 404);
    open(&t, &sale).await;
    for (i, attempt) in attempts.iter().enumerate() {
        t.wait_for(
            attempt,
            &format!("member-{i}"),
            "ADMITTED",
            Duration::from_secs(10),
        )
        .await;
    }
    let hooks = arrived(&shop, "hook", 5).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        arrived(&shop, "hook", 5).await.len(),
        5,
        "one message per admission"
    );
    let now = chrono::Utc::now().timestamp();
    for (i, attempt) in attempts.iter().enumerate() {
        let hook = hooks
            .iter()
            .find(|h| h["body"]["data"]["attempt_id"] == json!(attempt))
            .unwrap_or_else(|| panic!("no webhook for {attempt}: {hooks:?}"));
        assert_eq!(hook["signature_ok"], true, "{hook}");
        assert!((hook["timestamp"].as_i64().unwrap() - now).abs() < 30);
        let body = &hook["body"];
        assert_eq!(body["type"], "attempt.admitted");
        assert_eq!(body["id"], json!(format!("{attempt}.admitted")));
        assert_eq!(hook["event_id"], body["id"]);
        assert_eq!(body["data"]["sale_id"], json!(sale));
        assert_eq!(body["data"]["user_id"], json!(format!("member-{i}")));
        assert!(body["data"]["admission_expires_at"].is_string());
    }
}

async fn the_shop_webhook_is_bounded_in_rate(backend: Backend) {
    let (t, shop) = hooked(backend, 5).await;
    let sale = paused_sale(&t).await;
    for i in 0..20 {
        t.join(&sale, &format!("fan-{i}")).await;
    }
    open(&t, &sale).await;
    // At 5 a second (a burst of 5 at most), 20 take more than two seconds: after one, no
    // more than 10 can have gone, however fast the machine; then all of them arrive.
    arrived(&shop, "hook", 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let early = arrived(&shop, "hook", 1).await.len();
    assert!(
        early <= 10,
        "{early} webhooks within a second at 5 a second"
    );
    let all = arrived(&shop, "hook", 20).await;
    assert_eq!(all.len(), 20);
}

async fn subscriptions_sluice_would_not_send_to_are_refused_and_change_nothing(backend: Backend) {
    let (t, push, _) = spawn(backend, |_, _| {}).await;
    let sale = paused_sale(&t).await;
    let attempt = attempt_of(&t.join(&sale, "owner").await);
    let good = push.control("/_test/subscribe", json!({})).await;
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        match field {
            "endpoint" => body["endpoint"] = value,
            key => body["keys"][key] = value,
        }
        body
    };
    let cases = [
        // A host that is no push service this sluice sends to.
        (
            with(
                "endpoint",
                json!("https://169.254.169.254/latest/meta-data"),
            ),
            422,
            "endpoint",
        ),
        (
            with("endpoint", json!("http://10.0.0.1/push")),
            422,
            "endpoint",
        ),
        (with("endpoint", json!("not a url")), 422, "endpoint"),
        (with("p256dh", json!("B".repeat(87))), 422, "keys.p256dh"),
        (with("auth", json!("not*base64*url*!")), 422, "keys.auth"),
        (with("auth", Value::Null), 400, ""),
    ];
    for (body, status, field) in cases {
        let resp = subscribe(&t, &attempt, "owner", &body).await;
        assert_eq!(resp.status(), status, "{body}");
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/problem+json"));
        let problem: Value = resp.json().await.unwrap();
        if !field.is_empty() {
            assert_eq!(problem["field"], field, "{problem}");
        }
    }
    // Someone else's attempt is not found (another buyer waiting in the sale); nor is none.
    t.join(&sale, "intruder").await;
    assert_eq!(
        subscribe(&t, &attempt, "intruder", &good).await.status(),
        404
    );
    assert_eq!(
        subscribe(&t, &"0".repeat(64), "owner", &good)
            .await
            .status(),
        404
    );
    // None of that was kept: the turn comes with no push.
    open(&t, &sale).await;
    t.wait_for(&attempt, "owner", "ADMITTED", Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let pushes: Vec<Value> = push
        .calls()
        .await
        .into_iter()
        .filter(|c| c["kind"] == "push")
        .collect();
    assert!(pushes.is_empty(), "{pushes:?}");
}
