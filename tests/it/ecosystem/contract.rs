//! The committed spec is a contract frontend teams generate clients from: every operation is
//! summarised, described and has a stable id; every request and response body has an example;
//! the errors an operation can answer, and only those, are listed, as problem+json.

use serde_json::Value;

fn spec() -> Value {
    serde_json::from_str(include_str!("../../../openapi/openapi.json")).expect("JSON")
}

/// The schema a `$ref` names, or the inline one.
fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => &spec["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
        None => schema,
    }
}

/// Whether a body of this schema shows an example (arrays through their items).
fn has_example(spec: &Value, schema: &Value) -> bool {
    let schema = resolve(spec, schema);
    if schema["type"] == "array" {
        return has_example(spec, &schema["items"]);
    }
    schema.get("example").is_some() || schema["type"] == "string"
}

fn operations(spec: &Value) -> Vec<(String, &Value)> {
    let mut ops = Vec::new();
    for (path, methods) in spec["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            ops.push((format!("{} {path}", method.to_uppercase()), op));
        }
    }
    ops
}

#[test]
fn every_operation_is_documented_with_examples_and_its_errors() {
    let spec = spec();
    let mut missing = Vec::new();
    for (name, op) in operations(&spec) {
        for field in ["operationId", "summary", "description"] {
            if op[field].as_str().is_none_or(str::is_empty) {
                missing.push(format!("{name}: no {field}"));
            }
        }
        if let Some(body) = op.get("requestBody") {
            for (content_type, content) in body["content"].as_object().unwrap() {
                let binary = content["schema"]["format"] == "binary";
                let shown = if binary {
                    // A raw body (a signed webhook, a CSV file) shows its example in the
                    // description.
                    let description = op["description"].as_str().unwrap_or("");
                    description.contains("```json") || description.contains("```csv")
                } else {
                    has_example(&spec, &content["schema"])
                };
                if !shown {
                    missing.push(format!("{name}: request {content_type} has no example"));
                }
            }
        }
        let responses = op["responses"].as_object().unwrap();
        for (status, response) in responses {
            if !status.starts_with('2') {
                continue;
            }
            for (content_type, content) in response["content"].as_object().into_iter().flatten() {
                let any_json = content["schema"] == serde_json::json!({});
                if !any_json && !has_example(&spec, &content["schema"]) {
                    missing.push(format!("{name}: {status} {content_type} has no example"));
                }
            }
        }
        // Exactly the errors the operation can answer (src/api/spec.rs says which and why),
        // each as problem+json.
        let id = op["operationId"].as_str().unwrap_or("");
        let Some(expected) = sluice::api::spec::errors_of(id) else {
            missing.push(format!("{name}: {id} is not in src/api/spec.rs's ERRORS"));
            continue;
        };
        let listed: Vec<u16> = responses
            .keys()
            .filter_map(|s| s.parse().ok())
            .filter(|s| *s >= 400)
            .collect();
        if listed != expected {
            missing.push(format!("{name}: lists {listed:?}, answers {expected:?}"));
        }
        // Readiness's 503 is its plain-text answer ("unavailable: ledger"), not a problem.
        for status in expected.iter().filter(|_| id != "readiness") {
            let content = &responses[&status.to_string()]["content"];
            if content.get("application/problem+json").is_none() {
                missing.push(format!("{name}: {status} not listed as problem+json"));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// Clients are generated with these names; renaming one breaks every frontend.
#[test]
fn operation_ids_are_stable() {
    let spec = spec();
    let mut ids: Vec<String> = operations(&spec)
        .iter()
        .map(|(_, op)| op["operationId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let expected = [
        "addPhaseMembers",
        "changeStock",
        "checkout",
        "closeSale",
        "confirmTossPayment",
        "createAdminKey",
        "createGate",
        "createLayout",
        "createSale",
        "deleteGate",
        "endGateSession",
        "enterGate",
        "generateAccessCodes",
        "getAdminSelf",
        "getAdmission",
        "getAttempt",
        "getAttemptFile",
        "getGate",
        "getGateEntry",
        "getJwks",
        "getLayout",
        "getOffer",
        "getPhases",
        "getPublicLayout",
        "getPublicOffer",
        "getSale",
        "getSaleFigures",
        "getSaleStats",
        "getSeatMap",
        "getWebPushKey",
        "holdStock",
        "joinSale",
        "leaveAttempt",
        "listAccessCodes",
        "listAdminActions",
        "listAdminKeys",
        "listAttempts",
        "listGates",
        "listLayouts",
        "listPhaseMembers",
        "listSales",
        "liveness",
        "pauseSale",
        "payInSandbox",
        "readiness",
        "receivePaymentWebhook",
        "receiveProviderWebhook",
        "refundAttempt",
        "releaseHold",
        "resumeSale",
        "revokeAdminKey",
        "setAdmission",
        "setPhases",
        "setProofOfWork",
        "streamAttempt",
        "streamSeatMap",
        "subscribeWebPush",
        "tossFail",
        "tossSuccess",
        "tradeAdmission",
        "updateGate",
        "updateSale",
    ];
    assert_eq!(ids, expected, "operation ids changed: add, never rename");
}

/// The bounds the server enforces stand in the spec, so a generated client can check a value
/// before sending it: ranges and lengths on the request bodies, the form of every id and of
/// `Idempotency-Key`; and no property is an `allOf` (generators such as openapi-python-client
/// drop a schema that has one).
#[test]
fn the_spec_states_the_bounds_and_forms_the_server_enforces() {
    let spec = spec();
    let schemas = &spec["components"]["schemas"];
    let bounds = |schema: &str, field: &str| {
        let p = &schemas[schema]["properties"][field];
        let n = |k: &str| p[k].as_f64();
        (
            n("minimum"),
            n("maximum"),
            p["minLength"].as_u64(),
            p["maxLength"].as_u64(),
        )
    };
    assert_eq!(
        bounds("CreateSale", "name"),
        (None, None, Some(1), Some(200))
    );
    assert_eq!(
        bounds("CreateSale", "quantity"),
        (Some(1.0), Some(1e6), None, None)
    );
    assert_eq!(
        bounds("CreateSale", "per_user_limit"),
        (Some(1.0), Some(1000.0), None, None)
    );
    assert_eq!(
        bounds("CreateSale", "hold_ttl_secs"),
        (Some(1.0), Some(86400.0), None, None)
    );
    assert_eq!(bounds("CreateSale", "lottery_seed").3, Some(128));
    assert_eq!(
        bounds("HoldRequest", "quantity"),
        (Some(1.0), Some(1000.0), None, None)
    );
    assert_eq!(
        bounds("ProofOfWorkSettings", "difficulty_bits").1,
        Some(32.0)
    );
    assert!(schemas["CreateSale"]["properties"]["seats"]["items"]["pattern"].is_string());
    for (name, schema) in schemas.as_object().unwrap() {
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            assert!(
                property.get("allOf").is_none(),
                "{name}.{field} is an allOf"
            );
        }
    }
    for (name, op) in operations(&spec) {
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            let param = parameter["name"].as_str().unwrap();
            if ["sale_id", "attempt_id", "reference", "Idempotency-Key"].contains(&param) {
                assert!(
                    parameter["schema"]["pattern"].is_string(),
                    "{name}: {param} has no pattern"
                );
            }
        }
    }
}
