//! The spec as it is served (`/openapi.json`, `/docs`) and committed (`sluice openapi`):
//! poem-openapi's document with each operation's error answers cut to those it can give.
//! Every handler answers [`super::problem::ApiError`], whose variants are every error status
//! there is; a client generated from a spec that listed all of them everywhere would expect a
//! 428 from `getSale`. [`ERRORS`] says, per operation, which it can answer and why.

use serde_json::Value;

/// The error statuses each operation can answer. Where they come from: 400 a body or a
/// required header that does not parse, or a parameter with a control character; 401 no or bad credentials (a bad signature for the
/// webhook); 403 an admission token for another attempt, or an admin key whose role does
/// not allow the operation; 404 an id that names nothing (or the
/// sandbox turned off); 409 the state refuses it (closed, sold out, a seat taken, the limit,
/// a transition that does not apply, an `Idempotency-Key` whose first request still runs);
/// 410 an attempt or admission that expired, or a place the store lost (`rejoin`); 413 a
/// body over the limit (any POST or PUT); 415 a body that is not JSON; 422 a value out of
/// range, an `Idempotency-Key` that is not printable ASCII or reused with another request;
/// 428 proof of work missing; 429 the per-user or per-IP limit of joins and status reads; 500
/// a fault of sluice's own; 503 a store that is down.
pub const ERRORS: &[(&str, &[u16])] = &[
    ("createSale", &[400, 401, 403, 409, 413, 415, 422, 500, 503]),
    ("getSale", &[400, 401, 404, 500, 503]),
    ("pauseSale", &[400, 401, 403, 404, 409, 413, 500, 503]),
    ("resumeSale", &[400, 401, 403, 404, 409, 413, 500, 503]),
    ("closeSale", &[400, 401, 403, 404, 413, 500, 503]),
    ("getAdmission", &[400, 401, 404, 500, 503]),
    (
        "setAdmission",
        &[400, 401, 403, 404, 413, 415, 422, 500, 503],
    ),
    (
        "setProofOfWork",
        &[400, 401, 403, 404, 413, 415, 422, 500, 503],
    ),
    ("getSaleStats", &[400, 401, 404, 500, 503]),
    ("getSaleFigures", &[400, 401, 404, 422, 500, 503]),
    (
        "changeStock",
        &[400, 401, 403, 404, 409, 413, 415, 422, 500, 503],
    ),
    ("updateSale", &[400, 401, 403, 404, 413, 415, 422, 500, 503]),
    ("listSales", &[400, 401, 422, 500, 503]),
    ("listAttempts", &[400, 401, 404, 422, 500, 503]),
    ("getAttemptFile", &[400, 401, 404, 500, 503]),
    (
        "refundAttempt",
        // 502: the payment provider refused the refund.
        &[400, 401, 403, 404, 409, 410, 413, 422, 500, 502, 503],
    ),
    ("getAdminSelf", &[401, 500, 503]),
    (
        "createAdminKey",
        &[400, 401, 403, 409, 413, 415, 422, 500, 503],
    ),
    ("listAdminKeys", &[401, 403, 500, 503]),
    ("revokeAdminKey", &[400, 401, 403, 404, 500, 503]),
    ("listAdminActions", &[400, 401, 422, 500, 503]),
    (
        "joinSale",
        &[400, 401, 403, 404, 409, 413, 428, 429, 500, 503],
    ),
    ("getAttempt", &[400, 401, 404, 410, 429, 500, 503]),
    ("streamAttempt", &[400, 401, 404, 410, 429, 500, 503]),
    ("leaveAttempt", &[400, 401, 404, 409, 410, 500, 503]),
    ("getWebPushKey", &[404, 500]),
    ("getPhases", &[400, 401, 404, 500, 503]),
    ("createLayout", &[400, 401, 403, 413, 415, 422, 500, 503]),
    ("listLayouts", &[400, 401, 500, 503]),
    ("getLayout", &[400, 401, 404, 500, 503]),
    ("getSeatMap", &[400, 404, 429, 500, 503]),
    ("getPublicLayout", &[400, 404, 429, 500, 503]),
    ("streamSeatMap", &[400, 404, 429, 500, 503]),
    ("setPhases", &[400, 401, 403, 404, 413, 415, 422, 500, 503]),
    (
        "addPhaseMembers",
        &[400, 401, 403, 404, 413, 415, 422, 500, 503],
    ),
    ("listPhaseMembers", &[400, 401, 404, 422, 500, 503]),
    (
        "generateAccessCodes",
        &[400, 401, 403, 404, 413, 415, 422, 500, 503],
    ),
    ("listAccessCodes", &[400, 401, 403, 404, 422, 500, 503]),
    (
        "subscribeWebPush",
        &[400, 401, 404, 409, 410, 413, 415, 422, 429, 500, 503],
    ),
    (
        "holdStock",
        &[400, 401, 403, 404, 409, 410, 413, 415, 422, 500, 503],
    ),
    ("releaseHold", &[400, 401, 404, 409, 410, 500, 503]),
    // 502: the payment provider refused to start the payment; 503: it is down.
    (
        "checkout",
        &[400, 401, 404, 409, 410, 413, 422, 500, 502, 503],
    ),
    ("getOffer", &[400, 401, 404, 429, 500, 503]),
    ("getPublicOffer", &[400, 404, 429, 500, 503]),
    (
        "receivePaymentWebhook",
        &[400, 401, 404, 413, 415, 422, 500, 503],
    ),
    // 401: a signature that does not verify (or a deposit callback whose secret is not its
    // payment's); 503: the provider could not be asked what the webhook names.
    (
        "receiveProviderWebhook",
        &[400, 401, 404, 413, 415, 422, 500, 503],
    ),
    // A return for an order sluice knows always goes back to the page (303); the errors are
    // those of one it does not know, or of a provider that is not toss.
    ("tossSuccess", &[400, 404, 422, 500, 503]),
    ("tossFail", &[400, 404, 500, 503]),
    // 410: the attempt expired (nothing is charged); 502: Toss refused to confirm.
    (
        "confirmTossPayment",
        &[400, 401, 404, 410, 413, 415, 422, 500, 502, 503],
    ),
    ("payInSandbox", &[400, 404, 413, 415, 422, 500, 503]),
    ("liveness", &[]),
    // Its 503 is its own plain-text answer: a store is down, or the process drains.
    ("readiness", &[503]),
    ("getJwks", &[]),
    ("createGate", &[400, 401, 403, 413, 415, 422, 500, 503]),
    ("listGates", &[401, 500, 503]),
    ("getGate", &[400, 401, 404, 500, 503]),
    ("updateGate", &[400, 401, 403, 404, 413, 415, 422, 500, 503]),
    ("deleteGate", &[400, 401, 403, 404, 500, 503]),
    // 422: not a visitor id.
    ("endGateSession", &[400, 401, 403, 404, 422, 500, 503]),
    ("getGateEntry", &[400, 404, 500]),
    // 403: the gate's challenge was not passed; 503: its provider did not answer.
    // 429: the per-IP limit of joins.
    ("enterGate", &[400, 403, 404, 413, 415, 422, 429, 500, 503]),
    // 403: no visitor cookie, or an admission that is not the visitor's; 410: it expired;
    // 422: a return_to the gate did not sign, or for a host it does not guard.
    (
        "tradeAdmission",
        &[400, 403, 404, 410, 413, 415, 422, 500, 503],
    ),
];

/// The form of each id and key parameter, as the handlers parse it ([`crate::domain::SaleId`],
/// [`crate::domain::AttemptId`], `service::IdempotencyKey`): a value of another form names
/// nothing (404) or is refused (422). The spec states the form so a client can check it first.
const PARAMETERS: &[ParameterForm] = &[
    ParameterForm {
        name: "sale_id",
        pattern: UUID,
        lengths: None,
    },
    ParameterForm {
        name: "reference",
        pattern: UUID,
        lengths: None,
    },
    ParameterForm {
        name: "attempt_id",
        pattern: "^[0-9a-fA-F]{64}$",
        lengths: Some((64, 64)),
    },
    ParameterForm {
        name: "gate_id",
        pattern: UUID,
        lengths: None,
    },
    ParameterForm {
        name: "visitor_id",
        pattern: "^[0-9a-f]{32}$",
        lengths: Some((32, 32)),
    },
    ParameterForm {
        name: "Idempotency-Key",
        pattern: "^[!-~]{1,255}$",
        lengths: Some((1, 255)),
    },
];

/// One parameter's form in the spec.
struct ParameterForm {
    name: &'static str,
    pattern: &'static str,
    /// `(minLength, maxLength)`, where the pattern alone does not say it plainly.
    lengths: Option<(u32, u32)>,
}
const UUID: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// The error statuses `operation` can answer; `None` for an operation the table lacks.
pub fn errors_of(operation: &str) -> Option<&'static [u16]> {
    ERRORS
        .iter()
        .find(|(id, _)| *id == operation)
        .map(|(_, errors)| *errors)
}

/// `document` (poem-openapi's spec) with each operation's 4xx and 5xx answers cut to those
/// [`ERRORS`] gives it, the form of its ids and keys (`PARAMETERS`), and an explicit empty
/// `security` on the operations that need no credentials. An operation missing from the table keeps all of its answers (a unit
/// test makes sure none is missing).
pub fn cut_errors(document: &str) -> String {
    let mut spec: Value = serde_json::from_str(document).expect("poem-openapi writes JSON");
    if let Some(paths) = spec["paths"].as_object_mut() {
        for op in paths.values_mut().filter_map(Value::as_object_mut) {
            for op in op.values_mut() {
                let Some(errors) = op["operationId"].as_str().and_then(errors_of) else {
                    continue;
                };
                // An operation without credentials says so (`security: []`), as generators
                // and linters expect, rather than leaving it unsaid.
                if op.get("security").is_none() {
                    op["security"] = Value::Array(Vec::new());
                }
                let parameters = op.get_mut("parameters").and_then(Value::as_array_mut);
                for parameter in parameters.into_iter().flatten() {
                    let name = parameter["name"].as_str().unwrap_or("");
                    if let Some(form) = PARAMETERS.iter().find(|p| p.name == name) {
                        let schema = &mut parameter["schema"];
                        schema["pattern"] = Value::from(form.pattern);
                        if let Some((min, max)) = form.lengths {
                            schema["minLength"] = Value::from(min);
                            schema["maxLength"] = Value::from(max);
                        }
                    }
                }
                if let Some(responses) = op["responses"].as_object_mut() {
                    responses.retain(|status, _| {
                        let code: u16 = status.parse().unwrap_or(0);
                        code < 400 || errors.contains(&code)
                    });
                }
            }
        }
    }
    let schemas = spec
        .get_mut("components")
        .and_then(|c| c.get_mut("schemas"))
        .and_then(Value::as_object_mut);
    for schema in schemas.into_iter().flat_map(|s| s.values_mut()) {
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.values_mut().for_each(plain_ref);
        }
    }
    serde_json::to_string_pretty(&spec).expect("a JSON value serialises")
}

/// A property poem-openapi writes as `allOf: [$ref, {default}]` (an enum field with a default)
/// becomes the plain `$ref`: generators such as openapi-python-client cannot read the `allOf`
/// form and drop the whole schema. The default is the enum's own documented one.
fn plain_ref(property: &mut Value) {
    let Some([reference, rest]) = property["allOf"].as_array().map(Vec::as_slice) else {
        return;
    };
    let only_annotations = rest
        .as_object()
        .is_some_and(|o| o.keys().all(|k| k == "default" || k == "description"));
    if reference.get("$ref").is_some() && only_annotations {
        *property = serde_json::json!({ "$ref": reference["$ref"] });
    }
}

/// The methods each path answers, as `(segments, methods)`: a segment `Err(name)` is the
/// parameter `{name}`.
pub type MethodsByPath = Vec<PathMethods>;
/// One path of [`MethodsByPath`].
pub type PathMethods = (Vec<Result<String, String>>, Vec<String>);

/// The methods each path of `document` answers.
pub fn methods_by_path(document: &str) -> MethodsByPath {
    let spec: Value = serde_json::from_str(document).expect("a JSON spec");
    let mut paths = Vec::new();
    for (path, ops) in spec["paths"].as_object().into_iter().flatten() {
        let segments = path
            .split('/')
            .map(
                |s| match s.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(parameter) => Err(parameter.to_owned()),
                    None => Ok(s.to_owned()),
                },
            )
            .collect();
        let mut methods: Vec<String> = ops
            .as_object()
            .into_iter()
            .flatten()
            .map(|(m, _)| m.to_uppercase())
            .collect();
        if methods.iter().any(|m| m == "GET") {
            methods.push("HEAD".into());
        }
        methods.sort();
        paths.push((segments, methods));
    }
    paths
}

/// The path's entry: its segments and methods; `None` for a path none answers.
fn path_entry<'a>(paths: &'a MethodsByPath, path: &str) -> Option<&'a PathMethods> {
    let asked: Vec<&str> = path.split('/').collect();
    paths.iter().find(|(segments, _)| {
        segments.len() == asked.len()
            && segments
                .iter()
                .zip(&asked)
                .all(|(s, a)| s.as_ref().map_or(true, |s| s == a))
    })
}

/// The methods `path` answers, joined for an `Allow` header; `None` for a path none answers.
pub fn allowed_methods(paths: &MethodsByPath, path: &str) -> Option<String> {
    path_entry(paths, path).map(|(_, methods)| methods.join(", "))
}

/// The name of `path`'s `index`-th parameter (poem-openapi calls them `param0`, `param1`, …
/// in its parse errors).
pub fn parameter_name<'a>(paths: &'a MethodsByPath, path: &str, index: usize) -> Option<&'a str> {
    let (segments, _) = path_entry(paths, path)?;
    segments
        .iter()
        .filter_map(|s| s.as_ref().err())
        .nth(index)
        .map(String::as_str)
}

/// The instant the examples of the spec show.
pub(crate) fn example_time() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(1_785_000_000, 0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r##"{"paths": {
        "/v1/sales/{sale_id}": {"get": {"operationId": "getSale", "responses": {
            "200": {}, "401": {}, "404": {}, "428": {}, "500": {}, "503": {}}}},
        "/v1/sales/{sale_id}/attempts": {"post": {"operationId": "joinSale", "responses": {
            "202": {}, "400": {}, "428": {}}}},
        "/health/live": {"get": {"operationId": "liveness", "responses": {"200": {}}}}
    }, "components": {"schemas": {"CreateSale": {"properties": {
        "opening": {"allOf": [{"$ref": "#/components/schemas/OpeningName"}, {"default": "fifo"}],
                    "default": "fifo"},
        "name": {"type": "string"}
    }}}}}"##;

    #[test]
    fn each_operation_keeps_only_its_errors() {
        let cut: Value = serde_json::from_str(&cut_errors(SPEC)).unwrap();
        let statuses = |path: &str, method: &str| -> Vec<String> {
            cut["paths"][path][method]["responses"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(
            statuses("/v1/sales/{sale_id}", "get"),
            ["200", "401", "404", "500", "503"]
        );
        assert_eq!(
            statuses("/v1/sales/{sale_id}/attempts", "post"),
            ["202", "400", "428"]
        );
        assert_eq!(statuses("/health/live", "get"), ["200"]);
        assert_eq!(
            cut["paths"]["/health/live"]["get"]["security"],
            serde_json::json!([])
        );
        let properties = &cut["components"]["schemas"]["CreateSale"]["properties"];
        assert_eq!(
            properties["opening"],
            serde_json::json!({ "$ref": "#/components/schemas/OpeningName" })
        );
        assert_eq!(properties["name"], serde_json::json!({ "type": "string" }));
    }

    #[test]
    fn a_path_answers_its_methods() {
        let paths = methods_by_path(SPEC);
        assert_eq!(
            allowed_methods(&paths, "/v1/sales/abc").as_deref(),
            Some("GET, HEAD")
        );
        assert_eq!(
            allowed_methods(&paths, "/v1/sales/abc/attempts").as_deref(),
            Some("POST")
        );
        assert_eq!(allowed_methods(&paths, "/v1/nothing/here"), None);
    }
}
