//! Nothing gets in without a real session of this gate: not a forged, expired, revoked or
//! other gate's cookie, not another visitor's admission, and no `return_to` naming another
//! host. The values a test forges with a valid signature it signs itself ([`super::signed`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::json;

use super::{end_session, gate, port_of, signed, waiting_page_params, Origin, Proxy, Visitor};
use crate::helpers::{Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(nothing_passes_without_a_real_session_of_the_gate);

/// What a page request with `cookie` as its session gets.
async fn refused(proxy: &Proxy, cookie: String) -> u16 {
    let mut x = Visitor::default();
    x.cookies.insert("sluice_session".into(), cookie);
    x.page(&proxy.url("/shop/private")).await.status
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

async fn nothing_passes_without_a_real_session_of_the_gate(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let seed = super::seed_of(&t);
    let origin = Origin::start().await;
    let a = gate(&t, 10, json!({})).await;
    let b = gate(&t, 10, json!({ "paths": ["/other/"] })).await;
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let proxy = Proxy::nginx(port_of(&t), origin.port).await;
    let page = proxy.url("/shop/private");

    // A real session of gate A, and one of gate B.
    let mut v = Visitor::default();
    let sent = v.page(&page).await;
    let waiting = sent.header("location").unwrap().to_owned();
    let (_, back) = v.wait_and_return(&proxy, &waiting).await;
    assert_eq!(back.status, 200, "the real session passes");
    let real = v.cookies["sluice_session"].clone();
    let mut w = Visitor::default();
    let (_, other) = w.through(&proxy, "/other/page").await;
    assert_eq!(other.status, 200);
    let other_gates = w.cookies["sluice_session"].clone();

    let fields: Vec<&str> = real.split('.').collect();
    let (visitor, attempt) = (fields[0], fields[1]);
    let before = origin.count();
    let forged_end = format!(
        "{visitor}.{attempt}.{}.{}.{}",
        now() + 3600,
        fields[3],
        fields[4]
    );
    assert_eq!(refused(&proxy, forged_end).await, 302, "an altered end");
    let unsigned = format!("{visitor}.{attempt}.{}.{}.AAAA", now() + 3600, now());
    assert_eq!(refused(&proxy, unsigned).await, 302, "a made-up signature");
    let expired = signed(
        &seed,
        "session",
        a_id,
        &format!("{visitor}.{attempt}.{}.{}", now() - 1, now() - 600),
    );
    assert_eq!(refused(&proxy, expired).await, 302, "an expired session");
    let fresh = signed(
        &seed,
        "session",
        a_id,
        &format!("{visitor}.{attempt}.{}.{}", now() + 300, now()),
    );
    assert_eq!(
        refused(&proxy, fresh.clone()).await,
        200,
        "the same, signed right and not expired"
    );
    assert_eq!(
        refused(&proxy, other_gates).await,
        302,
        "another gate's session"
    );
    let as_b = signed(
        &seed,
        "session",
        b_id,
        &format!("{visitor}.{attempt}.{}.{}", now() + 300, now()),
    );
    assert_eq!(refused(&proxy, as_b).await, 302, "signed for another gate");
    let visitor_cookie = v.cookies["sluice_visitor"].clone();
    assert_eq!(
        refused(&proxy, visitor_cookie).await,
        302,
        "a visitor cookie is no session"
    );

    // Ended by the origin: neither the cookie it had nor one signed afresh passes.
    assert_eq!(end_session(&t, a_id, visitor).await, 204);
    assert_eq!(refused(&proxy, real).await, 302, "a revoked session");
    assert_eq!(
        refused(&proxy, fresh).await,
        302,
        "a revoked session's attempt, signed afresh"
    );
    assert_eq!(
        origin.answered(before, "/shop/private"),
        1,
        "only the good signature passed"
    );

    // Another visitor's admission is not traded for a session.
    let mut owner = Visitor::default();
    let sent = owner.page(&page).await;
    let (gate_id, return_to) = waiting_page_params(sent.header("location").unwrap());
    let (token, sale) = owner.enter(&proxy, &gate_id).await;
    let attempt = owner.join(&proxy, &sale, &token).await;
    let admission = owner.admitted(&proxy, &attempt, &token).await;
    let mut thief = Visitor::default();
    thief.enter(&proxy, &gate_id).await;
    let stolen = thief
        .trade(&proxy, &gate_id, &attempt, &admission, &return_to)
        .await;
    assert_eq!(stolen.status, 403, "{}", stolen.body);
    assert!(stolen.header("set-cookie").is_none());
    assert_eq!(thief.page(&page).await.status, 302);

    // A visitor's token joins its gate's line only: not another gate's, not a sale of its own.
    let (token, _) = thief.enter(&proxy, &gate_id).await;
    let b_sale = b["sale_id"].as_str().unwrap();
    let plain = t.create_sale(json!({ "quantity": 5 })).await;
    for sale in [b_sale, plain.as_str()] {
        let joined = thief
            .send(
                reqwest::Method::POST,
                &proxy.url(&format!("/.sluice/v1/sales/{sale}/attempts")),
                "application/json",
                None,
                Some(&token),
            )
            .await;
        assert_eq!(joined.status, 403, "{sale}: {}", joined.body);
    }

    // A way back to another host, however it came, is refused.
    let evil = format!("https\nevil.example\n/shop/private");
    let evil = signed(
        &seed,
        "return_to",
        a_id,
        &format!("{}.{}", now() + 300, URL_SAFE_NO_PAD.encode(evil)),
    );
    let to_evil = owner
        .trade(&proxy, &gate_id, &attempt, &admission, &evil)
        .await;
    assert_eq!(to_evil.status, 422, "{}", to_evil.body);
    assert_eq!(to_evil.json()["field"], "return_to");
    let tampered = return_to.replacen('.', ".x", 1);
    let bad = owner
        .trade(&proxy, &gate_id, &attempt, &admission, &tampered)
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(
        owner.cookies.get("sluice_session").is_none(),
        "no session was given"
    );
    // Asked of sluice directly for another host, the check names no way back there.
    let direct = t
        .http
        .get(format!("{}/v1/gate/check", t.base))
        .header("X-Forwarded-Host", "evil.example")
        .header("X-Forwarded-Uri", "/shop/private")
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(
        direct.status(),
        200,
        "not a host of the gate: not guarded, nothing signed"
    );
    assert!(direct.headers().get("location").is_none());

    // The real owner still trades it and passes.
    let own = owner
        .trade(&proxy, &gate_id, &attempt, &admission, &return_to)
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    t.stop().await;
}

/// Two replicas behind one proxy's two upstreams: a session traded on one passes the other's
/// check (a shared key, no store call), a gate made on one is guarded by the other within its
/// refresh, and a session ended on one is refused by the other within its refresh.
#[tokio::test]
async fn every_replica_checks_what_another_made_and_ended() {
    let a = TestApp::spawn_with(|c| c.gate.refresh_ms = sluice::config::Millis(200)).await;
    let b = TestApp::spawn_config((*a.app.config).clone()).await;
    let origin = Origin::start().await;
    let g = gate(&a, 10, json!({})).await;
    let id = g["id"].as_str().unwrap();
    let via_a = Proxy::nginx(port_of(&a), origin.port).await;
    let via_b = Proxy::nginx(port_of(&b), origin.port).await;
    let page = "/shop/replicated";
    // B learns of the gate A made.
    let mut guarded = false;
    for _ in 0..50 {
        if Visitor::default().page(&via_b.url(page)).await.status == 302 {
            guarded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(guarded, "B guards the gate A made");
    let mut v = Visitor::default();
    let (_, back) = v.through(&via_a, page).await;
    assert_eq!(back.status, 200);
    let session = v.cookies["sluice_session"].clone();
    let mut on_b = Visitor::default();
    on_b.cookies
        .insert("sluice_session".into(), session.clone());
    assert_eq!(
        on_b.page(&via_b.url(page)).await.status,
        200,
        "A's session passes B"
    );
    let visitor = session.split('.').next().unwrap();
    assert_eq!(end_session(&a, id, visitor).await, 204);
    let mut refused = false;
    for _ in 0..50 {
        if on_b.page(&via_b.url(page)).await.status == 302 {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(refused, "B refuses the session A ended");
    b.stop().await;
    a.stop().await;
}
