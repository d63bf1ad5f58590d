//! Toss Payments end to end against the stand-in of `tests/standins/toss` (written from Toss's
//! API reference; no third party publishes one for these cases), on both configurations. The
//! buyer's payment window is the stand-in's `/_window/pay`; Toss's webhooks are the stand-in's,
//! unsigned, as Toss sends them.

use reqwest::Method;
use serde_json::{json, Value};
use sluice::config::{Config, ProviderName};
use sluice::domain::AttemptEvent;

use crate::helpers::{Backend, StandIn, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_buyer_back_from_toss_is_confirmed_for_the_holds_amount,
    a_tampered_amount_is_refused_and_nothing_is_confirmed,
    a_confirm_answered_late_is_looked_up_and_confirmed_once,
    a_webhook_whose_lookup_disagrees_is_ignored,
    a_payment_toss_approved_confirms_at_the_deadline_and_an_unconfirmed_one_expires,
    an_operators_refund_cancels_at_toss,
    seven_resends_of_one_webhook_apply_once,
    a_virtual_accounts_deposit_confirms_only_with_its_secret,
);

pub const SECRET_KEY: &str = "test_sk_sluice0123456789";
const CLIENT_KEY: &str = "test_ck_sluice0123456789";

pub fn on_toss(c: &mut Config, toss: &StandIn) {
    c.payments.provider = Some(ProviderName::Toss);
    c.payments.toss.secret_key = SECRET_KEY.into();
    c.payments.toss.client_key = CLIENT_KEY.into();
    c.payments.toss.api_base = toss.url();
    c.payments.toss.js_url = format!("{}/v2/standard", toss.url());
    c.payments.call_timeout_ms = sluice::config::Millis(1000);
    c.payments.reconcile_after_secs = sluice::config::Seconds(3600);
}

async fn spawn(backend: Backend, tweak: impl FnOnce(&mut Config)) -> (TestApp, StandIn) {
    let toss = StandIn::start("toss/toss_standin.py", &[SECRET_KEY]).await;
    let t = TestApp::spawn_on_with(backend, |c| {
        on_toss(c, &toss);
        tweak(c);
    })
    .await;
    (t, toss)
}

/// A sale at 55,000 won a unit.
async fn priced_sale(t: &TestApp) -> String {
    t.create_sale(
        json!({ "name": "아이유 콘서트 — 서울", "currency": "KRW", "unit_price": 55_000 }),
    )
    .await
}

/// Holds `units` and checks out: (attempt, `payment.pay` of the answer, Toss's).
async fn checked_out(t: &TestApp, sale: &str, user: &str, units: u32) -> (String, Value) {
    let (attempt, answer) = t.checked_out(sale, user, units).await;
    assert_eq!(answer["payment"]["pay"]["provider"], "toss", "{answer}");
    (attempt, answer["payment"]["pay"].clone())
}

/// The buyer pays in Toss's window: the payment is authorized there; its paymentKey.
async fn pays(toss: &StandIn, pay: &Value) -> String {
    let body = json!({ "orderId": pay["order_id"], "amount": pay["amount"], "orderName": pay["order_name"] });
    toss.control("/_window/pay", body).await["paymentKey"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The browser's return to the success URL (not followed): the answer.
async fn back_from_toss(t: &TestApp, key: &str, order: &Value, amount: u64) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(t.url("/v1/payments/toss/success"))
        .query(&[
            ("paymentKey", key),
            ("orderId", order.as_str().unwrap()),
            ("amount", &amount.to_string()),
        ])
        .send()
        .await
        .unwrap()
}

/// The confirms Toss received.
async fn confirms(toss: &StandIn) -> Vec<Value> {
    toss.calls()
        .await
        .into_iter()
        .filter(|c| c["path"] == "/v1/payments/confirm")
        .collect()
}

async fn a_buyer_back_from_toss_is_confirmed_for_the_holds_amount(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "buyer", 2).await;
    assert_eq!(
        (&pay["client_key"], &pay["amount"], &pay["currency"]),
        (&json!(CLIENT_KEY), &json!(110_000), &json!("KRW")),
        "{pay}"
    );
    assert_eq!(pay["order_name"], "아이유 콘서트 — 서울");
    assert_eq!(pay["success_url"], "/v1/payments/toss/success");
    let order = pay["order_id"].as_str().unwrap();
    assert!(
        order.starts_with("sluice-") && (6..=64).contains(&order.len()),
        "{order}"
    );
    let key = pays(&toss, &pay).await;
    let resp = back_from_toss(&t, &key, &pay["order_id"], 110_000).await;
    assert_eq!(resp.status(), 303);
    assert_eq!(
        resp.headers()["location"].to_str().unwrap(),
        format!("/?sale={sale}&attempt={attempt}")
    );
    assert_eq!(t.status(&attempt, "buyer").await["state"], "CONFIRMED");
    let calls = confirms(&toss).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        calls[0]["idempotency_key"],
        format!("sluice-confirm-{order}")
    );
    assert_eq!(t.stats(&sale).await["money"]["sold"], 110_000);

    // The shop's own success page posts the same: a repeat.
    let resp = t
        .as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/payment/toss"),
            "buyer",
        )
        .json(&json!({ "payment_key": key, "order_id": order, "amount": 110_000 }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ack: Value = resp.json().await.unwrap();
    assert_eq!(
        (&ack["result"], &ack["attempt_state"]),
        (&json!("duplicate"), &json!("CONFIRMED"))
    );
    assert_eq!(
        confirms(&toss).await.len(),
        1,
        "not confirmed twice at Toss"
    );
}

async fn a_tampered_amount_is_refused_and_nothing_is_confirmed(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "cheat", 1).await;
    // The buyer's browser changed the amount before paying: Toss authorized 100 won.
    let tampered = json!({ "order_id": pay["order_id"], "amount": 100, "order_name": "x" });
    let key = pays(&toss, &tampered).await;
    let resp = t
        .as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/payment/toss"),
            "cheat",
        )
        .json(&json!({ "payment_key": key, "order_id": pay["order_id"], "amount": 100 }))
        .send()
        .await
        .unwrap();
    crate::helpers::assert_problem(resp, 422, "/problems/validation").await;
    // Through the success URL: back to the page, which says why.
    let resp = back_from_toss(&t, &key, &pay["order_id"], 100).await;
    assert_eq!(resp.status(), 303);
    let status = t.status(&attempt, "cheat").await;
    assert_eq!(status["state"], "PAYMENT_PENDING", "{status}");
    let failure = status["payment"]["last_failure"].as_str().unwrap();
    assert!(failure.contains("55000"), "{failure}");
    assert!(confirms(&toss).await.is_empty(), "Toss was never asked");
    assert_eq!(t.stats(&sale).await["money"]["sold"], 0);
}

async fn a_confirm_answered_late_is_looked_up_and_confirmed_once(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "patient", 1).await;
    let key = pays(&toss, &pay).await;
    // Toss approves at once and answers after sluice's call timeout (1 s).
    toss.control("/_test/config", json!({ "confirm_delay_ms": 1500 }))
        .await;
    let resp = back_from_toss(&t, &key, &pay["order_id"], 55_000).await;
    assert_eq!(resp.status(), 303);
    assert_eq!(t.status(&attempt, "patient").await["state"], "CONFIRMED");
    let lookups = toss
        .calls()
        .await
        .into_iter()
        .filter(|c| c["path"] == format!("/v1/payments/{key}"))
        .count();
    assert_eq!(lookups, 1, "looked up, not guessed");
    assert_eq!(
        confirms(&toss).await.len(),
        1,
        "the timeout is the bound: no retry"
    );
    // Toss's webhook about it comes after: the same word, applied once.
    let hook = toss
        .control(
            "/_test/webhook",
            json!({ "url": t.url("/v1/webhooks/toss"), "paymentKey": key }),
        )
        .await;
    assert_eq!(hook["answers"], json!([200]));
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .await;
    let applied = file["payment_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "succeeded")
        .count();
    assert_eq!(applied, 1, "{file}");
}

async fn a_webhook_whose_lookup_disagrees_is_ignored(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "doubter", 1).await;
    let key = pays(&toss, &pay).await;
    // The body says DONE; Toss, asked, says IN_PROGRESS (never confirmed).
    let hook = json!({ "url": t.url("/v1/webhooks/toss"), "paymentKey": key, "status": "DONE" });
    assert_eq!(
        toss.control("/_test/webhook", hook).await["answers"],
        json!([200])
    );
    assert_eq!(
        t.status(&attempt, "doubter").await["state"],
        "PAYMENT_PENDING"
    );
    // A paymentKey Toss never gave: 200 (nothing to resend), nothing changed.
    let forged = json!({ "eventType": "PAYMENT_STATUS_CHANGED",
        "data": { "paymentKey": "forged0123", "orderId": pay["order_id"], "status": "DONE" } });
    let resp = t
        .http
        .post(t.url("/v1/webhooks/toss"))
        .json(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["result"], "ignored");
    assert_eq!(
        t.status(&attempt, "doubter").await["state"],
        "PAYMENT_PENDING"
    );
}

async fn a_payment_toss_approved_confirms_at_the_deadline_and_an_unconfirmed_one_expires(
    backend: Backend,
) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    // Approved at Toss (sluice's confirm answer lost with the buyer's browser), then the deadline.
    let (approved, pay) = checked_out(&t, &sale, "approved", 1).await;
    let key = pays(&toss, &pay).await;
    toss.control(
        "/_test/status",
        json!({ "paymentKey": key, "status": "DONE" }),
    )
    .await;
    t.pass_deadline(&approved, AttemptEvent::PaymentTimeout)
        .await;
    t.wait_state(&approved, "approved", "CONFIRMED").await;

    // Authorized but never confirmed: the deadline expires it; Toss lets the payment lapse.
    let (lapsed, pay) = checked_out(&t, &sale, "lapsed", 1).await;
    pays(&toss, &pay).await;
    t.pass_deadline(&lapsed, AttemptEvent::PaymentTimeout).await;
    t.wait_state(&lapsed, "lapsed", "EXPIRED(payment_timeout)")
        .await;
    assert_eq!(
        confirms(&toss).await.len(),
        0,
        "sluice never confirmed either"
    );
}

async fn an_operators_refund_cancels_at_toss(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "regret", 2).await;
    let key = pays(&toss, &pay).await;
    back_from_toss(&t, &key, &pay["order_id"], 110_000).await;
    assert_eq!(t.status(&attempt, "regret").await["state"], "CONFIRMED");
    let file = t.refund(&sale, &attempt).await;
    assert_eq!(file["attempt"]["reason"], "refunded", "{file}");
    let cancels: Vec<Value> = toss
        .calls()
        .await
        .into_iter()
        .filter(|c| c["path"] == format!("/v1/payments/{key}/cancel"))
        .collect();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert!(cancels[0]["idempotency_key"].is_string());
    let at_toss = t
        .http
        .get(format!("{}/v1/payments/{key}", toss.url()))
        .basic_auth(SECRET_KEY, Some(""))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        (&at_toss["status"], &at_toss["balanceAmount"]),
        (&json!("CANCELED"), &json!(0)),
        "{at_toss}"
    );
    assert_eq!(t.stats(&sale).await["money"]["refunded"], 110_000);
    assert_eq!(t.refund_events(&attempt).await, ["taken"]);
}

async fn seven_resends_of_one_webhook_apply_once(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "resent", 1).await;
    let key = pays(&toss, &pay).await;
    // Toss approved it (the buyer's return never came); its webhook is sent seven times.
    toss.control(
        "/_test/status",
        json!({ "paymentKey": key, "status": "DONE" }),
    )
    .await;
    let hook = json!({ "url": t.url("/v1/webhooks/toss"), "paymentKey": key, "times": 7 });
    assert_eq!(
        toss.control("/_test/webhook", hook).await["answers"],
        json!([200, 200, 200, 200, 200, 200, 200])
    );
    assert_eq!(t.status(&attempt, "resent").await["state"], "CONFIRMED");
    assert_eq!(
        t.counter("sluice_webhooks_total", &[("outcome", "duplicate")])
            .await,
        6.0
    );
    assert_eq!(t.stats(&sale).await["money"]["sold"], 55_000);
}

async fn a_virtual_accounts_deposit_confirms_only_with_its_secret(backend: Backend) {
    let (t, toss) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "depositor", 1).await;
    toss.control(
        "/_test/virtual_account",
        json!({ "orderId": pay["order_id"], "amount": 55_000 }),
    )
    .await;
    let url = t.url("/v1/webhooks/toss");
    let forged = json!({ "url": url, "orderId": pay["order_id"], "secret": "ps_guessed" });
    assert_eq!(
        toss.control("/_test/deposit", forged).await["answers"],
        json!([401])
    );
    assert_eq!(
        t.status(&attempt, "depositor").await["state"],
        "PAYMENT_PENDING"
    );
    let deposit = json!({ "url": url, "orderId": pay["order_id"] });
    assert_eq!(
        toss.control("/_test/deposit", deposit).await["answers"],
        json!([200])
    );
    assert_eq!(t.status(&attempt, "depositor").await["state"], "CONFIRMED");
}
