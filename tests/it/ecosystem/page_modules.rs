//! The waiting page's modules outside a browser: `tsc --checkJs` checks its API module, its
//! timing and each payment provider's window against the spec's generated types
//! (`src/api/page/tsconfig.json`, with the TypeScript of `openapi/typescript`), and
//! `node --test` runs the page's logic (`tests/page`: the texts of both languages, poll
//! timing and backoff, the API calls and their refusals).

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_page_modules_type_check_against_the_spec() {
    let tsc = root().join("openapi/typescript/node_modules/.bin/tsc");
    let out = Command::new(tsc)
        .args(["-p", "src/api/page/tsconfig.json"])
        .current_dir(root())
        .output()
        .expect("TypeScript is installed in openapi/typescript (scripts/tools)");
    assert!(
        out.status.success(),
        "tsc --checkJs:\n{}",
        crate::helpers::output_text(&out)
    );
}

#[test]
fn the_page_logic_passes_node_test() {
    let out = Command::new("node")
        .args(["--test", "tests/page/"])
        .current_dir(root())
        .output()
        .expect("node is installed (scripts/tools)");
    let text = crate::helpers::output_text(&out);
    assert!(out.status.success(), "node --test:\n{text}");
    assert!(
        text.contains("# fail 0") && !text.contains("# pass 0"),
        "{text}"
    );
}
