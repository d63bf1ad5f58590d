//! Named admin keys and their roles, and the admin audit log, on both configurations: a
//! viewer key is refused on every write route (403) and changes nothing, an operator key on
//! every key route; a revoked key is refused from the next request on; every admin action is
//! in the log with its actor and the target before and after, and is emitted as an event; an
//! action whose entry the ledger cannot write is not done.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(
    every_write_route_refuses_a_key_whose_role_is_too_low,
    a_revoked_key_is_refused_at_once,
    the_audit_log_holds_every_admin_action,
    an_action_the_audit_log_cannot_take_is_not_done,
);

/// A new named key's secret, made with the configured (`admin`) key.
async fn new_key(t: &TestApp, name: &str, role: &str) -> String {
    let resp = t
        .admin(Method::POST, "/v1/admin/keys")
        .json(&json!({ "name": name, "role": role }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["key"]["role"], role, "{created}");
    created["secret"].as_str().unwrap().to_owned()
}

fn with_key(t: &TestApp, key: &str, method: Method, path: &str) -> reqwest::RequestBuilder {
    t.http
        .request(method, t.url(path))
        .header("X-Admin-Key", key)
}

/// A body each admin write route takes, so only the role can refuse it.
/// The id of what an admin's POST of `body` to `path` made.
async fn created(t: &TestApp, path: &str, body: Value) -> String {
    let made: Value = t
        .admin(Method::POST, path)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    made["id"].as_str().unwrap().to_owned()
}

fn body_of(operation: &str) -> Option<Value> {
    match operation {
        "createSale" => Some(json!({ "name": "refused", "quantity": 3, "per_user_limit": 1 })),
        "setAdmission" => Some(json!({ "rate_per_minute": 1, "max_active": 1 })),
        "setProofOfWork" => Some(json!({ "difficulty_bits": 12 })),
        "createAdminKey" => Some(json!({ "name": "refused", "role": "admin" })),
        "changeStock" => Some(json!({ "add": 1 })),
        "updateSale" => Some(json!({ "name": "refused" })),
        "setPhases" => Some(
            json!({ "phases": [{ "name": "refused", "starts_at": "2030-01-01T00:00:00Z",
            "audience": "everyone", "rate_per_minute": 1, "max_active": 1, "per_user_limit": 1 }] }),
        ),
        "addPhaseMembers" => Some(json!({ "user_ids": ["refused"] })),
        "generateAccessCodes" => Some(json!({ "count": 1 })),
        "createGate" | "updateGate" => {
            Some(json!({ "name": "refused", "sale_id": uuid::Uuid::nil(),
            "hosts": ["refused.example"] }))
        }
        "createLayout" => Some(json!({ "name": "refused",
            "stage": { "label": "S", "x": 0, "y": 0, "width": 1, "height": 1 },
            "sections": [{ "id": "A", "name": "A", "rows": [{ "id": "1",
                "seats": [{ "number": "1", "x": 1, "y": 1 }] }] }] })),
        _ => None,
    }
}

/// Every admin operation of the spec: (id, method, path template, role it needs).
fn admin_operations(t: &TestApp) -> Vec<(String, Method, String)> {
    let spec: Value = serde_json::from_str(&sluice::api::document(&t.app)).unwrap();
    let mut ops = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let admin = op["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s.get("AdminAuth").is_some()));
            if admin {
                ops.push((
                    op["operationId"].as_str().unwrap().to_owned(),
                    method.to_uppercase().parse().unwrap(),
                    path.clone(),
                ));
            }
        }
    }
    ops
}

async fn every_write_route_refuses_a_key_whose_role_is_too_low(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({ "quantity": 5 })).await;
    let (attempt, _) = t.admitted(&sale, "reader").await;
    let viewer = new_key(&t, "desk", "viewer").await;
    let operator = new_key(&t, "floor", "operator").await;
    // A sale in phases (a list, then codes) for the phases' routes.
    let opens = chrono::Utc::now() + chrono::Duration::hours(1);
    let phased = t
        .create_sale(json!({ "quantity": 5, "opens_at": opens }))
        .await;
    let phase = |name: &str, at: chrono::DateTime<chrono::Utc>, audience: &str| {
        json!({ "name": name, "starts_at": at, "audience": audience, "rate_per_minute": 60,
                "max_active": 10, "per_user_limit": 1 })
    };
    let set = t
        .admin(Method::PUT, &format!("/v1/sales/{phased}/phases"))
        .json(&json!({ "phases": [phase("members", opens, "list"),
            phase("codes", opens + chrono::Duration::hours(1), "codes")] }))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());

    // A layout for the layouts' reads, a gate for the gates' routes.
    let layout = created(&t, "/v1/layouts", body_of("createLayout").unwrap()).await;
    let gate_sale = t.create_sale(json!({ "quantity": 1 })).await;
    let gate_body = json!({ "name": "site", "sale_id": gate_sale, "hosts": ["shop.example"] });
    let gate = created(&t, "/v1/gates", gate_body).await;
    let before = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    let logged = t.admin_json(Method::GET, "/v1/admin/actions").await["actions"]
        .as_array()
        .unwrap()
        .len();

    let ops = admin_operations(&t);
    let writes: Vec<_> = ops.iter().filter(|(_, m, _)| *m != Method::GET).collect();
    assert!(writes.len() >= 8, "the admin writes: {writes:?}");
    for (id, method, template) in &ops {
        let in_phases = template.contains("/phases");
        let path = template
            .replace("{sale_id}", if in_phases { &phased } else { &sale })
            .replace(
                "{position}",
                if template.ends_with("/codes") {
                    "1"
                } else {
                    "0"
                },
            )
            .replace("{attempt_id}", &attempt)
            .replace("{layout_id}", &layout)
            .replace("{gate_id}", &gate)
            .replace("{visitor_id}", &"0".repeat(32))
            .replace("{name}", "floor");
        // Keys are an admin's: an operator is refused there; every other write is an
        // operator's: a viewer is refused; so are a phase's access codes, which let in.
        let keys = template.starts_with("/v1/admin/keys");
        let secret = id == "listAccessCodes";
        let refused: &[&str] = if keys {
            &[viewer.as_str(), operator.as_str()]
        } else if *method != Method::GET || secret {
            &[viewer.as_str()]
        } else {
            &[]
        };
        for key in refused {
            let mut req = with_key(&t, key, method.clone(), &path);
            if let Some(body) = body_of(id) {
                req = req.json(&body);
            }
            let resp = req.send().await.unwrap();
            let problem = assert_problem(resp, 403, "/problems/role").await;
            assert!(
                problem["detail"].as_str().unwrap().contains("role"),
                "{id}: {problem}"
            );
        }
        if !keys && !secret && *method == Method::GET {
            let resp = with_key(&t, &viewer, Method::GET, &path)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "a viewer reads {id}");
        }
    }

    // Nothing changed: the sale, the keys, the log.
    let after = t
        .admin_json(Method::GET, &format!("/v1/sales/{sale}"))
        .await;
    for field in [
        "status",
        "rate_per_minute",
        "max_active",
        "remaining",
        "proof_of_work_bits",
    ] {
        assert_eq!(before[field], after[field], "{field}");
    }
    let listed = t.admin_json(Method::GET, "/v1/sales").await;
    assert_eq!(
        listed["sales"].as_array().unwrap().len(),
        3,
        "no sale created (the three of this test)"
    );
    let keys = t.admin_json(Method::GET, "/v1/admin/keys").await;
    let names: Vec<&str> = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["desk", "floor"]);
    assert!(keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k.get("revoked_at").is_none()));
    let log = t.admin_json(Method::GET, "/v1/admin/actions").await;
    assert_eq!(log["actions"].as_array().unwrap().len(), logged);
    let me = json_of(with_key(&t, &viewer, Method::GET, "/v1/admin/self")).await;
    assert_eq!(me, json!({ "name": "desk", "role": "viewer" }));
    t.stop().await;
}

async fn json_of(req: reqwest::RequestBuilder) -> Value {
    req.send().await.unwrap().json().await.unwrap()
}

async fn a_revoked_key_is_refused_at_once(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t.create_sale(json!({})).await;
    let key = new_key(&t, "night-shift", "operator").await;
    let pause = || with_key(&t, &key, Method::POST, &format!("/v1/sales/{sale}/pause"));
    assert_eq!(pause().send().await.unwrap().status(), 200);

    let revoked = t
        .admin_json(Method::DELETE, "/v1/admin/keys/night-shift")
        .await;
    let at = revoked["revoked_at"].as_str().expect("revoked").to_owned();
    assert_problem(pause().send().await.unwrap(), 401, "/problems/unauthorized").await;
    let read = with_key(&t, &key, Method::GET, &format!("/v1/sales/{sale}"));
    assert_eq!(read.send().await.unwrap().status(), 401);

    // A second revoke keeps the first time; an unknown name is 404; a used name stays used.
    let again = t
        .admin_json(Method::DELETE, "/v1/admin/keys/night-shift")
        .await;
    assert_eq!(again["revoked_at"], at.as_str());
    let unknown = t
        .admin(Method::DELETE, "/v1/admin/keys/nobody")
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "/problems/not-found").await;
    for name in ["night-shift", "configured"] {
        let reused = t
            .admin(Method::POST, "/v1/admin/keys")
            .json(&json!({ "name": name, "role": "viewer" }))
            .send()
            .await
            .unwrap();
        assert_problem(reused, 409, "/problems/name-taken").await;
    }
    let bad = t
        .admin(Method::POST, "/v1/admin/keys")
        .json(&json!({ "name": "has space", "role": "viewer" }))
        .send()
        .await
        .unwrap();
    assert!(
        bad.status() == 400 || bad.status() == 422,
        "{}",
        bad.status()
    );

    // The configured key still acts as an admin; the list never shows a secret.
    let me = t.admin_json(Method::GET, "/v1/admin/self").await;
    assert_eq!(me, json!({ "name": "configured", "role": "admin" }));
    let keys = t.admin_json(Method::GET, "/v1/admin/keys").await;
    assert!(!keys.to_string().contains(&key), "{keys}");
    assert!(!keys.to_string().contains("secret"), "{keys}");
    t.stop().await;
}

async fn the_audit_log_holds_every_admin_action(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let operator = new_key(&t, "floor", "operator").await;
    let send = |method: Method, path: &str, body: Option<Value>| {
        let mut req = with_key(&t, &operator, method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        async move {
            let resp = req.send().await.unwrap();
            assert!(resp.status().is_success(), "{}", resp.status());
            resp.json::<Value>().await.unwrap()
        }
    };
    let create = json!({ "name": "audited", "quantity": 4, "per_user_limit": 1 });
    let created = with_key(&t, &operator, Method::POST, "/v1/sales")
        .header("Idempotency-Key", "audited-1")
        .json(&create);
    let sale = json_of(created).await["id"].as_str().unwrap().to_owned();
    // A replay of the create is the same sale, and no second action.
    let replayed = with_key(&t, &operator, Method::POST, "/v1/sales")
        .header("Idempotency-Key", "audited-1")
        .json(&create);
    assert_eq!(json_of(replayed).await["id"], sale.as_str());
    let other = t.create_sale(json!({ "name": "other" })).await;
    let path = |tail: &str| format!("/v1/sales/{sale}{tail}");
    send(Method::POST, &path("/pause"), None).await;
    send(Method::POST, &path("/resume"), None).await;
    let admission = json!({ "rate_per_minute": 120, "max_active": 7 });
    send(Method::PUT, &path("/admission"), Some(admission)).await;
    send(
        Method::PUT,
        &path("/proof-of-work"),
        Some(json!({ "difficulty_bits": 9 })),
    )
    .await;
    send(Method::POST, &path("/close"), None).await;
    new_key(&t, "temp", "viewer").await;
    t.admin_json(Method::DELETE, "/v1/admin/keys/temp").await;
    t.admin_json(Method::DELETE, "/v1/admin/keys/temp").await;

    // Newest first, two at a time, the whole log.
    let mut entries = Vec::new();
    let mut cursor = String::new();
    for _ in 0..20 {
        let page = t
            .admin_json(Method::GET, &format!("/v1/admin/actions?limit=2{cursor}"))
            .await;
        entries.extend(page["actions"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    let seen: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["target"].as_str().unwrap(),
            )
        })
        .collect();
    let sale_target = format!("sale:{sale}");
    let other_target = format!("sale:{other}");
    assert_eq!(
        seen,
        [
            ("configured", "revokeAdminKey", "admin_key:temp"),
            ("configured", "createAdminKey", "admin_key:temp"),
            ("floor", "closeSale", sale_target.as_str()),
            ("floor", "setProofOfWork", sale_target.as_str()),
            ("floor", "setAdmission", sale_target.as_str()),
            ("floor", "resumeSale", sale_target.as_str()),
            ("floor", "pauseSale", sale_target.as_str()),
            ("configured", "createSale", other_target.as_str()),
            ("floor", "createSale", sale_target.as_str()),
            ("configured", "createAdminKey", "admin_key:floor"),
        ]
    );
    let by_action = |action: &str| {
        entries
            .iter()
            .find(|e| e["action"] == action && e["actor"] == "floor")
            .unwrap()
    };
    let paused = by_action("pauseSale");
    assert_eq!(
        (&paused["before"]["status"], &paused["after"]["status"]),
        (&json!("open"), &json!("paused"))
    );
    let tuned = by_action("setAdmission");
    assert_eq!(tuned["after"]["rate_per_minute"], 120);
    assert_eq!(tuned["after"]["max_active"], 7);
    assert_ne!(tuned["before"]["max_active"], 7);
    let created = by_action("createSale");
    assert!(created.get("before").is_none(), "{created}");
    assert_eq!(created["after"]["name"], "audited");
    let revoked = &entries[0];
    assert!(
        revoked["before"]["revoked_at"].is_null() && revoked["after"]["revoked_at"].is_string()
    );
    assert!(
        !revoked.to_string().contains("sluice_ak_"),
        "no secret in the log"
    );

    // One sale's entries; each entry's event.
    let one = t
        .admin_json(Method::GET, &format!("/v1/admin/actions?sale_id={sale}"))
        .await;
    let actions = one["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 6);
    assert!(actions.iter().all(|a| a["sale_id"] == sale.as_str()));
    assert_eq!(
        t.outbox_count("sluice.admin.action").await,
        entries.len() as i64
    );
    t.stop().await;
}

/// Each admin action commits with its audit entry or not at all: with the log refusing
/// entries, every action answers 500 and leaves its target as it was.
async fn an_action_the_audit_log_cannot_take_is_not_done(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let sale = t
        .create_sale(json!({ "quantity": 4, "per_user_limit": 1 }))
        .await;
    let (bought, payment) = t.paying(&sale, "buyer", 1).await;
    let reference = payment["reference"].as_str().unwrap();
    assert_eq!(
        t.webhook("evt-1", "payment.succeeded", reference)
            .await
            .status(),
        200
    );
    new_key(&t, "kept", "viewer").await;
    let actions_before = t.outbox_count("sluice.admin.action").await;
    t.refuse_admin_audit().await;

    let path = |tail: &str| format!("/v1/sales/{sale}{tail}");
    let tries = [
        (Method::POST, path("/pause"), None),
        (
            Method::PUT,
            path("/admission"),
            Some(json!({ "rate_per_minute": 120, "max_active": 7 })),
        ),
        (
            Method::PUT,
            path("/proof-of-work"),
            Some(json!({ "difficulty_bits": 9 })),
        ),
        (Method::POST, path("/stock"), Some(json!({ "add": 2 }))),
        (Method::PATCH, path(""), Some(json!({ "name": "renamed" }))),
        (
            Method::POST,
            path(&format!("/attempts/{bought}/refund")),
            None,
        ),
        (
            Method::POST,
            "/v1/sales".into(),
            Some(json!({ "name": "new", "quantity": 1 })),
        ),
        (
            Method::POST,
            "/v1/admin/keys".into(),
            Some(json!({ "name": "new", "role": "viewer" })),
        ),
        (Method::DELETE, "/v1/admin/keys/kept".into(), None),
    ];
    for (method, path, body) in tries {
        let mut req = t.admin(method.clone(), &path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 500, "{method} {path}");
        assert_problem(resp, 500, "/problems/internal").await;
    }

    let now = t.admin_json(Method::GET, &path("")).await;
    assert_eq!(
        (&now["status"], &now["name"], &now["total"]),
        (&json!("open"), &json!("Test sale"), &json!(4)),
        "{now}"
    );
    assert_eq!(
        (&now["max_active"], &now["proof_of_work_bits"]),
        (&json!(1000), &json!(0))
    );
    assert_eq!(t.status(&bought, "buyer").await["state"], "CONFIRMED");
    assert_eq!(t.refunds_for(&bought).await, 0);
    let sales = t.admin_json(Method::GET, "/v1/sales").await;
    assert_eq!(sales["sales"].as_array().unwrap().len(), 1, "{sales}");
    let keys = t.admin_json(Method::GET, "/v1/admin/keys").await;
    let keys = keys["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0]["revoked_at"].is_null(), "{keys:?}");
    assert_eq!(t.outbox_count("sluice.admin.action").await, actions_before);
    t.stop().await;
}
