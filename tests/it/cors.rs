//! CORS for a shop's pages on other origins: preflights answered for the listed origins only,
//! the headers a client reads exposed, errors readable too; none without configuration.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{Backend, TestApp};

const SHOP: &str = "https://shop.example";

crate::on_both_configurations!(a_listed_origin_is_answered_and_others_are_not);

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_ascii_lowercase())
}

async fn preflight(t: &TestApp, origin: &str, path: &str, method: &str) -> reqwest::Response {
    t.http
        .request(Method::OPTIONS, t.url(path))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", method)
        .header(
            "Access-Control-Request-Headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap()
}

async fn a_listed_origin_is_answered_and_others_are_not(backend: Backend) {
    let t = TestApp::spawn_on_with(backend, |c| {
        c.http.cors_allowed_origins = vec![SHOP.into(), "http://127.0.0.1:3000".into()];
    })
    .await;
    let sale = t.create_sale(json!({})).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let join = format!("/v1/sales/{sale}/attempts");

    let ok = preflight(&t, SHOP, &join, "POST").await;
    assert!(ok.status().is_success(), "{}", ok.status());
    assert_eq!(
        header(&ok, "access-control-allow-origin").as_deref(),
        Some(SHOP)
    );
    let methods = header(&ok, "access-control-allow-methods").unwrap();
    for method in ["get", "post", "put", "delete"] {
        assert!(methods.contains(method), "{methods}");
    }
    let headers = header(&ok, "access-control-allow-headers").unwrap();
    assert!(
        headers.contains("authorization") && headers.contains("idempotency-key"),
        "{headers}"
    );
    assert!(header(&ok, "access-control-max-age").is_some());
    assert!(
        header(&ok, "access-control-allow-credentials").is_none(),
        "not asked for"
    );

    let joined = t
        .as_user(Method::POST, &join, "alice")
        .header("Origin", SHOP)
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), 202);
    assert_eq!(
        header(&joined, "access-control-allow-origin").as_deref(),
        Some(SHOP)
    );
    let exposed = header(&joined, "access-control-expose-headers").unwrap();
    for name in ["retry-after", "location", "etag"] {
        assert!(exposed.contains(name), "{name} is exposed: {exposed}");
    }
    // A problem answer is readable by the page too.
    let missing = t
        .as_user(
            Method::GET,
            &format!("/v1/attempts/{}", uuid::Uuid::now_v7()),
            "alice",
        )
        .header("Origin", SHOP)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        header(&missing, "access-control-allow-origin").as_deref(),
        Some(SHOP)
    );

    // Another origin: no grant, and the request itself is served as a plain one.
    let refused = preflight(&t, "https://evil.example", &join, "POST").await;
    assert!(header(&refused, "access-control-allow-origin").is_none());
    let plain = t
        .http
        .get(t.url("/health/live"))
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    assert!(header(&plain, "access-control-allow-origin").is_none());
    t.stop().await;
}

/// Without configuration no origin is granted anything: the default is closed.
#[tokio::test]
async fn no_origin_is_allowed_by_default() {
    let t = TestApp::spawn_on(Backend::Embedded).await;
    let resp = preflight(&t, SHOP, "/v1/sales/x/attempts", "POST").await;
    assert!(header(&resp, "access-control-allow-origin").is_none());
    let live = t
        .http
        .get(t.url("/health/live"))
        .header("Origin", SHOP)
        .send()
        .await
        .unwrap();
    assert!(header(&live, "access-control-allow-origin").is_none());
    t.stop().await;
}
