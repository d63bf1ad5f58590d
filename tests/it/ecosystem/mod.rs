//! The tools sluice's users bring, run for real against it: the committed OpenAPI contract and
//! a client generated from it, the waiting-room page in headless Chromium (and its modules
//! under tsc and node --test), promtool on the metrics, alert rules and dashboards, k6, the
//! production docker-compose file and the Kubernetes manifest.

pub(crate) mod browser;
mod compose;
mod contract;
mod k6;
mod kubernetes;
mod page_modules;
mod prometheus;
mod spec;
mod typescript;

use std::path::{Path, PathBuf};

/// A checker run on `file` and on a copy with `from` made `to`: the file passes, and the copy
/// fails with a report that contains `said` (so the check is real).
pub(crate) fn passes_and_a_broken_copy_fails(
    check: impl Fn(&Path) -> std::process::Output,
    file: &Path,
    (from, to): (&str, &str),
    said: &str,
) {
    let out = check(file);
    assert!(
        out.status.success(),
        "{}",
        crate::helpers::output_text(&out)
    );
    let name = file.file_name().unwrap().to_string_lossy();
    let broken: PathBuf =
        std::env::temp_dir().join(format!("{}-{name}", uuid::Uuid::new_v4().simple()));
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{from:?} is in {name}");
    std::fs::write(&broken, text.replacen(from, to, 1)).unwrap();
    let out = check(&broken);
    let report = crate::helpers::output_text(&out);
    assert!(!out.status.success() && report.contains(said), "{report}");
}
