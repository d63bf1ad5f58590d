//! Stripe end to end against localstripe (PyPI), a stateful fake of Stripe's API that sends
//! real `Stripe-Signature` webhooks, on both configurations. Each test runs a localstripe of its
//! own on a free loopback port. What a card does there: `4242…` succeeds, `4000 0000 0000 0341`
//! is declined at the charge; a declined intent cannot be confirmed again (real Stripe can).
//!
//! Where a test needs an event localstripe does not send (the same event five times, a forged
//! one), the test signs it itself, with its own HMAC over the body as Stripe documents it, never
//! with sluice's code.

use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;
use sluice::config::{Config, ProviderName};
use sluice::domain::AttemptEvent;

use crate::helpers::{assert_problem, free_port, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    checkout_creates_a_payment_intent_for_the_holds_amount_and_its_payment_confirms_it,
    a_declined_card_leaves_the_attempt_payable_and_the_deadline_cancels_it,
    with_no_webhook_a_paid_attempt_is_confirmed_by_the_reconciler,
    a_success_after_the_attempt_expired_is_refunded_at_stripe,
    an_operators_refund_is_a_stripe_refund,
    a_refund_stripe_refuses_is_answered_noted_counted_and_changes_nothing,
    a_late_payments_refund_stripe_refuses_is_noted_in_the_file_and_counted,
    a_canceled_intent_expires_its_attempt_and_a_refund_at_stripe_is_noted,
    forged_stale_or_foreign_signatures_change_nothing_and_five_deliveries_confirm_once,
    with_stripe_down_checkout_is_503_and_a_retry_pays,
    a_free_sale_confirms_at_checkout_without_calling_stripe,
);

pub const SECRET_KEY: &str = "sk_test_sluice_0123456789";
const PUBLISHABLE_KEY: &str = "pk_test_sluice_0123456789";
const WEBHOOK_SECRET: &str = "whsec_sluice_test_0123456789";

/// A localstripe of the test's own.
pub struct LocalStripe {
    pub port: u16,
    child: Option<std::process::Child>,
    http: reqwest::Client,
}

impl LocalStripe {
    pub async fn start() -> LocalStripe {
        let mut stripe = LocalStripe {
            port: free_port(),
            child: None,
            http: reqwest::Client::new(),
        };
        stripe.restart().await;
        stripe
    }

    /// Starts it (again, after [`LocalStripe::stop`]: with nothing it knew).
    pub async fn restart(&mut self) {
        let child = std::process::Command::new("localstripe")
            .args(["--port", &self.port.to_string(), "--from-scratch"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("localstripe is installed (scripts/tools installs it)");
        self.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("localstripe did not start");
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stripe's API as the shop's secret key calls it.
    async fn api(&self, method: Method, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.url()))
            .basic_auth(SECRET_KEY, Some(""))
            .form(form)
            .send()
            .await
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }

    pub async fn intent(&self, id: &str) -> Value {
        self.api(Method::GET, &format!("/v1/payment_intents/{id}"), &[])
            .await
            .1
    }

    /// Sends every event to sluice's Stripe endpoint, signed with the endpoint's secret.
    pub async fn register_webhook(&self, t: &TestApp) {
        let resp = self
            .http
            .post(format!("{}/_config/webhooks/sluice", self.url()))
            .form(&[
                ("url", t.url("/v1/webhooks/stripe").as_str()),
                ("secret", WEBHOOK_SECRET),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }

    /// What the buyer's browser does with Stripe.js: a card attached to the intent, then the
    /// intent confirmed. The status of the confirmation, and the intent after it.
    pub async fn pay(&self, intent: &str, card: &str) -> (u16, Value) {
        let (_, method) = self
            .api(
                Method::POST,
                "/v1/payment_methods",
                &[
                    ("type", "card"),
                    ("card[number]", card),
                    ("card[exp_month]", "12"),
                    ("card[exp_year]", "2034"),
                    ("card[cvc]", "123"),
                ],
            )
            .await;
        let method = method["id"].as_str().unwrap();
        let path = format!("/v1/payment_intents/{intent}");
        let (attached, _) = self
            .api(Method::POST, &path, &[("payment_method", method)])
            .await;
        if attached != 200 {
            return (attached, self.intent(intent).await);
        }
        let (status, _) = self
            .api(Method::POST, &format!("{path}/confirm"), &[])
            .await;
        (status, self.intent(intent).await)
    }
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Takes payments through `stripe`.
pub fn on_stripe(c: &mut Config, stripe: &LocalStripe) {
    c.payments.provider = Some(ProviderName::Stripe);
    c.payments.stripe.secret_key = SECRET_KEY.into();
    c.payments.stripe.publishable_key = PUBLISHABLE_KEY.into();
    c.payments.stripe.webhook_secret = WEBHOOK_SECRET.into();
    c.payments.stripe.api_base = stripe.url();
    c.payments.stripe.js_url = format!("{}/js.stripe.com/v3/", stripe.url());
    c.payments.call_timeout_ms = sluice::config::Millis(2000);
    // The reconciler only where a test asks for it.
    c.payments.reconcile_after_secs = sluice::config::Seconds(3600);
}

async fn spawn(backend: Backend, tweak: impl FnOnce(&mut Config)) -> (TestApp, LocalStripe) {
    let stripe = LocalStripe::start().await;
    let t = TestApp::spawn_on_with(backend, |c| {
        on_stripe(c, &stripe);
        tweak(c);
    })
    .await;
    (t, stripe)
}

/// A sale at 55,000 won a unit.
async fn priced_sale(t: &TestApp, extra: Value) -> String {
    let mut body = json!({ "currency": "KRW", "unit_price": 55_000 });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    t.create_sale(body).await
}

/// The PaymentIntent id in a client secret (`pi_…_secret_…`).
fn intent_of(answer: &Value) -> String {
    assert_eq!(answer["payment"]["pay"]["provider"], "stripe", "{answer}");
    let secret = answer["payment"]["pay"]["client_secret"]
        .as_str()
        .unwrap_or_else(|| panic!("a client secret: {answer}"));
    secret.split("_secret_").next().unwrap().to_owned()
}

async fn state_of(t: &TestApp, attempt: &str, user: &str) -> Value {
    t.status(attempt, user).await
}

/// `Stripe-Signature` as Stripe computes it: HMAC-SHA256 of `<t>.<body>` with the secret's
/// bytes, hex.
fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.{body}").as_bytes());
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

async fn post_event(t: &TestApp, signature: &str, body: &str) -> reqwest::Response {
    t.http
        .post(t.url("/v1/webhooks/stripe"))
        .header("Stripe-Signature", signature)
        .header("Content-Type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// An event as Stripe sends it, about `object`.
fn event(id: &str, kind: &str, object: &Value) -> String {
    json!({ "id": id, "object": "event", "type": kind, "data": { "object": object } }).to_string()
}

async fn checkout_creates_a_payment_intent_for_the_holds_amount_and_its_payment_confirms_it(
    backend: Backend,
) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    stripe.register_webhook(&t).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "buyer", 2).await;
    assert_eq!(paying["state"], "PAYMENT_PENDING", "{paying}");
    let pay = &paying["payment"];
    assert_eq!(pay["provider"], "stripe");
    assert_eq!(pay["pay"]["provider"], "stripe");
    assert_eq!(pay["pay"]["publishable_key"], PUBLISHABLE_KEY);
    assert_eq!(
        pay["pay"]["js_url"],
        format!("{}/js.stripe.com/v3/", stripe.url())
    );
    let intent_id = intent_of(&paying);
    let intent = stripe.intent(&intent_id).await;
    assert_eq!(
        (
            &intent["amount"],
            &intent["currency"],
            &intent["metadata"]["attempt_id"]
        ),
        (&json!(110_000), &json!("krw"), &json!(attempt)),
        "{intent}"
    );
    // Checkout again: the same intent.
    let again: Value = t.checkout(&attempt, "buyer").await.json().await.unwrap();
    assert_eq!(intent_of(&again), intent_id);

    let (status, paid) = stripe.pay(&intent_id, "4242424242424242").await;
    assert_eq!((status, &paid["status"]), (200, &json!("succeeded")));
    t.wait_state(&attempt, "buyer", "CONFIRMED").await;
    assert_eq!(t.stats(&sale).await["money"]["sold"], 110_000);
    let calls = t
        .counter(
            "sluice_provider_calls_total",
            &[
                ("provider", "stripe"),
                ("call", "create_intent"),
                ("outcome", "ok"),
            ],
        )
        .await;
    assert_eq!(calls, 1.0, "one intent created");
}

async fn a_declined_card_leaves_the_attempt_payable_and_the_deadline_cancels_it(backend: Backend) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    stripe.register_webhook(&t).await;
    let sale = priced_sale(&t, json!({ "quantity": 1 })).await;
    let (attempt, paying) = t.checked_out(&sale, "unlucky", 1).await;
    let intent_id = intent_of(&paying);
    let (status, _) = stripe.pay(&intent_id, "4000000000000341").await;
    assert_eq!(status, 402, "the card is declined");
    // localstripe's payment_intent.payment_failed: the attempt stays payable, with the failure.
    let mut failed = Value::Null;
    for _ in 0..100 {
        failed = state_of(&t, &attempt, "unlucky").await;
        if failed["payment"]["last_failure"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(failed["state"], "PAYMENT_PENDING", "{failed}");
    assert_eq!(
        failed["payment"]["last_failure"], "Your card was declined.",
        "{failed}"
    );

    // Real Stripe takes a second card on the same intent; localstripe does not, so this
    // buyer's next step is another card that localstripe refuses too, and the deadline.
    let (again, _) = stripe.pay(&intent_id, "4242424242424242").await;
    assert_ne!(
        again, 200,
        "localstripe cannot confirm a declined intent again"
    );
    t.pass_deadline(&attempt, AttemptEvent::PaymentTimeout)
        .await;
    t.wait_state(&attempt, "unlucky", "EXPIRED(payment_timeout)")
        .await;
    assert_eq!(stripe.intent(&intent_id).await["status"], "canceled");
    assert_eq!(t.stats(&sale).await["remaining"], 1, "the unit is back");
}

async fn with_no_webhook_a_paid_attempt_is_confirmed_by_the_reconciler(backend: Backend) {
    let (t, stripe) = spawn(backend, |c| {
        c.payments.reconcile_after_secs = sluice::config::Seconds(1)
    })
    .await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "quiet", 1).await;
    let intent_id = intent_of(&paying);
    let (status, _) = stripe.pay(&intent_id, "4242424242424242").await;
    assert_eq!(status, 200);
    t.wait_state(&attempt, "quiet", "CONFIRMED").await;
    // The reconciler counts its lookup once the confirmation it made has returned.
    let mut lookups = 0.0;
    for _ in 0..50 {
        lookups = t
            .counter("sluice_reconciler_lookups_total", &[("outcome", "paid")])
            .await;
        if lookups > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lookups, 1.0);

    // And at the deadline: a paid intent found there confirms its attempt as well.
    let (late, paying) = t.checked_out(&sale, "at-the-deadline", 1).await;
    let intent_id = intent_of(&paying);
    stripe.pay(&intent_id, "4242424242424242").await;
    t.pass_deadline(&late, AttemptEvent::PaymentTimeout).await;
    t.wait_state(&late, "at-the-deadline", "CONFIRMED").await;
}

/// Expires a paying attempt at its deadline in the ledger, without asking Stripe (as when the
/// reaper's look at the provider came just before the buyer paid).
async fn expired_unpaid(t: &TestApp, attempt: &str) {
    t.pass_deadline(attempt, AttemptEvent::PaymentTimeout).await;
    let expired = t
        .app
        .ledger
        .expire_due(AttemptEvent::PaymentTimeout, 10)
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
}

async fn a_success_after_the_attempt_expired_is_refunded_at_stripe(backend: Backend) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "racer", 1).await;
    let intent_id = intent_of(&paying);
    // The deadline wins the race in the ledger (its check at the provider came just before the
    // buyer paid): the attempt expires without asking Stripe again.
    expired_unpaid(&t, &attempt).await;
    let (status, paid) = stripe.pay(&intent_id, "4242424242424242").await;
    assert_eq!(status, 200, "the buyer paid the intent: {paid}");
    // Stripe's word arrives after it.
    let body = event("evt_race", "payment_intent.succeeded", &paid);
    let now = chrono::Utc::now().timestamp();
    let resp = post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    assert_eq!(resp.status(), 200);
    let ack: Value = resp.json().await.unwrap();
    assert_eq!(ack["result"], "refund_required", "{ack}");
    t.wait_state(&attempt, "racer", "EXPIRED(payment_timeout)")
        .await;
    let charge = stripe.intent(&intent_id).await["latest_charge"].clone();
    let charge = match charge.as_str() {
        Some(id) => {
            stripe
                .api(Method::GET, &format!("/v1/charges/{id}"), &[])
                .await
                .1
        }
        None => charge,
    };
    assert_eq!(charge["amount_refunded"], 55_000, "{charge}");
    // One refund_required, saying sluice asks Stripe for it (so the shop refunds nothing).
    assert_eq!(t.refund_events(&attempt).await, ["asked"], "{charge}");
}

async fn an_operators_refund_is_a_stripe_refund(backend: Backend) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    stripe.register_webhook(&t).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "regret", 2).await;
    let intent_id = intent_of(&paying);
    stripe.pay(&intent_id, "4242424242424242").await;
    t.wait_state(&attempt, "regret", "CONFIRMED").await;
    let file = t.refund(&sale, &attempt).await;
    assert_eq!(file["attempt"]["reason"], "refunded", "{file}");
    let kinds: Vec<&str> = file["payment_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"refund_taken"), "{file}");
    let (_, refunds) = stripe
        .api(
            Method::GET,
            &format!("/v1/refunds?payment_intent={intent_id}"),
            &[],
        )
        .await;
    let refunded: u64 = refunds["data"]
        .as_array()
        .map(|r| r.iter().map(|r| r["amount"].as_u64().unwrap()).sum())
        .unwrap_or(0);
    assert_eq!(refunded, 110_000, "{refunds}");
    assert_eq!(t.stats(&sale).await["money"]["refunded"], 110_000);
    // The event says the money is back: a shop that acts on it refunds nothing twice.
    assert_eq!(t.refund_events(&attempt).await, ["taken"]);
}

async fn a_refund_stripe_refuses_is_answered_noted_counted_and_changes_nothing(backend: Backend) {
    let (t, mut stripe) = spawn(backend, |_| {}).await;
    stripe.register_webhook(&t).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "kept", 1).await;
    stripe.pay(&intent_of(&paying), "4242424242424242").await;
    t.wait_state(&attempt, "kept", "CONFIRMED").await;
    // Stripe no longer knows the payment (a localstripe started afresh): it refuses the refund.
    stripe.stop();
    stripe.restart().await;
    let resp = t
        .admin(
            Method::POST,
            &format!("/v1/sales/{sale}/attempts/{attempt}/refund"),
        )
        .send()
        .await
        .unwrap();
    assert_problem(resp, 502, "/problems/provider-refused").await;
    let file = refusal_noted(&t, &sale, &attempt, "operator").await;
    assert_eq!(file["attempt"]["state"], "CONFIRMED", "{file}");
    assert_eq!(t.stats(&sale).await["money"]["sold"], 55_000, "still sold");
}

/// Checks that a refund Stripe refused (an operator's or a late payment's: `kind`) is noted in
/// the attempt's file and counted once; answers the file.
async fn refusal_noted(t: &TestApp, sale: &str, attempt: &str, kind: &str) -> Value {
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .await;
    assert!(
        file["payment_events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "refund_refused"),
        "{file}"
    );
    let labels = [
        ("provider", "stripe"),
        ("kind", kind),
        ("outcome", "refused"),
    ];
    assert_eq!(t.counter("sluice_refunds_total", &labels).await, 1.0);
    file
}

/// Money after expiry whose refund Stripe refuses: the event said sluice asks for it, so the
/// refusal is where support and the dashboard look (the file, the counter), for a refund by
/// hand.
async fn a_late_payments_refund_stripe_refuses_is_noted_in_the_file_and_counted(backend: Backend) {
    let (t, mut stripe) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "too-late", 1).await;
    let intent_id = intent_of(&paying);
    expired_unpaid(&t, &attempt).await;
    let (_, paid) = stripe.pay(&intent_id, "4242424242424242").await;
    // Stripe no longer knows the payment (a localstripe started afresh): it refuses the refund.
    stripe.stop();
    stripe.restart().await;
    let body = event("evt_too_late", "payment_intent.succeeded", &paid);
    let now = chrono::Utc::now().timestamp();
    let resp = post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    assert_eq!(resp.status(), 200);
    let ack: Value = resp.json().await.unwrap();
    assert_eq!(ack["result"], "refund_required", "{ack}");
    assert_eq!(t.refund_events(&attempt).await, ["asked"]);
    refusal_noted(&t, &sale, &attempt, "late").await;
}

/// The events localstripe does not send (`payment_intent.canceled`, `charge.refunded`), about
/// its own objects, signed by the test.
async fn a_canceled_intent_expires_its_attempt_and_a_refund_at_stripe_is_noted(backend: Backend) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t, json!({ "quantity": 2 })).await;
    let now = chrono::Utc::now().timestamp();
    // Canceled at Stripe (its dashboard, or an expiry there): the attempt ends, its unit back.
    let (gone, paying) = t.checked_out(&sale, "canceled", 1).await;
    let intent = intent_of(&paying);
    let (status, canceled) = stripe
        .api(
            Method::POST,
            &format!("/v1/payment_intents/{intent}/cancel"),
            &[],
        )
        .await;
    assert_eq!((status, &canceled["status"]), (200, &json!("canceled")));
    let body = event("evt_canceled", "payment_intent.canceled", &canceled);
    let resp = post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    assert_eq!(resp.json::<Value>().await.unwrap()["result"], "applied");
    t.wait_state(&gone, "canceled", "EXPIRED(payment_failed)")
        .await;
    assert_eq!(t.stats(&sale).await["remaining"], 2);

    // A purchase refunded in Stripe's dashboard: noted in the attempt's file.
    let (bought, paying) = t.checked_out(&sale, "refunded-there", 1).await;
    let intent = intent_of(&paying);
    let (_, paid) = stripe.pay(&intent, "4242424242424242").await;
    let body = event("evt_paid", "payment_intent.succeeded", &paid);
    post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    t.wait_state(&bought, "refunded-there", "CONFIRMED").await;
    let (_, refund) = stripe
        .api(
            Method::POST,
            "/v1/refunds",
            &[("payment_intent", intent.as_str())],
        )
        .await;
    let charge = json!({
        "id": refund["charge"], "object": "charge", "payment_intent": intent, "refunded": true,
        "refunds": { "data": [refund] },
    });
    let body = event("evt_refunded", "charge.refunded", &charge);
    let resp = post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    assert_eq!(resp.json::<Value>().await.unwrap()["result"], "recorded");
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{bought}"))
        .await;
    assert!(
        file["payment_events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "refunded" && e["provider_event_id"] == "evt_refunded"),
        "{file}"
    );
}

async fn forged_stale_or_foreign_signatures_change_nothing_and_five_deliveries_confirm_once(
    backend: Backend,
) {
    let (t, stripe) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t, json!({})).await;
    let (attempt, paying) = t.checked_out(&sale, "careful", 1).await;
    let intent_id = intent_of(&paying);
    let (_, paid) = stripe.pay(&intent_id, "4242424242424242").await;
    let body = event("evt_once", "payment_intent.succeeded", &paid);
    let now = chrono::Utc::now().timestamp();
    let good = sign(WEBHOOK_SECRET, now, &body);
    let forged = format!("t={now},v1={}", "ab".repeat(32));
    let stale = sign(WEBHOOK_SECRET, now - 301, &body);
    let foreign = sign("whsec_another_endpoint_secret", now, &body);
    for signature in [
        forged.as_str(),
        stale.as_str(),
        foreign.as_str(),
        "",
        "v1=zz",
    ] {
        let resp = post_event(&t, signature, &body).await;
        assert!(
            resp.status().is_client_error(),
            "{signature}: {}",
            resp.status()
        );
        if resp.status() == 401 {
            assert_problem(resp, 401, "/problems/bad-signature").await;
        }
    }
    assert_eq!(
        state_of(&t, &attempt, "careful").await["state"],
        "PAYMENT_PENDING"
    );
    // A rolled secret sends two v1 values: one matching is enough.
    let rolled = format!("{forged},{}", good.split(',').nth(1).unwrap());
    let deliveries = (0..5).map(|i| {
        let signature = if i == 0 { rolled.clone() } else { good.clone() };
        let t = &t;
        let body = body.clone();
        async move { post_event(t, &signature, &body).await }
    });
    let answers = futures_util::future::join_all(deliveries).await;
    let mut results = Vec::new();
    for resp in answers {
        assert_eq!(resp.status(), 200);
        results.push(resp.json::<Value>().await.unwrap()["result"].clone());
    }
    results.sort_by_key(|r| r.to_string());
    assert_eq!(
        results,
        [
            json!("applied"),
            json!("duplicate"),
            json!("duplicate"),
            json!("duplicate"),
            json!("duplicate")
        ]
    );
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .await;
    let confirmations = file["trail"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["to"] == "CONFIRMED")
        .count();
    assert_eq!(confirmations, 1, "{file}");
    // An event about an intent sluice did not start: 200, nothing changes.
    let (_, other) = stripe
        .api(
            Method::POST,
            "/v1/payment_intents",
            &[("amount", "100"), ("currency", "krw")],
        )
        .await;
    let body = event("evt_other", "payment_intent.succeeded", &other);
    let resp = post_event(&t, &sign(WEBHOOK_SECRET, now, &body), &body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["result"], "ignored");
}

async fn with_stripe_down_checkout_is_503_and_a_retry_pays(backend: Backend) {
    let (t, mut stripe) = spawn(backend, |_| {}).await;
    let sale = priced_sale(&t, json!({ "quantity": 1 })).await;
    let attempt = t.holding(&sale, "patient", 1).await;
    stripe.stop();
    let resp = t.checkout(&attempt, "patient").await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    assert_problem(resp, 503, "/problems/unavailable").await;
    // Nothing is lost: the unit stays the buyer's.
    assert_eq!(t.stats(&sale).await["remaining"], 0);
    stripe.restart().await;
    stripe.register_webhook(&t).await;
    let retried = t.checkout(&attempt, "patient").await;
    assert_eq!(retried.status(), 200);
    let paying: Value = retried.json().await.unwrap();
    let (status, _) = stripe.pay(&intent_of(&paying), "4242424242424242").await;
    assert_eq!(status, 200);
    t.wait_state(&attempt, "patient", "CONFIRMED").await;
}

async fn a_free_sale_confirms_at_checkout_without_calling_stripe(backend: Backend) {
    let (t, _stripe) = spawn(backend, |_| {}).await;
    let sale = t
        .create_sale(json!({ "currency": "KRW", "unit_price": 0 }))
        .await;
    let (_, claimed) = t.checked_out(&sale, "lucky", 1).await;
    assert_eq!(claimed["state"], "CONFIRMED", "{claimed}");
    let metrics = t.metrics().await;
    assert!(
        !metrics.contains("sluice_provider_calls_total{"),
        "no call to Stripe: {}",
        metrics
            .lines()
            .filter(|l| l.contains("provider"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // An unpriced sale cannot be sold through Stripe.
    let resp = t
        .admin(Method::POST, "/v1/sales")
        .json(&json!({ "name": "No price", "quantity": 1 }))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 422, "/problems/validation").await;
}
