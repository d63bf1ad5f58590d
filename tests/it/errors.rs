//! Bad input and bad credentials: a documented 4xx in problem+json, and nothing changes.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_problem, Backend, TestApp, ADMIN_KEY};

#[tokio::test]
async fn someone_elses_attempt_is_not_found() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 2 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    for (method, path) in [
        (Method::GET, format!("/v1/attempts/{attempt}")),
        (Method::DELETE, format!("/v1/attempts/{attempt}")),
        (Method::POST, format!("/v1/attempts/{attempt}/checkout")),
        (Method::DELETE, format!("/v1/attempts/{attempt}/hold")),
    ] {
        let resp = t.as_user(method, &path, "mallory").send().await.unwrap();
        assert_problem(resp, 404, "/problems/not-found").await;
    }
    // Even with alice's admission token, mallory cannot hold on alice's attempt.
    let stolen = t
        .hold(
            &attempt,
            "mallory",
            json!({ "admission_token": token, "quantity": 1 }),
        )
        .await;
    assert_problem(stolen, 403, "/problems/admission-token-invalid").await;
    assert_eq!(t.status(&attempt, "alice").await["state"], "ADMITTED");
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    t.stop().await;
}

#[tokio::test]
async fn forged_altered_expired_and_foreign_admission_tokens_are_refused() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 2 })).await;
    let (a, a_token) = t.admitted(&sale, "alice").await;
    let (b, b_token) = t.admitted(&sale, "bob").await;
    let forger = sluice::auth::AdmissionTokens::new(Some([1; 32]));
    let forged = forger.issue(
        sluice::domain::AttemptId::parse(&a).unwrap(),
        &sluice::domain::UserId::parse("alice").unwrap(),
        chrono::Utc::now().timestamp() + 60,
    );
    let mut altered = a_token.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    for token in [forged, altered, b_token.clone(), "not.a.jwt".to_owned()] {
        let resp = t
            .hold(
                &a,
                "alice",
                json!({ "admission_token": token, "quantity": 1 }),
            )
            .await;
        assert_problem(resp, 403, "/problems/admission-token-invalid").await;
    }
    // Signed by sluice's own key but expired: refused as expired.
    let expired = t.app.admission.issue(
        sluice::domain::AttemptId::parse(&a).unwrap(),
        &sluice::domain::UserId::parse("alice").unwrap(),
        chrono::Utc::now().timestamp() - 5,
    );
    let resp = t
        .hold(
            &a,
            "alice",
            json!({ "admission_token": expired, "quantity": 1 }),
        )
        .await;
    assert_problem(resp, 410, "/problems/admission-expired").await;
    // Alice's valid token does not work for Bob's attempt, even when Bob sends it.
    let resp = t
        .hold(
            &b,
            "bob",
            json!({ "admission_token": a_token, "quantity": 1 }),
        )
        .await;
    assert_problem(resp, 403, "/problems/admission-token-invalid").await;
    assert_eq!(t.status(&a, "alice").await["state"], "ADMITTED");
    assert_eq!(t.status(&b, "bob").await["state"], "ADMITTED");
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    t.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_problem_json() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 2 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;

    let not_json = t
        .as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            "alice",
        )
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_problem(not_json, 400, "/problems/malformed-request").await;

    let both = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": token, "quantity": 1, "seat_ids": ["A1"] }),
        )
        .await;
    let body = assert_problem(both, 422, "/problems/validation").await;
    assert_eq!(body["field"], "quantity");

    let zero = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": token, "quantity": 0 }),
        )
        .await;
    assert_problem(zero, 422, "/problems/validation").await;

    let bad_id = t
        .as_user(Method::GET, "/v1/attempts/not-an-id", "alice")
        .send()
        .await
        .unwrap();
    assert_problem(bad_id, 404, "/problems/not-found").await;

    let unknown_sale = t
        .as_user(
            Method::POST,
            &format!("/v1/sales/{}/attempts", uuid::Uuid::now_v7()),
            "alice",
        )
        .send()
        .await
        .unwrap();
    assert_problem(unknown_sale, 404, "/problems/not-found").await;

    let huge = t
        .as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            "alice",
        )
        .header("Content-Type", "application/json")
        .body(format!(
            "{{\"admission_token\":\"{}\"}}",
            "x".repeat(200_000)
        ))
        .send()
        .await
        .unwrap();
    assert_problem(huge, 413, "/problems/payload-too-large").await;

    let no_route = t.http.get(t.url("/v1/nothing-here")).send().await.unwrap();
    assert_problem(no_route, 404, "/problems/not-found").await;

    assert_eq!(t.status(&attempt, "alice").await["state"], "ADMITTED");
    assert_eq!(t.stats(&sale).await["remaining"], 2);
    t.stop().await;
}

#[tokio::test]
async fn credentials_are_checked() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({})).await;
    let anonymous = t
        .http
        .post(t.url(&format!("/v1/sales/{sale}/attempts")))
        .send()
        .await
        .unwrap();
    assert_problem(anonymous, 401, "/problems/unauthorized").await;
    let bad_token = t
        .http
        .post(t.url(&format!("/v1/sales/{sale}/attempts")))
        .bearer_auth("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl")
        .send()
        .await
        .unwrap();
    assert_problem(bad_token, 401, "/problems/unauthorized").await;
    let no_key = t
        .http
        .get(t.url(&format!("/v1/sales/{sale}")))
        .send()
        .await
        .unwrap();
    assert_problem(no_key, 401, "/problems/unauthorized").await;
    let wrong_key = t
        .http
        .get(t.url(&format!("/v1/sales/{sale}")))
        .header("X-Admin-Key", format!("{ADMIN_KEY}x"))
        .send()
        .await
        .unwrap();
    assert_problem(wrong_key, 401, "/problems/unauthorized").await;
    // A user token is not an admin key.
    let user_on_admin = t
        .as_user(Method::POST, &format!("/v1/sales/{sale}/close"), "alice")
        .send()
        .await
        .unwrap();
    assert_problem(user_on_admin, 401, "/problems/unauthorized").await;
    let sale_now = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    assert_eq!(sale_now["status"], "open");
    t.stop().await;
}

#[tokio::test]
async fn invalid_sales_name_the_field() {
    let t = TestApp::spawn().await;
    for (body, field) in [
        (json!({ "name": "x", "quantity": 0 }), "quantity"),
        (json!({ "name": "x" }), "stock"),
        (
            json!({ "name": "x", "quantity": 1, "seats": ["A"] }),
            "stock",
        ),
        (json!({ "name": "", "quantity": 1 }), "name"),
        (
            json!({ "name": "x", "quantity": 1, "hold_ttl_secs": 0 }),
            "hold_ttl_secs",
        ),
        (json!({ "name": "x", "seats": ["A", "A"] }), "seats"),
    ] {
        let resp = t
            .admin(Method::POST, "/v1/sales")
            .json(&body)
            .send()
            .await
            .unwrap();
        let problem = assert_problem(resp, 422, "/problems/validation").await;
        assert_eq!(problem["field"], field, "{body}");
    }
    let wrong_type = t
        .admin(Method::POST, "/v1/sales")
        .json(&json!({ "name": 5, "quantity": "many" }))
        .send()
        .await
        .unwrap();
    assert_problem(wrong_type, 400, "/problems/malformed-request").await;
    t.stop().await;
}

crate::on_both_configurations!(
    text_fields_take_json_strings_only_and_names_no_hidden_characters,
    an_idempotency_key_that_is_not_ascii_is_refused,
    control_characters_in_any_parameter_of_any_operation_are_refused,
);

/// `{"name": -1}` is not the name "-1": a number or a boolean where the spec says string is a
/// malformed request; a name with a control, bidi-override or BOM character is refused with
/// the field named, on both ledgers (PostgreSQL's text cannot hold a NUL). None of them
/// creates a sale.
async fn text_fields_take_json_strings_only_and_names_no_hidden_characters(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    for body in [
        json!({ "name": -1, "quantity": 1 }),
        json!({ "name": true, "quantity": 1 }),
        json!({ "name": "x", "quantity": 1, "opening": "lottery_at_open", "lottery_seed": 7 }),
        json!({ "name": "x", "seats": ["A1", 2] }),
    ] {
        let resp = t
            .admin(Method::POST, "/v1/sales")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(resp, 400, "/problems/malformed-request").await;
    }
    for name in [
        "\u{0}x",
        "two\nlines",
        "tab\there",
        "price \u{202E}0001",
        "\u{FEFF}BOM",
    ] {
        let resp = t
            .admin(Method::POST, "/v1/sales")
            .json(&json!({ "name": name, "quantity": 1 }))
            .send()
            .await
            .unwrap();
        let problem = assert_problem(resp, 422, "/problems/validation").await;
        assert_eq!(problem["field"], "name", "{name:?}: {problem}");
    }
    let sale = t.create_sale(json!({ "name": "서울 콘서트" })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    let hold = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": 12345, "quantity": 1 }),
        )
        .await;
    assert_problem(hold, 400, "/problems/malformed-request").await;
    assert_eq!(t.stats(&sale).await["remaining"], 10, "nothing was held");
    let held = t
        .hold(
            &attempt,
            "alice",
            json!({ "admission_token": token, "quantity": 1 }),
        )
        .await;
    assert_eq!(held.status(), 200);
    t.stop().await;
}

/// `Idempotency-Key: clé` is refused like a key with a space (poem would read it as no key,
/// and two creates would make two sales), and nothing is created.
async fn an_idempotency_key_that_is_not_ascii_is_refused(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    for key in [&b"cl\xc3\xa9"[..], b"caf\xe9", b"has space"] {
        let resp = t
            .admin(Method::POST, "/v1/sales")
            .header(
                "Idempotency-Key",
                reqwest::header::HeaderValue::from_bytes(key).unwrap(),
            )
            .json(&json!({ "name": "keyed", "quantity": 1 }))
            .send()
            .await
            .unwrap();
        let problem = assert_problem(resp, 422, "/problems/validation").await;
        assert_eq!(problem["field"], "Idempotency-Key", "{problem}");
    }
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    let hold = t
        .as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            "alice",
        )
        .header(
            "Idempotency-Key",
            reqwest::header::HeaderValue::from_bytes("clé".as_bytes()).unwrap(),
        )
        .json(&json!({ "admission_token": token, "quantity": 1 }))
        .send()
        .await
        .unwrap();
    assert_problem(hold, 422, "/problems/validation").await;
    assert_eq!(t.stats(&sale).await["remaining"], 3, "nothing was held");
    t.stop().await;
}

#[tokio::test]
async fn idempotency_keys_replay_the_first_answer_and_refuse_another_request() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    let send = |quantity: u32| {
        t.as_user(
            Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            "alice",
        )
        .header("Idempotency-Key", "hold-1")
        .json(&json!({ "admission_token": token, "quantity": quantity }))
        .send()
    };
    let first: serde_json::Value = send(2).await.unwrap().json().await.unwrap();
    let again: serde_json::Value = send(2).await.unwrap().json().await.unwrap();
    assert_eq!(first, again, "the very same answer");
    assert_problem(
        send(3).await.unwrap(),
        422,
        "/problems/idempotency-key-reused",
    )
    .await;
    assert_eq!(t.stats(&sale).await["remaining"], 3);

    // Sale creation too.
    let create = |name: &str| {
        t.admin(Method::POST, "/v1/sales")
            .header("Idempotency-Key", "sale-1")
            .json(&json!({ "name": name, "quantity": 1 }))
            .send()
    };
    let a: serde_json::Value = create("once").await.unwrap().json().await.unwrap();
    let b: serde_json::Value = create("once").await.unwrap().json().await.unwrap();
    assert_eq!(a["id"], b["id"]);
    assert_problem(
        create("twice").await.unwrap(),
        422,
        "/problems/idempotency-key-reused",
    )
    .await;
    t.stop().await;
}

#[tokio::test]
async fn per_user_limits_answer_429_with_retry_after() {
    let t = TestApp::spawn_with(|c| {
        c.limits.join_per_second = 1;
        c.limits.join_burst = 2;
        c.limits.status_per_second = 1;
        c.limits.status_burst = 3;
    })
    .await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let joined = t.join(&sale, "eager").await;
    t.join(&sale, "eager").await;
    let third = t
        .as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), "eager")
        .send()
        .await
        .unwrap();
    let retry = crate::helpers::retry_after(&third);
    assert!((1..=2).contains(&retry), "{retry}");
    assert_problem(third, 429, "/problems/rate-limited").await;
    // Another user is not affected.
    t.join(&sale, "calm").await;

    let attempt = joined["attempt_id"].as_str().unwrap();
    let mut limited = 0;
    for _ in 0..6 {
        let resp = t
            .as_user(Method::GET, &format!("/v1/attempts/{attempt}"), "eager")
            .send()
            .await
            .unwrap();
        if resp.status() == 429 {
            limited += 1;
        }
    }
    assert!(
        limited >= 2,
        "status polls beyond the burst are limited ({limited})"
    );
    t.stop().await;
}

#[tokio::test]
async fn per_ip_limits_hold_across_users_and_honour_a_trusted_proxy() {
    let t = TestApp::spawn_with(|c| {
        c.limits.ip_join_per_second = 1;
        c.limits.ip_join_burst = 3;
        c.http.trust_forwarded_for = true;
    })
    .await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let join = |user: &str, ip: &str| {
        t.as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user)
            .header("X-Forwarded-For", format!("{ip}, 10.0.0.1"))
            .send()
    };
    for user in ["bot-1", "bot-2", "bot-3"] {
        assert_eq!(join(user, "198.51.100.9").await.unwrap().status(), 202);
    }
    let fourth = join("bot-4", "198.51.100.9").await.unwrap();
    assert!(fourth.headers().contains_key("retry-after"));
    assert_problem(fourth, 429, "/problems/rate-limited").await;
    // Another address is not affected, and the limited join changed nothing.
    assert_eq!(join("bot-4", "198.51.100.10").await.unwrap().status(), 202);
    assert_eq!(t.stats(&sale).await["waiting"], 4);
    // The joins turned away together are not told to come back together: each 429's
    // Retry-After is the limit's wait (under a second here: 1) plus up to as much again.
    let mut waits = std::collections::BTreeSet::new();
    for i in 0..40 {
        let resp = join(&format!("crowd-{i}"), "198.51.100.9").await.unwrap();
        if resp.status() == 429 {
            waits.insert(crate::helpers::retry_after(&resp));
        }
    }
    assert_eq!(
        waits.into_iter().collect::<Vec<_>>(),
        [1, 2],
        "Retry-After spread"
    );
    t.stop().await;
}

/// Proof of work on join: off by default; once asked for, a join without it (or with work for
/// another user) is 428 and changes nothing; solved, it joins; raised live, the old work no
/// longer counts.
#[tokio::test]
async fn proof_of_work_is_asked_checked_and_raisable_live() {
    let t = TestApp::spawn().await;
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    let sale_id = sluice::domain::SaleId::parse(&sale).unwrap();
    let set = |bits: u32| {
        t.admin(Method::PUT, &format!("/v1/sales/{sale}/proof-of-work"))
            .json(&json!({ "difficulty_bits": bits }))
            .send()
    };
    let offer = |user: &'static str| {
        t.as_user(Method::GET, &format!("/v1/sales/{sale}/offer"), user)
            .send()
    };
    let join = |user: &'static str, nonce: Option<String>| {
        let mut req = t.as_user(Method::POST, &format!("/v1/sales/{sale}/attempts"), user);
        if let Some(nonce) = nonce {
            req = req.header("Sluice-Proof-Of-Work", nonce);
        }
        req.send()
    };
    let solve = |salt: &str, bits: u32, user: &str| {
        let pow = sluice::domain::ProofOfWork {
            bits: bits as u8,
            salt: salt.to_owned(),
        };
        let user = sluice::domain::UserId::parse(user).unwrap();
        (0u64..)
            .map(|n| n.to_string())
            .find(|nonce| pow.verify(sale_id, &user, nonce))
            .unwrap()
    };
    assert_eq!(
        join("early", None).await.unwrap().status(),
        202,
        "off by default"
    );

    assert_problem(set(40).await.unwrap(), 422, "/problems/validation").await;
    let sale_out: serde_json::Value = set(12).await.unwrap().json().await.unwrap();
    assert_eq!(sale_out["proof_of_work_bits"], 12);
    let challenge: serde_json::Value = offer("bot").await.unwrap().json().await.unwrap();
    let salt = challenge["proof_of_work"]["salt"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(challenge["proof_of_work"]["difficulty_bits"], 12);

    let refused = join("bot", None).await.unwrap();
    let problem = assert_problem(refused, 428, "/problems/proof-of-work-required").await;
    assert!(
        problem["detail"].as_str().unwrap().contains(&salt),
        "{problem}"
    );
    let someone_elses = solve(&salt, 12, "human");
    assert_problem(
        join("bot", Some(someone_elses.clone())).await.unwrap(),
        428,
        "/problems/proof-of-work-required",
    )
    .await;
    assert_eq!(t.stats(&sale).await["waiting"], 1, "refusals queued nobody");
    assert_eq!(
        join("human", Some(someone_elses)).await.unwrap().status(),
        202
    );

    // Raised live: a new salt, and work done for the old one no longer counts.
    let old_work = solve(&salt, 12, "latecomer");
    set(14).await.unwrap();
    assert_problem(
        join("latecomer", Some(old_work)).await.unwrap(),
        428,
        "/problems/proof-of-work-required",
    )
    .await;
    let fresh: serde_json::Value = offer("latecomer").await.unwrap().json().await.unwrap();
    let new_salt = fresh["proof_of_work"]["salt"].as_str().unwrap();
    assert_ne!(new_salt, salt);
    let work = solve(new_salt, 14, "latecomer");
    assert_eq!(join("latecomer", Some(work)).await.unwrap().status(), 202);
    assert_eq!(t.stats(&sale).await["waiting"], 3);
    t.stop().await;
}

/// A control character in any path or query parameter of any operation the spec lists (a NUL,
/// which PostgreSQL's text cannot hold, and others), and a tab in any header parameter (the
/// only one a client can send in a header), on both configurations: a 4xx problem+json,
/// never a 5xx, and a path parameter is named in `field`. The other parameters carry real
/// ids, so each request reaches its handler.
async fn control_characters_in_any_parameter_of_any_operation_are_refused(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let joined = t.join(&sale, "sweeper").await;
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
    let spec: serde_json::Value = t
        .admin(Method::GET, "/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = |name: &str| match name {
        "sale_id" => sale.clone(),
        "attempt_id" => attempt.clone(),
        _ => "x".to_owned(),
    };
    let (mut sent, mut refused) = (0, Vec::new());
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            for (i, param) in params.iter().enumerate() {
                let (name, place) = (
                    param["name"].as_str().unwrap(),
                    param["in"].as_str().unwrap(),
                );
                let bad: &[&str] = match place {
                    "header" => &["a\tb"],
                    _ => &["%00", "a%00b", "%01", "%7F", "%C2%85"],
                };
                for bad in bad {
                    let mut url = path.clone();
                    let mut query = Vec::new();
                    let mut headers = Vec::new();
                    for (j, other) in params.iter().enumerate() {
                        let other_name = other["name"].as_str().unwrap();
                        let value = if i == j {
                            bad.to_string()
                        } else {
                            real(other_name)
                        };
                        match other["in"].as_str().unwrap() {
                            "path" => url = url.replace(&format!("{{{other_name}}}"), &value),
                            "query" if i == j => query.push(format!("{other_name}={value}")),
                            "header" if i == j => headers.push((other_name.to_owned(), value)),
                            _ => {}
                        }
                    }
                    if !query.is_empty() {
                        url = format!("{url}?{}", query.join("&"));
                    }
                    let mut request = t
                        .http
                        .request(method.clone(), t.url(&url))
                        .header("X-Admin-Key", crate::helpers::ADMIN_KEY)
                        .header("Authorization", format!("Bearer {}", t.token("sweeper")))
                        .header("Content-Type", "application/json")
                        .body("{}");
                    for (name, value) in headers {
                        request = request.header(name, value);
                    }
                    let resp = request.send().await.unwrap();
                    sent += 1;
                    let status = resp.status();
                    let kind = resp
                        .headers()
                        .get("content-type")
                        .map(|v| v.to_str().unwrap_or("").to_owned())
                        .unwrap_or_default();
                    let problem: serde_json::Value = resp.json().await.unwrap_or_default();
                    // A path parameter refused is named as the spec names it.
                    let named = place != "path" || status != 400 || problem["field"] == name;
                    if status.is_server_error()
                        || (status.is_client_error() && kind != "application/problem+json")
                        || !named
                    {
                        refused.push(format!(
                            "{method} {url} ({name} in {place}): {status} {kind} {problem}"
                        ));
                    }
                }
            }
        }
    }
    assert!(sent >= 100, "only {sent} requests: is the spec read right?");
    assert!(
        refused.is_empty(),
        "{} bad answers: {refused:#?}",
        refused.len()
    );
    t.stop().await;
}
