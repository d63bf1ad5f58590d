//! The code's layout, read from the source tree: no module depends on itself through others,
//! and only the ledger's transition statements write an attempt's state.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of the crate (its path, e.g. ["service", "join"]) and its source, tests cut.
fn modules() -> BTreeMap<Vec<String>, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut modules = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"]
            || parts == ["main"]
            || parts.last().is_some_and(|p| p.ends_with("_tests"))
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap().to_owned();
        modules.insert(parts, code);
    }
    modules
}

/// The `a::b::c` paths that follow each `prefix` in `code`.
fn paths_after<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = Vec<String>> + 'a {
    code.match_indices(prefix).filter_map(move |(at, _)| {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &code[at + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path: Vec<String> = rest[..end]
            .split("::")
            .take_while(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        (!path.is_empty()).then_some(path)
    })
}

/// Which modules each module names (its own ancestors and descendants left out: a parent
/// declares its children, and children use what their parent holds).
fn dependencies(
    modules: &BTreeMap<Vec<String>, String>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let deepest = |path: Vec<String>| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains_key(p))
    };
    let mut graph = BTreeMap::new();
    for (module, code) in modules {
        let parent = &module[..module.len() - 1];
        let named = paths_after(code, "crate::").chain(paths_after(code, "super::").map(|p| {
            let mut full = parent.to_vec();
            full.extend(p);
            full
        }));
        let deps: BTreeSet<Vec<String>> = named
            .filter_map(deepest)
            .filter(|t| t != module && !module.starts_with(t) && !t.starts_with(module))
            .collect();
        graph.insert(module.clone(), deps);
    }
    graph
}

#[test]
fn no_module_depends_on_itself_through_others() {
    let graph = dependencies(&modules());
    assert!(
        graph[&vec!["service".to_owned(), "leave".to_owned()]]
            .contains(&vec!["service".to_owned(), "attempt_event".to_owned()]),
        "the reader finds a known dependency"
    );
    // A module is on a cycle when it reaches itself.
    let mut on_cycles = Vec::new();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut next: Vec<&Vec<String>> = graph[start].iter().collect();
        while let Some(m) = next.pop() {
            if m == start {
                on_cycles.push(start.join("::"));
                break;
            }
            if seen.insert(m) {
                next.extend(graph.get(m).into_iter().flatten());
            }
        }
    }
    assert!(on_cycles.is_empty(), "modules on a cycle: {on_cycles:?}");
}

#[test]
fn only_the_ledgers_transition_statements_write_an_attempts_state() {
    let allowed: BTreeSet<PathBuf> = [
        "src/ledger/sql/attempts.rs",
        // The dialects' statements over a batch (an admission's rows and their trail).
        "src/ledger/postgres.rs",
        "src/ledger/sqlite.rs",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let writes = [
        "UPDATE attempts",
        "INSERT INTO attempts",
        "INSERT OR IGNORE INTO attempts",
        "DELETE FROM attempts",
        "INTO attempt_transitions",
    ];
    let mut found = Vec::new();
    for (module, code) in modules() {
        let file = module.join("/");
        for write in writes {
            if code.contains(write) {
                found.push((file.clone(), write));
            }
        }
    }
    assert!(!found.is_empty(), "the statements exist somewhere");
    let elsewhere: Vec<_> = found
        .iter()
        .filter(|(file, _)| {
            !allowed
                .iter()
                .any(|a| a.with_extension("").ends_with(file.as_str()))
        })
        .collect();
    assert!(
        elsewhere.is_empty(),
        "attempt state written outside the ledger's transition statements: {elsewhere:?}"
    );
}
