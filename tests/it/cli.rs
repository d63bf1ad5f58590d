//! The `sluice` command's one-shot subcommands, run as the real binary: `reconcile` on a ledger
//! never served from, `migrate` against a database it cannot reach, and `openapi` into a reader
//! that stops early.

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
