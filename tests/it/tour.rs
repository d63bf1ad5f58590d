//! The README's tour, run exactly as written against a real embedded sluice.

use std::process::Command;

use crate::helpers::{Backend, TestApp};

/// The first ```sh block after the "A tour" heading.
fn tour_from_readme() -> String {
    let readme = include_str!("../../README.md");
    let after = readme
        .split("## A tour")
        .nth(1)
        .expect("the README has a tour");
    let start = after.find("```sh\n").expect("the tour is a sh block") + "```sh\n".len();
    let end = after[start..].find("```").expect("the block ends");
    after[start..start + end].to_owned()
}

#[tokio::test]
async fn the_readme_tour_works_as_written() {
    // Secrets generated into the data directory, as a first `cargo run` does.
    let t = TestApp::spawn_on_with(Backend::Embedded, |c| {
        c.auth.admin_key = Default::default();
        c.auth.user_jwt_hs256_secret = None;
        c.auth.admission_key_seed_hex = None;
        c.payments.webhook_secret = Default::default();
        sluice::secrets::fill(c).expect("secrets generated");
    })
    .await;
    let data_dir = t.app.config.embedded.data_dir.clone();
    let script = tour_from_readme();
    let base = t.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg("-euo")
            .arg("pipefail")
            .arg("-c")
            .arg(&script)
            // The embedded default, whatever the shell that runs the suite points sluice at.
            .env_remove("SLUICE__LEDGER__URL")
            .env_remove("SLUICE__QUEUE__URL")
            .env("SLUICE_URL", base)
            .env("SLUICE", env!("CARGO_BIN_EXE_sluice"))
            .env("SLUICE__EMBEDDED__DATA_DIR", &data_dir)
            .output()
            .expect("bash runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the tour failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"state\":\"QUEUED\""), "{stdout}");
    assert!(stdout.contains("\"state\":\"HOLD\""), "{stdout}");
    assert!(stdout.contains("\"state\":\"CONFIRMED\""), "{stdout}");
    assert!(
        stdout.contains(
            "\"confirmed\":1,\"units\":{\"free\":98,\"held\":0,\"paying\":0,\"sold\":2,\"total\":100}"
        ),
        "{stdout}"
    );
    t.stop().await;
}
