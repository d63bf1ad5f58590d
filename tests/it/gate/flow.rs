//! A visitor's way through the gate, through nginx and through Caddy: sent to the line with
//! its page's address, files passing while it waits, its API calls refused with the gate's
//! problem, one place per browser, back to its own page with the query intact, and sent to
//! the line again once the origin ends its session.

use reqwest::Method;
use serde_json::json;

use super::{end_session, gate, port_of, Origin, Proxy, Visitor};
use crate::helpers::{Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(a_visitor_waits_and_comes_back_to_its_own_page_through_nginx_and_caddy);

async fn a_visitor_waits_and_comes_back_to_its_own_page_through_nginx_and_caddy(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let origin = Origin::start().await;
    let g = gate(&t, 10, json!({})).await;
    let gate_id = g["id"].as_str().unwrap();
    for proxy in [
        Proxy::nginx(port_of(&t), origin.port).await,
        Proxy::caddy(port_of(&t), origin.port).await,
    ] {
        let name = proxy.name;
        let page = "/shop/item?size=42&colour=blue%20green";
        let mut v = Visitor::default();
        let before = origin.count();

        let sent = v.page(&proxy.url(page)).await;
        assert_eq!(sent.status, 302, "{name}: {}", sent.body);
        let waiting = sent.header("location").unwrap().to_owned();
        assert!(
            waiting.starts_with(&proxy.url(&format!("/.sluice/?gate={gate_id}&return_to="))),
            "{name}: the waiting page on the site's own host: {waiting}"
        );
        assert_eq!(
            origin.answered(before, "/shop/item"),
            0,
            "{name}: the page was not let through"
        );

        // Files pass while the visitor waits; an API call gets the gate's problem.
        let css = v
            .send(
                Method::GET,
                &proxy.url("/shop/app.css"),
                "text/css",
                None,
                None,
            )
            .await;
        assert_eq!(css.status, 200, "{name}: a static file passes");
        let xhr = v.xhr(&proxy.url("/shop/api/cart")).await;
        assert_eq!(xhr.status, 429, "{name}: {}", xhr.body);
        assert_eq!(
            xhr.header("content-type"),
            Some("application/problem+json"),
            "{name}"
        );
        assert!(xhr.header("retry-after").is_some(), "{name}: Retry-After");
        let problem = xhr.json();
        assert_eq!(problem["type"], "/problems/waiting-room", "{name}");
        assert!(
            problem["waiting_room"]
                .as_str()
                .unwrap()
                .starts_with(&proxy.url("/.sluice/?gate=")),
            "{name}"
        );
        assert_eq!(
            origin.answered(before, "/shop/api/"),
            0,
            "{name}: the API call was not let through"
        );

        // One place per browser: the second tab is the same visitor, in the same place.
        let (gate_param, return_to) = super::waiting_page_params(&waiting);
        assert_eq!(gate_param, gate_id);
        let (token, sale) = v.enter(&proxy, gate_id).await;
        let cookie = v
            .cookies
            .get("sluice_visitor")
            .cloned()
            .expect("a visitor cookie");
        let attempt = v.join(&proxy, &sale, &token).await;
        let tab = v
            .send(
                Method::POST,
                &proxy.url(&format!("/.sluice/v1/gates/{gate_id}/visitors")),
                "application/json",
                Some(json!({})),
                None,
            )
            .await;
        assert!(
            tab.header("set-cookie").is_none(),
            "{name}: the browser's cookie is kept"
        );
        let tab_token = tab.json()["token"].as_str().unwrap().to_owned();
        assert_eq!(
            v.join(&proxy, &sale, &tab_token).await,
            attempt,
            "{name}: the same place"
        );
        assert_eq!(v.cookies["sluice_visitor"], cookie);

        // Admitted: the admission becomes the site's session, back to the page asked for.
        let admission = v.admitted(&proxy, &attempt, &token).await;
        let traded = v
            .trade(&proxy, gate_id, &attempt, &admission, &return_to)
            .await;
        assert_eq!(traded.status, 200, "{name}: {}", traded.body);
        let set = traded.header("set-cookie").unwrap().to_owned();
        for part in ["sluice_session=", "HttpOnly", "SameSite=Lax", "Path=/"] {
            assert!(set.contains(part), "{name}: {set}");
        }
        let location = traded.json()["location"].as_str().unwrap().to_owned();
        assert_eq!(
            location,
            proxy.url(page),
            "{name}: its own page, the query intact"
        );
        let back = v.page(&location).await;
        assert_eq!(back.status, 200, "{name}: {}", back.body);
        let seen = origin.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(seen.uri, page, "{name}");
        assert_eq!(
            seen.visitor.len(),
            32,
            "{name}: the origin learns the visitor: {seen:?}"
        );
        let api = v.xhr(&proxy.url("/shop/api/cart")).await;
        assert_eq!(
            api.status, 200,
            "{name}: an admitted visitor's API call passes"
        );

        // The origin ends the session: the visitor is sent to the line again.
        assert_eq!(end_session(&t, gate_id, &seen.visitor).await, 204, "{name}");
        let again = v.page(&proxy.url(page)).await;
        assert_eq!(again.status, 302, "{name}: sent to the line again");
        assert!(
            again
                .header("location")
                .unwrap()
                .contains("/.sluice/?gate="),
            "{name}"
        );
        assert_eq!(
            end_session(&t, gate_id, &seen.visitor).await,
            404,
            "{name}: no session now"
        );
    }
    t.stop().await;
}

/// The check reads Traefik's `X-Forwarded-*` and Envoy's `ext_authz` HTTP form (the original
/// path after `path_prefix`, the original method), as the configs of `deploy/proxies` send
/// them; those configs parse.
#[tokio::test]
async fn the_check_reads_traefiks_and_envoys_forms() {
    let t = TestApp::spawn_on(Backend::Embedded).await;
    let g = gate(&t, 10, json!({})).await;
    let http = Visitor::default().http; // redirects not followed
    let check = |method: Method, path: &str| http.request(method, t.url(path));
    let traefik = check(Method::GET, "/v1/gate/check")
        .header("X-Forwarded-Method", "GET")
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", "127.0.0.1")
        .header("X-Forwarded-Uri", "/shop/x?y=1")
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(traefik.status(), 302);
    let location = traefik.headers()["location"].to_str().unwrap();
    let prefix = format!(
        "https://127.0.0.1/.sluice/?gate={}&return_to=",
        g["id"].as_str().unwrap()
    );
    assert!(location.starts_with(&prefix), "{location}");
    let traefik_file = http
        .post(t.url("/v1/gate/check"))
        .header("X-Forwarded-Method", "POST")
        .header("X-Forwarded-Host", "127.0.0.1")
        .header("X-Forwarded-Uri", "/shop/api/cart")
        .send()
        .await
        .unwrap();
    assert_eq!(traefik_file.status(), 429, "an API call of Traefik's form");

    let envoy_api = check(Method::POST, "/v1/gate/check/shop/api/cart?x=1")
        .header("X-Forwarded-Host", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        envoy_api.status(),
        429,
        "Envoy's form: the original method and path"
    );
    let body: serde_json::Value = envoy_api.json().await.unwrap();
    assert_eq!(body["type"], "/problems/waiting-room");
    let envoy_page = check(Method::GET, "/v1/gate/check/shop/item?x=1")
        .header("X-Forwarded-Host", "127.0.0.1")
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(envoy_page.status(), 302);
    let envoy_file = check(Method::GET, "/v1/gate/check/shop/app.css")
        .header("X-Forwarded-Host", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        envoy_file.status(),
        200,
        "a static file passes in Envoy's form"
    );
    let elsewhere = check(Method::GET, "/v1/gate/check/about")
        .header("X-Forwarded-Host", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 200, "a path the gate does not guard");

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/proxies");
    for file in ["traefik/sluice-gate.yml", "envoy/sluice-gate.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let parsed: serde_yaml::Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains("/v1/gate/check"), "{file} asks the check");
        assert!(parsed.is_mapping());
    }
    t.stop().await;
}

on_both_configurations!(a_session_is_renewed_through_nginx_and_caddy_at_most_once_a_minute);

/// A session whose last renewal was over a minute ago: a page request goes through sluice's
/// renewal and straight back (a new cookie whose end moved on), through nginx and Caddy; the
/// requests after it renew nothing (one store write a minute at most); an API call never
/// renews. The old renewal time is the test's own signature of the session (`super::signed`).
async fn a_session_is_renewed_through_nginx_and_caddy_at_most_once_a_minute(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let seed = super::seed_of(&t);
    let origin = Origin::start().await;
    let g = gate(&t, 10, json!({})).await;
    let gate_id = g["id"].as_str().unwrap();
    for proxy in [
        Proxy::nginx(port_of(&t), origin.port).await,
        Proxy::caddy(port_of(&t), origin.port).await,
    ] {
        let name = proxy.name;
        let mut v = Visitor::default();
        let page = "/shop/long-visit?step=3";
        let (_, back) = v.through(&proxy, page).await;
        assert_eq!(back.status, 200, "{name}");
        let real = v.cookies["sluice_session"].clone();
        let f: Vec<&str> = real.split('.').collect();
        let now = chrono::Utc::now().timestamp();
        let (visitor, attempt, ends) = (f[0], f[1], f[2].parse::<i64>().unwrap());
        let stale = super::signed(
            &seed,
            "session",
            gate_id,
            &format!("{visitor}.{attempt}.{ends}.{}", now - 90),
        );
        v.cookies.insert("sluice_session".into(), stale);

        let api = v.xhr(&proxy.url("/shop/api/cart")).await;
        assert_eq!(
            api.status, 200,
            "{name}: an API call passes and renews nothing"
        );
        let due = v.page(&proxy.url(page)).await;
        assert_eq!(
            due.status, 302,
            "{name}: a page request goes through the renewal"
        );
        let renew = due.header("location").unwrap().to_owned();
        assert!(
            renew.starts_with(&proxy.url(&format!(
                "/.sluice/v1/gates/{gate_id}/session/renew?return_to="
            ))),
            "{name}: {renew}"
        );
        let renewed = v.page(&renew).await;
        assert_eq!(renewed.status, 302, "{name}: {}", renewed.body);
        assert_eq!(
            renewed.header("location"),
            Some(proxy.url(page).as_str()),
            "{name}: straight back"
        );
        let fresh = v.cookies["sluice_session"].clone();
        let g2: Vec<&str> = fresh.split('.').collect();
        assert_eq!(
            (g2[0], g2[1]),
            (visitor, attempt),
            "{name}: the same session"
        );
        assert!(g2[3].parse::<i64>().unwrap() >= now, "{name}: renewed now");
        assert!(
            g2[2].parse::<i64>().unwrap() >= ends,
            "{name}: its end moved on"
        );
        for _ in 0..3 {
            let again = v.page(&proxy.url(page)).await;
            assert_eq!(
                again.status, 200,
                "{name}: no renewal again within the minute"
            );
        }
    }
    let metrics = t.metrics().await;
    let renewed: f64 = metrics
        .lines()
        .find(|l| l.starts_with("sluice_gate_sessions_total{event=\"renewed\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap();
    assert_eq!(renewed, 2.0, "one renewal per visitor");
    t.stop().await;
}

/// Each rule lets its requests through the check, as a proxy asks it (Caddy's headers): the
/// shop's monitor with its secret header, a crawler, an allow-listed address, `HEAD`; a wrong
/// secret does not. The operator's switches: `queue_all` stops every rule (only sessions
/// pass), `off` lets everything through; every change is in the audit log.
#[tokio::test]
async fn each_rule_and_switch_acts_on_the_check() {
    let t = TestApp::spawn_on(Backend::Embedded).await;
    let g = gate(
        &t,
        10,
        json!({
            "crawlers": ["Googlebot"],
            "allow_cidrs": ["10.9.0.0/16"],
            "secret_header_name": "X-Shop-Monitor",
            "secret_header_value": "monitor-secret-of-the-shop",
        }),
    )
    .await;
    assert!(
        !g.to_string().contains("monitor-secret-of-the-shop"),
        "the value is never answered"
    );
    let http = Visitor::default().http;
    let ask = |method: &str, extra: &[(&str, &str)]| {
        let mut req = http
            .get(t.url("/v1/gate/check"))
            .header("X-Forwarded-Method", method)
            .header("X-Forwarded-Host", "127.0.0.1")
            .header("X-Forwarded-Uri", "/shop/item")
            .header("X-Forwarded-For", "203.0.113.7")
            .header("Accept", "text/html");
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let monitor = ("X-Shop-Monitor", "monitor-secret-of-the-shop");
    let crawler = ("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1)");
    let cases: [(&str, &[(&str, &str)], u16, &str); 7] = [
        ("GET", &[], 302, "a visitor without a session"),
        ("GET", &[monitor], 200, "the monitor"),
        (
            "GET",
            &[("X-Shop-Monitor", "a guess")],
            302,
            "a wrong secret",
        ),
        ("GET", &[crawler], 200, "a crawler"),
        (
            "GET",
            &[("X-Forwarded-For", "198.51.100.1, 10.9.3.4")],
            200,
            "an allow-listed address, as the proxy saw it",
        ),
        (
            "GET",
            &[("X-Forwarded-For", "10.9.3.4, 198.51.100.1")],
            302,
            "not the client's own word for its address",
        ),
        ("HEAD", &[], 200, "HEAD"),
    ];
    for (method, extra, status, why) in cases {
        assert_eq!(ask(method, extra).await, status, "{why}");
    }

    let id = g["id"].as_str().unwrap();
    let mut body = g.clone();
    body.as_object_mut().unwrap().remove("id");
    body["mode"] = json!("queue_all");
    let put = t
        .admin(Method::PUT, &format!("/v1/gates/{id}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200, "{}", put.text().await.unwrap());
    assert_eq!(
        ask("GET", &[monitor]).await,
        302,
        "queue_all: not even the monitor"
    );
    assert_eq!(ask("HEAD", &[]).await, 302, "queue_all: not HEAD");
    body["mode"] = json!("off");
    let put = t
        .admin(Method::PUT, &format!("/v1/gates/{id}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    assert_eq!(ask("GET", &[]).await, 200, "off: everything passes");
    let kept = t.admin_json(Method::GET, &format!("/v1/gates/{id}")).await;
    assert_eq!(
        kept["secret_header_name"], "X-Shop-Monitor",
        "the header kept across changes"
    );
    body["mode"] = json!("on");
    t.admin(Method::PUT, &format!("/v1/gates/{id}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(ask("GET", &[monitor]).await, 200, "the value kept too");

    let log = t.admin_json(Method::GET, "/v1/admin/actions").await;
    let actions: Vec<&str> = log["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["target"].as_str().is_some_and(|t| t.starts_with("gate:")))
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "updateGate").count(),
        3,
        "{actions:?}"
    );
    assert!(actions.contains(&"createGate"), "{actions:?}");
    assert!(
        !log.to_string().contains("monitor-secret-of-the-shop"),
        "nor in the audit log"
    );
    t.stop().await;
}

/// A session left idle past its length ends: its cookie no longer passes, and its place goes
/// to the next visitor in line (a gate of one place, sessions of one minute).
#[tokio::test]
async fn a_session_idle_past_its_length_frees_its_place() {
    let t = TestApp::spawn().await;
    let origin = Origin::start().await;
    let g = gate(&t, 1, json!({ "session_minutes": 1 })).await;
    let gate_id = g["id"].as_str().unwrap();
    let proxy = Proxy::nginx(port_of(&t), origin.port).await;
    let mut first = Visitor::default();
    let (_, back) = first.through(&proxy, "/shop/first").await;
    assert_eq!(back.status, 200);
    // The next visitor waits: the one place is taken.
    let mut next = Visitor::default();
    let sent = next.page(&proxy.url("/shop/next")).await;
    let (_, return_to) = super::waiting_page_params(sent.header("location").unwrap());
    let (token, sale) = next.enter(&proxy, gate_id).await;
    let attempt = next.join(&proxy, &sale, &token).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let waiting = next.status(&proxy, &attempt, &token).await;
    assert_eq!(waiting["state"], "QUEUED", "the place is taken");
    // Past the minute, with no request from the first visitor: its session has ended.
    let admission = next.admitted(&proxy, &attempt, &token).await;
    assert_eq!(
        first.page(&proxy.url("/shop/first")).await.status,
        302,
        "the idle session ended"
    );
    let traded = next
        .trade(&proxy, gate_id, &attempt, &admission, &return_to)
        .await;
    assert_eq!(traded.status, 200, "{}", traded.body);
    assert_eq!(
        next.page(&proxy.url("/shop/next")).await.status,
        200,
        "the next visitor is in"
    );
    t.stop().await;
}

/// A gate makes a line of its own (`line` instead of `sale_id`): a sale named after it with
/// the rate and cap asked, never priced, even where a payment provider charges every hold
/// (Stripe here). Exactly one of `sale_id` and `line`; the line never changes.
#[tokio::test]
async fn a_gate_makes_a_line_of_its_own() {
    let stripe = crate::stripe::LocalStripe::start().await;
    let t = TestApp::spawn_with(|c| crate::stripe::on_stripe(c, &stripe)).await;
    let body = json!({ "name": "Friday drop", "hosts": ["shop.example"],
                       "line": { "rate_per_minute": 1200, "max_active": 300 } });
    let made = t
        .admin(Method::POST, "/v1/gates")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201, "{}", made.text().await.unwrap());
    let g: serde_json::Value = made.json().await.unwrap();
    let sale = t
        .admin_json(
            Method::GET,
            &format!("/v1/sales/{}", g["sale_id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(sale["name"], "Friday drop");
    assert_eq!(sale["rate_per_minute"], 1200);
    assert_eq!(sale["max_active"], 300);
    let unpriced = t
        .admin(Method::POST, "/v1/sales")
        .json(&json!({ "name": "plain", "quantity": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        unpriced.status(),
        422,
        "an ordinary sale needs a price under Stripe"
    );
    let both = json!({ "name": "x", "hosts": ["a.example"], "sale_id": g["sale_id"],
                       "line": { "max_active": 1 } });
    let neither = json!({ "name": "x", "hosts": ["a.example"] });
    for wrong in [both, neither] {
        let resp = t
            .admin(Method::POST, "/v1/gates")
            .json(&wrong)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 422, "{wrong}");
    }
    let refused = json!({ "name": "x", "hosts": ["bad host"], "line": {} });
    let before = t.admin_json(Method::GET, "/v1/sales").await["sales"]
        .as_array()
        .unwrap()
        .len();
    let resp = t
        .admin(Method::POST, "/v1/gates")
        .json(&refused)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422, "a bad gate");
    let after = t.admin_json(Method::GET, "/v1/sales").await["sales"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after, "a gate refused makes no sale");
    let id = g["id"].as_str().unwrap();
    let change = json!({ "name": "Friday drop", "hosts": ["shop.example"], "line": {} });
    let resp = t
        .admin(Method::PUT, &format!("/v1/gates/{id}"))
        .json(&change)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422, "the line cannot change");
    t.stop().await;
}
