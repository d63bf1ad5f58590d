//! SQL takes values only as bound parameters. Statement text may be assembled only from
//! constants (`{COLUMNS}`, `{NOW_MS}`) and from the one column name the code itself picks
//! (`{deadline}`, from `timeout_state`, an exhaustive match on states); nothing a request
//! carries can reach it. This reads every ledger source file and checks each
//! `sqlx::query…(&format!(…))` against that rule.

use std::path::{Path, PathBuf};

/// Interpolations that are not constants, each with why it is safe.
const CODE_CHOSEN: &[&str] = &[
    "deadline", // a column name from `transition::timeout_state`, never input
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `{…}` names of the format string that starts right after `format!(`.
fn interpolations(text: &str) -> Vec<String> {
    let start = text.find('"').expect("a format string");
    let body = &text[start + 1..];
    let end = body.find('"').expect("the format string ends"); // SQL quotes with '…'
    let mut names = Vec::new();
    let mut rest = &body[..end];
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').unwrap() + open;
        names.push(rest[open + 1..close].to_owned());
        rest = &rest[close + 1..];
    }
    names
}

#[test]
fn statements_interpolate_only_constants_and_code_chosen_names() {
    let mut files = Vec::new();
    rust_files(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/ledger"),
        &mut files,
    );
    let mut statements = 0;
    let mut offending = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for (at, _) in source.match_indices("(&format!(") {
            let before = &source[..at];
            if !before.ends_with("sqlx::query")
                && !before.ends_with("sqlx::query_scalar")
                && !before.ends_with("sqlx::query_as")
            {
                continue;
            }
            statements += 1;
            for name in interpolations(&source[at + "(&format!(".len()..]) {
                let constant =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                if !constant && !CODE_CHOSEN.contains(&name.as_str()) {
                    offending.push(format!("{}: {{{name}}}", file.display()));
                }
            }
        }
    }
    assert!(
        statements >= 10,
        "found only {statements} assembled statements: is the scan right?"
    );
    assert!(
        offending.is_empty(),
        "values must be bound, not formatted: {offending:#?}"
    );
    crate::reliability::record(
        "SQL built from input (static scan of src/ledger)",
        &[
            ("assembled statements", statements.to_string()),
            ("interpolating a value", "0".into()),
        ],
    );
}
