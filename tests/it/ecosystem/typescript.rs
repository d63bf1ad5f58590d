//! Frontend teams' view: a TypeScript client generated from the committed spec
//! (openapi-typescript + openapi-fetch, `openapi/typescript`) is current, type-checks the
//! example program against the spec's types, and that program runs a whole purchase against a
//! live sluice.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::helpers::{Backend, TestApp, ADMIN_KEY, USER_SECRET};

fn package() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi/typescript")
}

/// `npx` in the package (its node_modules come from `scripts/tools install`).
fn npx(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new("npx");
    command
        .arg("--no-install")
        .args(args)
        .current_dir(package());
    for (k, v) in env {
        command.env(k, v);
    }
    command
        .output()
        .expect("node and npx are installed (scripts/tools)")
}

#[test]
fn the_generated_client_is_current_and_type_checks() {
    let fresh = std::env::temp_dir().join(format!(
        "sluice-schema-{}.d.ts",
        uuid::Uuid::new_v4().simple()
    ));
    let out = npx(
        &[
            "openapi-typescript",
            "../openapi.json",
            "-o",
            fresh.to_str().unwrap(),
            // As `npm run generate`: fields with a default stay optional in requests.
            "--default-non-nullable=false",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        crate::helpers::output_text(&out)
    );
    let committed = std::fs::read_to_string(package().join("src/schema.d.ts")).unwrap();
    assert!(
        std::fs::read_to_string(&fresh).unwrap() == committed,
        "openapi/typescript/src/schema.d.ts is stale: run scripts/openapi and commit it"
    );
    let out = npx(&["tsc", "--noEmit"], &[]);
    assert!(
        out.status.success(),
        "tsc:\n{}",
        crate::helpers::output_text(&out)
    );
}

#[tokio::test]
async fn the_typescript_lifecycle_runs_against_a_live_sluice() {
    let app = TestApp::spawn_on(Backend::Embedded).await; // the sandbox provider is on
    let base = app.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        npx(
            &["tsx", "examples/lifecycle.ts"],
            &[
                ("SLUICE_URL", base.as_str()),
                ("SLUICE_ADMIN_KEY", ADMIN_KEY),
                ("SLUICE_USER_SECRET", USER_SECRET),
            ],
        )
    })
    .await
    .unwrap();
    let log = crate::helpers::output_text(&out);
    assert!(out.status.success(), "{log}");
    for line in [
        "joined QUEUED",
        "admitted token=yes",
        "refused 422 /problems/validation",
        "held HOLD quantity=2",
        "checkout PAYMENT_PENDING",
        "final CONFIRMED",
        "stats confirmed=1 remaining=8",
    ] {
        assert!(log.contains(line), "missing `{line}` in:\n{log}");
    }
    app.stop().await;
}
