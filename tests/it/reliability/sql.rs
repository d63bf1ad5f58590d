//! SQL takes values only as bound parameters. Statement text is `&'static str` (literals and
//! the dialect's fragments, joined by `concat!`), or is assembled only from constants and from
//! the one column name the code itself picks (`{deadline}`, from `timeout_state`, an exhaustive
//! match on states); nothing a request carries can reach it. This reads every ledger source
//! file and checks each `sqlx::query…(&format!(…))` against that rule.

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

/// The `{…}` names of the format string (its pieces, if `concat!` joins them) that starts
/// right after `format!(`: every string literal up to the statement's first `.bind(` or run.
fn interpolations(text: &str) -> Vec<String> {
    let end = [".bind", ".fetch", ".execute"]
        .iter()
        .filter_map(|call| text.find(call))
        .min()
        .expect("the statement is run");
    let mut names = Vec::new();
    for (i, literal) in text[..end].split('"').enumerate() {
        if i % 2 == 0 {
            continue; // between literals (SQL quotes with '…')
        }
        let mut rest = literal;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').unwrap() + open;
            names.push(rest[open + 1..close].to_owned());
            rest = &rest[close + 1..];
        }
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
    let (mut statements, mut assembled) = (0, 0);
    let mut offending = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        statements += source.matches("sqlx::query").count();
        for (at, _) in source.match_indices("(&format!(") {
            let before = &source[..at];
            if !before.ends_with("sqlx::query")
                && !before.ends_with("sqlx::query_scalar")
                && !before.ends_with("sqlx::query_as")
            {
                continue;
            }
            assembled += 1;
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
        statements >= 50 && assembled >= 1,
        "found only {statements} statements, {assembled} assembled: is the scan right?"
    );
    assert!(
        offending.is_empty(),
        "values must be bound, not formatted: {offending:#?}"
    );
    crate::reliability::record(
        "SQL built from input (static scan of src/ledger)",
        &[
            ("statements", statements.to_string()),
            ("assembled at run time", assembled.to_string()),
            ("interpolating a value", "0".into()),
        ],
    );
}
