//! The waiting-room page in headless Chromium (Debian's, driven by playwright-core from
//! `tests/browser`): the script asserts each step's text, focus and layout; this test runs it
//! against a live sluice and checks the screenshots it took of the key states.

use std::path::PathBuf;
use std::process::Command;

use crate::helpers::{Backend, TestApp, ADMIN_KEY, USER_SECRET};

const STATES: [&str; 10] = [
    "queued",
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

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let int = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (int(16), int(20))
}

#[tokio::test]
async fn the_waiting_room_works_in_a_phone_sized_headless_chromium() {
    let app = TestApp::spawn_on(Backend::Embedded).await; // the sandbox provider is on
    let shots =
        std::env::temp_dir().join(format!("sluice-shots-{}", uuid::Uuid::new_v4().simple()));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let (base, out_dir) = (app.base.clone(), shots.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("waiting-room.mjs")
            .current_dir(dir)
            .env("SLUICE_URL", base)
            .env("SLUICE_ADMIN_KEY", ADMIN_KEY)
            .env("SLUICE_USER_SECRET", USER_SECRET)
            .env("SHOTS", out_dir)
            .output()
            .expect("node is installed (scripts/tools)")
    })
    .await
    .unwrap();
    let log = crate::helpers::output_text(&out);
    assert!(out.status.success(), "browser test failed:\n{log}");
    assert!(log.contains("all checks passed"), "{log}");

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
