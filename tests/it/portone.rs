//! PortOne V2 end to end against the stand-in of `tests/standins/portone`, on both
//! configurations. Its webhooks are signed by the `standardwebhooks` package (PyPI), the
//! Standard Webhooks specification's own library, never by sluice's code.

use serde_json::{json, Value};
use sluice::config::{Config, ProviderName};
use sluice::domain::AttemptEvent;

use crate::helpers::{Backend, StandIn, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_paid_payment_confirms_its_attempt_for_the_holds_amount,
    a_payment_of_another_amount_confirms_nothing,
    a_webhook_whose_lookup_disagrees_is_ignored,
    a_webhook_whose_lookup_is_answered_late_is_answered_503_and_applied_once_when_resent,
    a_paid_payment_confirms_at_the_deadline_and_an_unpaid_one_expires,
    an_operators_refund_cancels_at_portone,
    seven_deliveries_of_one_webhook_apply_once,
    forged_and_stale_signatures_change_nothing,
);

const API_SECRET: &str = "portone-api-secret-0123456789";
const STORE_ID: &str = "store-00000000-0000-0000-0000-000000000001";
/// A Standard Webhooks secret (base64 after `whsec_`).
const WEBHOOK_SECRET: &str = "whsec_c2x1aWNlLXBvcnRvbmUtdGVzdC1zZWNyZXQ=";

async fn spawn(backend: Backend, tweak: impl FnOnce(&mut Config)) -> (TestApp, StandIn) {
    let portone = StandIn::start(
        "portone/portone_standin.py",
        &[API_SECRET, STORE_ID, WEBHOOK_SECRET],
    )
    .await;
    let t = TestApp::spawn_on_with(backend, |c| {
        c.payments.provider = Some(ProviderName::PortOne);
        c.payments.portone.api_secret = API_SECRET.into();
        c.payments.portone.store_id = STORE_ID.into();
        c.payments.portone.channel_key = "channel-key-test".into();
        c.payments.portone.webhook_secret = WEBHOOK_SECRET.into();
        c.payments.portone.api_base = portone.url();
        c.payments.portone.js_url = format!("{}/v2/browser-sdk.js", portone.url());
        c.payments.call_timeout_ms = sluice::config::Millis(1000);
        c.payments.reconcile_after_secs = sluice::config::Seconds(3600);
        tweak(c);
    })
    .await;
    let hooks = json!({ "webhook_url": t.url("/v1/webhooks/portone") });
    portone.control("/_test/config", hooks).await;
    (t, portone)
}

async fn priced_sale(t: &TestApp) -> String {
    t.create_sale(
        json!({ "name": "청량리-강릉 KTX 설 연휴", "currency": "KRW", "unit_price": 55_000 }),
    )
    .await
}

/// Holds `units` and checks out: (attempt, `payment.pay` of the answer, PortOne's).
async fn checked_out(t: &TestApp, sale: &str, user: &str, units: u32) -> (String, Value) {
    let (attempt, answer) = t.checked_out(sale, user, units).await;
    assert_eq!(answer["payment"]["pay"]["provider"], "portone", "{answer}");
    (attempt, answer["payment"]["pay"].clone())
}

/// The buyer pays `amount` at PortOne; its webhook is sent `times` times: sluice's answers.
async fn pays(portone: &StandIn, pay: &Value, amount: u64, times: u32) -> Value {
    let body = json!({ "paymentId": pay["payment_id"], "amount": amount, "times": times });
    portone.control("/_test/pay", body).await["answers"].clone()
}

async fn a_paid_payment_confirms_its_attempt_for_the_holds_amount(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "buyer", 2).await;
    assert_eq!(
        (&pay["store_id"], &pay["amount"], &pay["currency"]),
        (&json!(STORE_ID), &json!(110_000), &json!("KRW")),
        "{pay}"
    );
    assert_eq!(pay["order_name"], "청량리-강릉 KTX 설 연휴");
    assert_eq!(pays(&portone, &pay, 110_000, 1).await, json!([200]));
    assert_eq!(t.status(&attempt, "buyer").await["state"], "CONFIRMED");
    assert_eq!(t.stats(&sale).await["money"]["sold"], 110_000);
    let read = format!("/payments/{}", pay["payment_id"].as_str().unwrap());
    assert!(
        portone.calls().await.iter().any(|c| c["path"] == read),
        "the payment was read from PortOne"
    );
}

async fn a_payment_of_another_amount_confirms_nothing(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "cheat", 1).await;
    // The buyer's browser asked PortOne for 100 won.
    assert_eq!(pays(&portone, &pay, 100, 1).await, json!([200]));
    let status = t.status(&attempt, "cheat").await;
    assert_eq!(status["state"], "PAYMENT_PENDING", "{status}");
    assert_eq!(t.stats(&sale).await["money"]["sold"], 0);
}

async fn a_webhook_whose_lookup_disagrees_is_ignored(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "doubter", 1).await;
    // "Transaction.Paid", signed, for a payment PortOne does not have as paid.
    let hook = json!({ "paymentId": pay["payment_id"], "type": "Transaction.Paid" });
    assert_eq!(
        portone.control("/_test/webhook", hook).await["answers"],
        json!([200])
    );
    assert_eq!(
        t.status(&attempt, "doubter").await["state"],
        "PAYMENT_PENDING"
    );
    // A failed payment: recorded, the attempt still payable.
    let failed = json!({ "paymentId": pay["payment_id"], "amount": 55_000, "status": "FAILED" });
    portone.control("/_test/pay", failed).await;
    let status = t.status(&attempt, "doubter").await;
    assert_eq!(status["state"], "PAYMENT_PENDING", "{status}");
    assert_eq!(
        status["payment"]["last_failure"], "C51: 카드 한도가 초과되었습니다.",
        "{status}"
    );
}

async fn a_paid_payment_confirms_at_the_deadline_and_an_unpaid_one_expires(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    // Paid, but the webhook never arrives (sent elsewhere).
    let (paid, pay) = checked_out(&t, &sale, "paid", 1).await;
    portone
        .control(
            "/_test/config",
            json!({ "webhook_url": "http://127.0.0.1:9/" }),
        )
        .await;
    pays(&portone, &pay, 55_000, 1).await;
    t.pass_deadline(&paid, AttemptEvent::PaymentTimeout).await;
    t.wait_state(&paid, "paid", "CONFIRMED").await;

    let (unpaid, _) = checked_out(&t, &sale, "unpaid", 1).await;
    t.pass_deadline(&unpaid, AttemptEvent::PaymentTimeout).await;
    t.wait_state(&unpaid, "unpaid", "EXPIRED(payment_timeout)")
        .await;
}

async fn an_operators_refund_cancels_at_portone(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "regret", 2).await;
    pays(&portone, &pay, 110_000, 1).await;
    assert_eq!(t.status(&attempt, "regret").await["state"], "CONFIRMED");
    let file = t.refund(&sale, &attempt).await;
    assert_eq!(file["attempt"]["reason"], "refunded", "{file}");
    let id = pay["payment_id"].as_str().unwrap();
    let at_portone: Value = t
        .http
        .get(format!("{}/payments/{id}", portone.url()))
        .header("Authorization", format!("PortOne {API_SECRET}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(at_portone["status"], "CANCELLED", "{at_portone}");
    assert_eq!(at_portone["amount"]["cancelled"], 110_000);
    assert_eq!(t.stats(&sale).await["money"]["refunded"], 110_000);
    assert_eq!(t.refund_events(&attempt).await, ["taken"]);
}

async fn seven_deliveries_of_one_webhook_apply_once(backend: Backend) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "resent", 1).await;
    assert_eq!(
        pays(&portone, &pay, 55_000, 7).await,
        json!([200, 200, 200, 200, 200, 200, 200])
    );
    assert_eq!(t.status(&attempt, "resent").await["state"], "CONFIRMED");
    assert_eq!(
        t.counter("sluice_webhooks_total", &[("outcome", "duplicate")])
            .await,
        6.0
    );
}

async fn forged_and_stale_signatures_change_nothing(backend: Backend) {
    // The secret configured without its `whsec_` prefix: the same key.
    let bare = WEBHOOK_SECRET.trim_start_matches("whsec_");
    let (t, portone) = spawn(backend, |c| c.payments.portone.webhook_secret = bare.into()).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "target", 1).await;
    let paid = json!({ "paymentId": pay["payment_id"], "amount": 55_000, "times": 0 });
    portone.control("/_test/pay", paid).await;
    let other = "whsec_b3RoZXItc2VjcmV0LW5vdC1zbHVpY2Vz";
    let forged =
        json!({ "paymentId": pay["payment_id"], "type": "Transaction.Paid", "secret": other });
    assert_eq!(
        portone.control("/_test/webhook", forged).await["answers"],
        json!([401])
    );
    let old = chrono::Utc::now().timestamp() - 600;
    let stale =
        json!({ "paymentId": pay["payment_id"], "type": "Transaction.Paid", "timestamp": old });
    assert_eq!(
        portone.control("/_test/webhook", stale).await["answers"],
        json!([401])
    );
    assert_eq!(
        t.status(&attempt, "target").await["state"],
        "PAYMENT_PENDING"
    );
    // Signed with the secret: it verifies.
    let real = json!({ "paymentId": pay["payment_id"], "type": "Transaction.Paid" });
    assert_eq!(
        portone.control("/_test/webhook", real).await["answers"],
        json!([200])
    );
    assert_eq!(t.status(&attempt, "target").await["state"], "CONFIRMED");
}

async fn a_webhook_whose_lookup_is_answered_late_is_answered_503_and_applied_once_when_resent(
    backend: Backend,
) {
    let (t, portone) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t).await;
    let (attempt, pay) = checked_out(&t, &sale, "patient", 1).await;
    // PortOne reads the payment later than sluice's call timeout (1 s): nothing is guessed,
    // the webhook is answered 503, and PortOne sends it again.
    portone
        .control("/_test/config", json!({ "read_delay_ms": 1500 }))
        .await;
    assert_eq!(pays(&portone, &pay, 55_000, 1).await, json!([503]));
    assert_eq!(
        t.status(&attempt, "patient").await["state"],
        "PAYMENT_PENDING"
    );
    portone
        .control("/_test/config", json!({ "read_delay_ms": 0 }))
        .await;
    let again = json!({ "paymentId": pay["payment_id"], "type": "Transaction.Paid", "times": 2 });
    assert_eq!(
        portone.control("/_test/webhook", again).await["answers"],
        json!([200, 200])
    );
    assert_eq!(t.status(&attempt, "patient").await["state"], "CONFIRMED");
    assert_eq!(t.stats(&sale).await["money"]["sold"], 55_000);
}
