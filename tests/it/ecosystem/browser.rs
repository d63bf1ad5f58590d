//! The waiting-room page in headless Chromium (Debian's, driven by playwright-core from
//! `tests/browser`): the script asserts each step's text, focus and layout, in English and in
//! Korean; this test runs it against a live sluice (with a shop's name and colour configured)
//! and checks the screenshots it took of the key states.

use std::path::PathBuf;
use std::process::Command;

use crate::helpers::{Backend, TestApp, ADMIN_KEY, USER_SECRET};

const STATES: [&str; 13] = [
    "queued",
    "queued-ko",
    "queued-en",
    "proof-of-work",
    "admitted",
    "held",
    "confirmed",
    "sold-out",
    "expired",
    "seats",
    "sale-closed",
    "sold-out-waiting",
    "no-sign-in",
];

const SHOP_NAME: &str = "Harbour Tickets";

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let int = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (int(16), int(20))
}

/// Runs `script` of `tests/browser` with node against `app`, with its URL, the admin key, the
/// user-token secret and `env`; asserts it ran every check.
pub(crate) async fn run_script(
    app: &TestApp,
    script: &'static str,
    env: Vec<(&'static str, String)>,
) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let base = app.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .current_dir(dir)
            .env("SLUICE_URL", base)
            .env("SLUICE_ADMIN_KEY", ADMIN_KEY)
            .env("SLUICE_USER_SECRET", USER_SECRET)
            .envs(env)
            .output()
            .expect("node is installed (scripts/tools)")
    })
    .await
    .unwrap();
    let log = crate::helpers::output_text(&out);
    assert!(out.status.success(), "{script} failed:\n{log}");
    assert!(log.contains("all checks passed"), "{log}");
}

#[tokio::test]
async fn the_waiting_room_works_in_a_phone_sized_headless_chromium() {
    // The sandbox provider is on (embedded); the shop's look is configured.
    let app = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.page.shop_name = SHOP_NAME.into();
        c.page.accent_colour = "#b3261e".into();
    })
    .await;
    let shots =
        std::env::temp_dir().join(format!("sluice-shots-{}", uuid::Uuid::new_v4().simple()));
    let env = vec![
        ("SHOTS", shots.display().to_string()),
        ("SHOP_NAME", SHOP_NAME.to_owned()),
        ("SHOP_ACCENT_RGB", "rgb(179, 38, 30)".to_owned()),
    ];
    run_script(&app, "waiting-room.mjs", env).await;

    let mut seen = Vec::new();
    for state in STATES {
        let path = shots.join(format!("{state}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("no screenshot {path:?}"));
        assert_eq!(
            png_size(&bytes),
            (390, 844),
            "{state}: a phone-sized screenshot"
        );
        assert!(
            !seen.contains(&bytes),
            "{state} looks exactly like an earlier state"
        );
        seen.push(bytes);
    }
    println!("screenshots in {}", shots.display());
    app.stop().await;
}

/// A shop's page on a second origin joins and reads its status from the browser (CORS), and a
/// page on an origin sluice does not list cannot read an answer (`tests/browser/cross-origin.mjs`).
#[tokio::test]
async fn a_page_on_a_listed_origin_calls_sluice_from_the_browser() {
    let (shop, other) = (crate::helpers::free_port(), crate::helpers::free_port());
    let app = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.http.cors_allowed_origins = vec![format!("http://127.0.0.1:{shop}")];
    })
    .await;
    let env = vec![
        ("SHOP_PORT", shop.to_string()),
        ("OTHER_PORT", other.to_string()),
    ];
    run_script(&app, "cross-origin.mjs", env).await;
    app.stop().await;
}

/// The operator console in headless Chromium (`tests/browser/console.mjs`): sign in, a sale
/// found in the list, its rate changed and seen in the figures, a buyer looked up and refunded
/// behind a confirmation, a viewer shown no control, a sale's phases (timeline, list upload,
/// codes generated and exported), a sale's seat map (per-section counts, seats withdrawn and
/// put back on sale by selecting them), the console in Korean for a Korean browser; a
/// screenshot of each page.
#[tokio::test]
async fn the_operator_console_runs_a_sale_in_headless_chromium() {
    let app = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.workers.figures_ms = sluice::config::Millis(200)
    })
    .await;
    let shots =
        std::env::temp_dir().join(format!("sluice-console-{}", uuid::Uuid::new_v4().simple()));
    run_script(
        &app,
        "console.mjs",
        vec![("SHOTS", shots.display().to_string())],
    )
    .await;
    let mut seen = Vec::new();
    for page in [
        "console-sales",
        "console-sale",
        "console-refund",
        "console-viewer",
        "console-phases",
        "console-venue",
    ] {
        let path = shots.join(format!("{page}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("no screenshot {path:?}"));
        assert_eq!(
            png_size(&bytes),
            (1280, 900),
            "{page}: a laptop-sized screenshot"
        );
        assert!(
            !seen.contains(&bytes),
            "{page} looks exactly like an earlier page"
        );
        seen.push(bytes);
    }
    println!("screenshots in {}", shots.display());
    app.stop().await;
}

/// The waiting page pays a Stripe sale through localstripe's Stripe.js
/// (`tests/browser/stripe.mjs`): the amount on the page, Stripe's card form mounted from the
/// sale's `js_url` under the page's policy, and the payment confirmed on the page by Stripe's
/// webhook.
#[tokio::test]
async fn the_waiting_page_pays_a_stripe_sale_through_stripe_js() {
    let stripe = crate::stripe::LocalStripe::start().await;
    let app =
        TestApp::spawn_on_with(Backend::Embedded, |c| crate::stripe::on_stripe(c, &stripe)).await;
    stripe.register_webhook(&app).await;
    let env = vec![
        ("STRIPE_URL", stripe.url()),
        ("STRIPE_SECRET_KEY", crate::stripe::SECRET_KEY.to_owned()),
    ];
    run_script(&app, "stripe.mjs", env).await;
    app.stop().await;
}

/// The waiting page, in Korean, pays a Toss Payments sale through the Toss stand-in's SDK
/// (`tests/browser/toss.mjs`): the buyer pays in "Toss's window", comes back to sluice's success
/// URL, and the page says the purchase is complete.
#[tokio::test]
async fn the_waiting_page_in_korean_pays_a_toss_sale_to_confirmed() {
    let toss =
        crate::helpers::StandIn::start("toss/toss_standin.py", &[crate::toss::SECRET_KEY]).await;
    let app = TestApp::spawn_on_with(Backend::Embedded, |c| crate::toss::on_toss(c, &toss)).await;
    run_script(&app, "toss.mjs", vec![("TOSS_URL", toss.url())]).await;
    app.stop().await;
}

/// "It's your turn" on the waiting page (`tests/browser/notify.mjs`), in English and Korean,
/// Chromium with the notification permission granted: asked once on a click, the time to come
/// back said, and at admission a system notification and a flashing tab title.
#[tokio::test]
async fn the_waiting_page_tells_the_turn_with_a_notification() {
    let app = TestApp::spawn_on(Backend::Embedded).await;
    run_script(&app, "notify.mjs", Vec::new()).await;
    app.stop().await;
}

/// A sale in phases on the waiting page (`tests/browser/presale.mjs`), in English and Korean:
/// the phases' timeline, the access code field, a refused join told when it may join, a wrong
/// code named, and a good code let in.
#[tokio::test]
async fn the_waiting_page_runs_a_presale_with_access_codes() {
    let app = TestApp::spawn_on(Backend::Embedded).await;
    run_script(&app, "presale.mjs", Vec::new()).await;
    app.stop().await;
}

/// A venue's seat map on the waiting page (`tests/browser/seatmap.mjs`): a buyer picks seats on
/// the map by tap and keyboard and holds them; a second buyer sees them turn held within a
/// refresh and is told why they cannot be chosen; a third takes best available, offered first;
/// screenshots in English and Korean, on a phone and a desktop.
#[tokio::test]
async fn a_buyer_picks_seats_on_the_map_and_another_sees_them_held() {
    let app = TestApp::spawn_on(Backend::Embedded).await;
    let shots =
        std::env::temp_dir().join(format!("sluice-seatmap-{}", uuid::Uuid::new_v4().simple()));
    run_script(
        &app,
        "seatmap.mjs",
        vec![("SHOTS", shots.display().to_string())],
    )
    .await;
    for (name, size) in [
        ("seat-map-en-phone", (390, 844)),
        ("seat-map-en-desktop", (1280, 900)),
        ("seat-map-ko-phone", (390, 844)),
        ("seat-map-ko-desktop", (1280, 900)),
        ("best-available-ko-phone", (390, 844)),
    ] {
        let bytes = std::fs::read(shots.join(format!("{name}.png")))
            .unwrap_or_else(|_| panic!("no screenshot {name}"));
        assert_eq!(png_size(&bytes), size, "{name}");
    }
    app.stop().await;
}
