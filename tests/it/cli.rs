//! The `sluice` command's one-shot subcommands, run as the real binary: `reconcile` on a ledger
//! never served from, `migrate` against a database it cannot reach, `openapi` into a reader
//! that stops early, and both beside a running server on the same data directory.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::helpers::{free_port, output_text};

/// A directory of the test's own, where the embedded backends keep their files; removed after.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> WorkDir {
        let dir =
            std::env::temp_dir().join(format!("sluice-cli-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        WorkDir(dir)
    }

    /// `sluice <args>` with the development configuration, run here, on the embedded backends
    /// unless `env` says otherwise.
    fn sluice(&self, args: &[&str], env: &[(&str, String)]) -> Command {
        let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .arg("--config")
            .arg(config)
            .args(args)
            .env_remove("SLUICE__QUEUE__URL")
            .env_remove("SLUICE__LEDGER__URL")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(&self.0);
        command
    }

    fn run(&self, args: &[&str], env: &[(&str, String)]) -> Output {
        self.sluice(args, env).output().unwrap()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn reconcile_on_a_fresh_embedded_ledger_says_there_is_nothing_to_rebuild() {
    let out = WorkDir::new().run(&["reconcile"], &[]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "no sale is open: nothing to rebuild",
        "{text}"
    );
}

#[test]
fn migrate_names_the_ledger_it_cannot_reach_without_its_password() {
    let port = free_port();
    let url = format!("postgres://sluice:hunter2@127.0.0.1:{port}/sluice");
    let out = WorkDir::new().run(
        &["migrate"],
        &[
            ("SLUICE__LEDGER__URL", url),
            ("SLUICE__LEDGER__ACQUIRE_TIMEOUT_MS", "300".into()),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let named = format!("migrating the ledger (postgres://sluice@127.0.0.1:{port}/sluice)");
    assert!(stderr.contains(&named), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// `sluice openapi | head -c 1`: the command ends as it would had its reader taken it all,
/// without a panic about the closed pipe.
#[test]
fn printing_the_spec_to_a_reader_that_stops_early_ends_quietly() {
    let work = WorkDir::new();
    let mut child = work
        .sluice(&["openapi"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    // The document is larger than a pipe holds, so the rest meets the closed pipe.
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(&first, b"{");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

/// `sluice openapi` beside a running server on the same data directory prints the spec and
/// leaves the server's queue store alone; `sluice reconcile` there is refused, naming why: it
/// would write the journal anew under the server, whose later writes would then be lost.
#[tokio::test]
async fn one_shot_commands_leave_a_running_servers_queue_store_alone() {
    let dir = WorkDir::new();
    let port = free_port();
    let listen = [("SLUICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))];
    let mut server = dir
        .sluice(&["serve"], &listen)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = format!("http://127.0.0.1:{port}/health/ready");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !reqwest::get(&ready)
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(std::time::Instant::now() < deadline, "sluice did not start");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let spec = dir.run(&["openapi"], &[]);
    let text = output_text(&spec);
    assert!(spec.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&spec.stdout).starts_with('{'),
        "{text}"
    );

    let reconcile = dir.run(&["reconcile"], &[]);
    let stderr = String::from_utf8_lossy(&reconcile.stderr);
    assert!(!reconcile.status.success(), "{stderr}");
    assert!(
        stderr.contains("is in use by another sluice process"),
        "{stderr}"
    );
    assert!(reqwest::get(&ready)
        .await
        .is_ok_and(|r| r.status().is_success()));
    server.kill().unwrap();
    server.wait().unwrap();
}
