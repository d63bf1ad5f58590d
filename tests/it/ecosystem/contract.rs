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
                    // A raw body (a signed webhook) shows its example in the description.
                    op["description"].as_str().unwrap_or("").contains("```json")
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
        "checkout",
        "closeSale",
        "createSale",
        "getAdmission",
        "getAttempt",
        "getJwks",
        "getOffer",
        "getPublicOffer",
        "getSale",
        "getSaleStats",
        "holdStock",
        "joinSale",
        "leaveAttempt",
        "liveness",
        "pauseSale",
        "payInSandbox",
        "readiness",
        "receivePaymentWebhook",
        "releaseHold",
        "resumeSale",
        "setAdmission",
        "setProofOfWork",
        "streamAttempt",
    ];
    assert_eq!(ids, expected, "operation ids changed: add, never rename");
}
