//! Prices and amounts, on both configurations: a priced sale's hold records what it costs (the
//! sum of its units' prices, a seat's by its category), the answers, the stats and the
//! ledger carry it, and nothing a client sends changes it; a free claim confirms at checkout
//! with no payment; a bad price is refused and creates nothing.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    a_priced_hold_records_its_amount_and_the_money_follows_it_to_sold,
    seats_cost_their_categorys_price_and_the_rest_the_unit_price,
    a_free_claim_confirms_at_checkout_with_no_payment,
    a_bad_price_is_refused_and_creates_nothing,
);

async fn money(t: &TestApp, sale: &str) -> Value {
    t.stats(sale).await["money"].clone()
}

async fn a_priced_hold_records_its_amount_and_the_money_follows_it_to_sold(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "currency": "KRW", "unit_price": 55_000 }))
        .await;
    let shown = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(
        (&shown["currency"], &shown["unit_price"]),
        (&json!("KRW"), &json!(55_000))
    );

    // The client names an amount of its own: the hold's is the sale's prices, whatever it says.
    let (attempt, token) = t.admitted(&sale, "buyer").await;
    let held = t
        .hold(
            &attempt,
            "buyer",
            json!({ "admission_token": token, "quantity": 3, "amount": 1, "currency": "USD" }),
        )
        .await;
    let held: Value = match held.status().as_u16() {
        200 => held.json().await.unwrap(),
        // A body with fields it does not take may be refused instead: then hold without them.
        _ => t
            .hold(
                &attempt,
                "buyer",
                json!({ "admission_token": token, "quantity": 3 }),
            )
            .await
            .json()
            .await
            .unwrap(),
    };
    assert_eq!(
        (&held["hold"]["amount"], &held["hold"]["currency"]),
        (&json!(165_000), &json!("KRW")),
        "{held}"
    );
    let expect = |held: u64, paying: u64, sold: u64| json!({ "currency": "KRW", "held": held, "paying": paying, "sold": sold, "refunded": 0 });
    assert_eq!(money(&t, &sale).await, expect(165_000, 0, 0));

    let paying: Value = t.checkout(&attempt, "buyer").await.json().await.unwrap();
    assert_eq!(paying["state"], "PAYMENT_PENDING", "{paying}");
    assert_eq!(paying["hold"]["amount"], 165_000);
    assert_eq!(money(&t, &sale).await, expect(0, 165_000, 0));

    let reference = paying["payment"]["reference"].as_str().unwrap();
    let paid = t
        .webhook("evt-priced", "payment.succeeded", reference)
        .await;
    assert_eq!(paid.status(), 200);
    assert_eq!(money(&t, &sale).await, expect(0, 0, 165_000));
    let file = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}/attempts/{attempt}"))
        .await;
    assert_eq!(file["attempt"]["amount"], 165_000, "{file}");

    // The relay publishes the transition with the hold's amount.
    let mut published = None;
    for _ in 0..100 {
        published = t
            .published_events()
            .into_iter()
            .find(|e| e["attempt_id"] == json!(attempt) && e["data"]["to"] == "CONFIRMED");
        if published.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let published = published.expect("the CONFIRMED event is published");
    assert_eq!(
        (&published["data"]["amount"], &published["data"]["currency"]),
        (&json!(165_000), &json!("KRW")),
        "{published}"
    );

    let refunded = t
        .admin(
            Method::POST,
            &format!("/v1/sales/{sale}/attempts/{attempt}/refund"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refunded.status(), 200);
    assert_eq!(money(&t, &sale).await["refunded"], 165_000);
}

async fn seats_cost_their_categorys_price_and_the_rest_the_unit_price(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({
            "quantity": null,
            "seats": ["A-1", "A-2", "B-1", "B-2", "C-1"],
            "currency": "USD",
            "unit_price": 5_000,
            "categories": [
                { "name": "VIP", "unit_price": 15_000, "seats": ["A-1", "A-2"] },
                { "name": "R", "unit_price": 9_000, "seats": ["B-1", "B-2"] },
            ],
        }))
        .await;
    let shown = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(
        shown["categories"],
        json!([
            { "name": "VIP", "unit_price": 15_000, "seats": ["A-1", "A-2"] },
            { "name": "R", "unit_price": 9_000, "seats": ["B-1", "B-2"] },
        ]),
        "{shown}"
    );
    let (attempt, token) = t.admitted(&sale, "fan").await;
    let held: Value = t
        .hold(
            &attempt,
            "fan",
            json!({ "admission_token": token, "seat_ids": ["A-2", "B-1", "C-1"] }),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&held["hold"]["amount"], &held["hold"]["currency"]),
        (&json!(15_000 + 9_000 + 5_000), &json!("USD")),
        "{held}"
    );
}

async fn a_free_claim_confirms_at_checkout_with_no_payment(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "currency": "KRW", "unit_price": 0 }))
        .await;
    let attempt = t.holding(&sale, "coupon-hunter", 1).await;
    let claimed: Value = t
        .checkout(&attempt, "coupon-hunter")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(claimed["state"], "CONFIRMED", "{claimed}");
    assert_eq!(claimed["hold"]["amount"], 0);
    assert!(claimed.get("payment").is_none(), "no payment: {claimed}");
    let stats = t.stats(&sale).await;
    assert_eq!(
        (&stats["confirmed"], &stats["units"]["sold"]),
        (&json!(1), &json!(1))
    );
    // A second checkout is the machine's repeat.
    let again: Value = t
        .checkout(&attempt, "coupon-hunter")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["state"], "CONFIRMED");
}

async fn a_bad_price_is_refused_and_creates_nothing(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let before = t.admin_json(Method::GET, "/v1/sales").await;
    let seats = json!({ "quantity": null, "seats": ["A-1", "A-2"] });
    let with = |extra: Value| {
        let mut body = json!({ "name": "Priced", "quantity": 10 });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let seated = |extra: Value| {
        let mut body = with(seats.clone());
        body.as_object_mut().unwrap().remove("quantity");
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases = [
        (with(json!({ "unit_price": 100 })), "currency"),
        (with(json!({ "currency": "KRW" })), "unit_price"),
        (
            with(json!({ "currency": "XYZ", "unit_price": 100 })),
            "currency",
        ),
        (
            with(json!({ "currency": "krw", "unit_price": 100 })),
            "currency",
        ),
        (
            with(json!({ "currency": "KRW", "unit_price": -1 })),
            "integer",
        ),
        (
            with(json!({ "currency": "KRW", "unit_price": 1, "categories": [
                { "name": "VIP", "unit_price": 5, "seats": ["A-1"] }] })),
            "categories",
        ),
        (
            seated(json!({ "currency": "KRW", "unit_price": 1, "categories": [
                { "name": "VIP", "unit_price": 5, "seats": ["A-1", "Z-9"] }] })),
            "categories",
        ),
        (
            seated(json!({ "currency": "KRW", "unit_price": 1, "categories": [
                { "name": "VIP", "unit_price": 5, "seats": ["A-1"] },
                { "name": "R", "unit_price": 3, "seats": ["A-1", "A-2"] }] })),
            "categories",
        ),
    ];
    for (body, field) in cases {
        let resp = t
            .admin(Method::POST, "/v1/sales")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        assert!(status == 400 || status == 422, "{body}: {status}");
        let problem = assert_problem(
            resp,
            status,
            if status == 400 {
                "/problems/malformed-request"
            } else {
                "/problems/validation"
            },
        )
        .await;
        assert!(problem.to_string().contains(field), "{body}: {problem}");
    }
    assert_eq!(t.admin_json(Method::GET, "/v1/sales").await, before);

    // A sale with no price is not priced: its holds carry no amount.
    let sale = t.create_sale(json!({})).await;
    let (attempt, token) = t.admitted(&sale, "plain").await;
    let held: Value = t
        .hold(
            &attempt,
            "plain",
            json!({ "admission_token": token, "quantity": 1 }),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(held["hold"].get("amount").is_none(), "{held}");
    assert!(t.stats(&sale).await.get("money").is_none());
}
