//! A visitor in headless Chromium through nginx and through Caddy (`tests/browser/gate.mjs`):
//! the guarded page with its query, the waiting page in English and in Korean (screenshots),
//! the site's files loading and its API answering 429 meanwhile, back to the page once
//! admitted, and to the line again once the origin ends the session.

use serde_json::json;

use super::{gate, port_of, Origin, Proxy};
use crate::ecosystem::browser::run_script;
use crate::helpers::{Backend, TestApp};
use crate::on_both_configurations;

on_both_configurations!(a_visitor_in_chromium_waits_in_front_of_a_site_and_comes_back);

async fn a_visitor_in_chromium_waits_in_front_of_a_site_and_comes_back(backend: Backend) {
    let t = TestApp::spawn_on(backend).await;
    let origin = Origin::start().await;
    let g = gate(&t, 10, json!({})).await;
    let shots = std::env::temp_dir().join(format!(
        "sluice-gate-shots-{}",
        uuid::Uuid::new_v4().simple()
    ));
    for proxy in [
        Proxy::nginx(port_of(&t), origin.port).await,
        Proxy::caddy(port_of(&t), origin.port).await,
    ] {
        let env = vec![
            ("SITE_URL", proxy.url("")),
            ("GATE_ID", g["id"].as_str().unwrap().to_owned()),
            ("SALE_ID", g["sale_id"].as_str().unwrap().to_owned()),
            ("PROXY", proxy.name.to_owned()),
            ("SHOTS", shots.display().to_string()),
        ];
        run_script(&t, "gate.mjs", env).await;
        for lang in ["en", "ko"] {
            let path = shots.join(format!("gate-{lang}-{}.png", proxy.name));
            let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("no screenshot {path:?}"));
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{path:?} is a PNG");
        }
    }
    println!("screenshots in {}", shots.display());
    t.stop().await;
}
