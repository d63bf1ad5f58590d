//! What the docs take from the code is generated from it, and these tests fail when the two
//! drift: the errors table of `docs/integrating.md` (from `PROBLEMS`), and
//! `config/sluice.example.toml` (from `Config::default()` and the doc comments of the settings'
//! sources: `src/config.rs` and the payment providers' sections). `scripts/generated` rewrites both (`SLUICE_WRITE_GENERATED=1`). Also: the
//! README is a front door (at most 5 KB) and every link of the docs leads somewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;
use sluice::api::problem::PROBLEMS;
use sluice::config::Config;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `file` with what the code generates; rewrites it instead when asked to.
fn check_generated(file: &Path, generated: &str, how: &str) {
    let current = std::fs::read_to_string(file).unwrap_or_default();
    if std::env::var("SLUICE_WRITE_GENERATED").is_ok_and(|v| v == "1") {
        if current != generated {
            std::fs::write(file, generated).unwrap();
        }
        return;
    }
    assert!(
        current == generated,
        "{} differs from what {how} generates: run scripts/generated\n--- generated ---\n{generated}",
        file.display()
    );
}

/// The errors table: one row per kind of problem, in the catalogue's order.
fn problems_table() -> String {
    let mut table = String::from("| `type` | status | when |\n|---|---|---|\n");
    for p in PROBLEMS {
        table.push_str(&format!("| `{}` | {} | {} |\n", p.uri(), p.status, p.when));
    }
    table
}

/// `text` with what stands between the line starting `open` and the line `close` replaced.
fn between(text: &str, open: &str, close: &str, inner: &str) -> String {
    let start = text.find(open).expect("the opening marker");
    let start = start + text[start..].find('\n').unwrap() + 1;
    let end = start + text[start..].find(close).expect("the closing marker");
    format!("{}{inner}{}", &text[..start], &text[end..])
}

#[test]
fn the_errors_table_is_the_catalogue_of_problems() {
    let file = root().join("docs/integrating.md");
    let text = std::fs::read_to_string(&file).unwrap();
    let generated = between(
        &text,
        "<!-- problems: generated",
        "<!-- /problems -->",
        &problems_table(),
    );
    check_generated(&file, &generated, "src/api/problem.rs");
}

#[test]
fn every_problem_type_is_one_kind_with_a_title_and_a_reason() {
    let mut seen = std::collections::BTreeSet::new();
    for p in PROBLEMS {
        assert!(seen.insert(p.slug), "{} twice", p.slug);
        assert!((400..600).contains(&p.status), "{}: {}", p.slug, p.status);
        assert!(!p.title.is_empty() && p.when.ends_with('.'), "{}", p.slug);
    }
    assert!(PROBLEMS.len() >= 25, "the catalogue is whole");
}

/// The files that define the settings: `src/config.rs`, and each module's own section, its
/// `settings.rs` (the `[payments]` section, each provider's, `[telemetry]`).
fn settings_sources() -> String {
    fn settings_files(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                settings_files(&path, found);
            } else if path.file_name().is_some_and(|n| n == "settings.rs") {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    settings_files(&root().join("src"), &mut files);
    files.sort();
    files.insert(0, root().join("src/config.rs"));
    files
        .iter()
        .map(|f| {
            let source = std::fs::read_to_string(f).unwrap();
            source.split("#[cfg(test)]").next().unwrap().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Doc comments of the fields of each struct of the settings' sources, and each field's type:
/// struct name -> [(field, type, doc lines)]; and each struct's own doc.
type Fields = BTreeMap<String, Vec<(String, String, Vec<String>)>>;

fn config_docs() -> (Fields, BTreeMap<String, Vec<String>>) {
    let source = settings_sources();
    let (mut fields, mut struct_docs) = (Fields::new(), BTreeMap::new());
    let mut doc: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in source.lines() {
        let t = line.trim();
        if let Some(d) = t.strip_prefix("///") {
            doc.push(d.strip_prefix(' ').unwrap_or(d).to_owned());
        } else if let Some(rest) = t.strip_prefix("pub struct ") {
            let name = rest.split([' ', '{']).next().unwrap().to_owned();
            struct_docs.insert(name.clone(), std::mem::take(&mut doc));
            current = rest.ends_with('{').then_some(name);
        } else if t == "}" {
            current = None;
            doc.clear();
        } else if let (Some(name), Some(field)) = (&current, t.strip_prefix("pub ")) {
            if let Some((field, ty)) = field.split_once(": ") {
                let ty = ty.trim_end_matches(',').to_owned();
                fields.entry(name.clone()).or_default().push((
                    field.to_owned(),
                    ty,
                    std::mem::take(&mut doc),
                ));
            }
        } else if !t.starts_with("#[") {
            doc.clear();
        }
    }
    (fields, struct_docs)
}

fn comment(out: &mut String, lines: &[String]) {
    for line in lines {
        match line.is_empty() {
            true => out.push_str("#\n"),
            false => out.push_str(&format!("# {line}\n")),
        }
    }
}

/// One table of the example: its doc, then each key with its doc and default (a key with no
/// default, an optional setting, is shown commented out), then its sub-tables.
fn render_table(out: &mut String, path: &str, ty: &str, value: &toml::Value, fields: &Fields) {
    let Some(own) = fields.get(ty) else {
        panic!("no struct {ty} in the settings' sources (for [{path}])");
    };
    out.push_str(&format!("[{path}]\n"));
    // Sub-tables after the keys: a struct (`[path.field]`), or a map of them (one table each).
    let mut tables = Vec::new();
    for (field, field_ty, doc) in own {
        let map_of = field_ty
            .strip_prefix("BTreeMap<String, ")
            .and_then(|t| t.strip_suffix('>'))
            .filter(|t| fields.contains_key(*t));
        match (value.get(field), map_of) {
            (Some(v), Some(inner)) => {
                for (key, entry) in v.as_table().into_iter().flatten() {
                    tables.push((format!("{path}.{field}.{key}"), inner, entry.clone(), doc));
                }
            }
            (Some(v), None) if fields.contains_key(field_ty.as_str()) => {
                tables.push((format!("{path}.{field}"), field_ty.as_str(), v.clone(), doc))
            }
            (Some(v), None) => {
                comment(out, doc);
                out.push_str(&format!("{field} = {v}\n"));
            }
            (None, _) => {
                comment(out, doc);
                out.push_str(&format!("# {field} = (unset)\n"));
            }
        }
    }
    for (path, ty, value, doc) in tables {
        out.push('\n');
        comment(out, doc);
        render_table(out, &path, ty, &value, fields);
    }
}

fn example_config() -> String {
    let (fields, struct_docs) = config_docs();
    let defaults = toml::Value::try_from(Config::default()).unwrap();
    let mut out = String::from(
        "# sluice's settings with their defaults, generated from the code by scripts/generated\n\
         # (a test fails when the two differ). Copy what you change into your own file and pass\n\
         # it with --config FILE (or SLUICE_CONFIG); every key can also be set as\n\
         # SLUICE__SECTION__KEY, a list as comma-separated values or a TOML array.\n",
    );
    for (section, ty, doc) in &fields["Config"] {
        out.push('\n');
        comment(&mut out, struct_docs.get(ty).unwrap_or(doc));
        render_table(&mut out, section, ty, &defaults[section.as_str()], &fields);
    }
    out
}

#[test]
fn the_example_config_is_the_defaults_with_their_docs() {
    let file = root().join("config/sluice.example.toml");
    check_generated(&file, &example_config(), "src/config.rs");
    // It parses, to the defaults (no environment: the test's own variables aside; nor the
    // check that secrets are set, which start-up fills in the embedded default).
    let loaded: Config = Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::file_exact(&file))
        .extract()
        .expect("the example parses");
    assert_eq!(
        serde_json::to_value(&loaded).unwrap(),
        serde_json::to_value(Config::default()).unwrap()
    );
}

/// GitHub's anchor of a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn the_readme_is_a_front_door_and_every_link_of_the_docs_leads_somewhere() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.len() <= 5 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
    assert!(
        readme.contains("## A tour"),
        "the tour stays (tests/it/tour.rs runs it)"
    );
    let mut pages = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap()];
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = match path {
                "" => page.clone(),
                _ => page.parent().unwrap().join(path),
            };
            let ok = file.exists()
                && (fragment.is_empty()
                    || std::fs::read_to_string(&file).unwrap().lines().any(|l| {
                        l.starts_with('#') && anchor(l.trim_start_matches('#')) == fragment
                    }));
            if !ok {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(
        checked >= 20,
        "found only {checked} links: is the scan right?"
    );
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}
