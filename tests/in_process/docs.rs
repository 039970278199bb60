//! The documents in the repository against the code: docs/configuration.md
//! names every key the config loader knows, in the section of its table;
//! README.md stays short; no document points outside the repository.
//!
//! The keys come from the loader itself, not from a list kept here: a
//! config with an unknown key in every table makes `vigie::config::load`
//! print each table's "known keys", so a key added to the loader without a
//! line in docs/configuration.md fails this test.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Far from every real key, so the loader lists the known keys instead of
/// suggesting the closest one.
const UNKNOWN: &str = "zzzzqqqq";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Table ("" for the top level, "api", "check.tls", ...) -> its known keys,
/// as the loader reports them for an unknown key in each table.
fn known_keys() -> BTreeMap<String, Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let sections = [
        "api",
        "connectivity",
        "alerting",
        "smtp",
        "report",
        "history",
        "replication",
        "heartbeat",
        "vantage",
        "status_page",
    ];
    let mut config = format!("checks_dir = \"checks\"\n{UNKNOWN} = 1\n");
    for section in sections {
        config.push_str(&format!("\n[{section}]\n{UNKNOWN} = 1\n"));
    }
    for table in ["maintenance", "notify", "route", "announcement"] {
        config.push_str(&format!("\n[[{table}]]\n{UNKNOWN} = 1\n"));
    }
    fs::write(dir.path().join("config.toml"), config).unwrap();
    fs::create_dir(dir.path().join("checks")).unwrap();
    let mut check = format!("[[check]]\nname = \"site\"\n{UNKNOWN} = 1\n");
    for table in ["tls", "dns", "expect", "alert", "rdap"] {
        check.push_str(&format!("\n[check.{table}]\n{UNKNOWN} = 1\n"));
    }
    fs::write(dir.path().join("checks/site.toml"), check).unwrap();

    let errors = match vigie::config::load(&dir.path().join("config.toml")) {
        Ok(_) => panic!("a config full of unknown keys loaded"),
        Err(errors) => errors.0,
    };
    let mut tables = BTreeMap::new();
    for error in errors.iter().map(|e| e.to_string()) {
        let Some((_, rest)) = error.split_once("unknown key `") else {
            continue;
        };
        let (key, rest) = rest.split_once('`').unwrap();
        let Some(prefix) = key.strip_suffix(UNKNOWN) else {
            continue;
        };
        let (_, list) = rest
            .split_once("(known keys: ")
            .unwrap_or_else(|| panic!("no list of known keys in: {error}"));
        let list = list.trim_end().trim_end_matches(')');
        let table = prefix.trim_end_matches('.').replace("[0]", "");
        let table = match rest.contains(" in check ") {
            true if table.is_empty() => "check".to_owned(),
            true => format!("check.{table}"),
            false => table,
        };
        let keys = list.split(", ").map(str::to_owned).collect();
        tables.insert(table, keys);
    }
    // top, maintenance, notify, route, announcement, check and its five
    // tables
    let expected = sections.len() + 11;
    assert_eq!(
        tables.len(),
        expected,
        "expected the known keys of {expected} tables, got {:?} from {errors:#?}",
        tables.keys()
    );
    tables
}

/// How docs/configuration.md heads the section of a table.
fn heading_of(table: &str) -> String {
    match table {
        "" => "Top level".to_owned(),
        "maintenance" | "notify" | "route" | "announcement" | "check" => format!("`[[{table}]]`"),
        other => format!("`[{other}]`"),
    }
}

/// The text of the section whose heading contains `heading`, up to the
/// next heading of the same or a higher level.
fn section<'a>(doc: &'a str, heading: &str) -> Option<&'a str> {
    let mut start = None;
    let mut level = 0;
    let mut offset = 0;
    for line in doc.split_inclusive('\n') {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        let is_heading = hashes > 0 && line[hashes..].starts_with(' ');
        if is_heading {
            if let Some(begin) = start {
                if hashes <= level {
                    return Some(&doc[begin..offset]);
                }
            } else if line.contains(heading) {
                start = Some(offset);
                level = hashes;
            }
        }
        offset += line.len();
    }
    start.map(|begin| &doc[begin..])
}

#[test]
fn configuration_md_names_every_key_in_its_table() {
    let doc = read(&repo().join("docs/configuration.md"));
    let mut missing = Vec::new();
    for (table, keys) in known_keys() {
        let heading = heading_of(&table);
        let Some(text) = section(&doc, &heading) else {
            missing.push(format!("no section headed {heading}"));
            continue;
        };
        for key in keys {
            let named = text.contains(&format!("`{key}`"))
                || text.contains(&format!("`{table}.{key}`"))
                || text.contains(&format!("`[{table}.{key}]`"))
                || text.contains(&format!("`[{key}]`"))
                || text.contains(&format!("`[[{key}]]`"));
            if !named {
                missing.push(format!("`{key}` under {heading}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md misses:\n{}",
        missing.join("\n")
    );
}

#[test]
fn readme_has_at_most_250_lines() {
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(lines <= 250, "README.md has {lines} lines, at most 250");
}

#[test]
fn no_document_points_outside_the_repository_or_at_issues() {
    let issue = regex::Regex::new(r"[Ii]ssues? #?[0-9]+").unwrap();
    let mut documents = vec![repo().join("README.md")];
    let mut entries: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    entries.sort();
    documents.extend(entries);
    let mut found = Vec::new();
    for path in &documents {
        let text = read(path);
        for (number, line) in text.lines().enumerate() {
            let outside = line.contains("../shared") || line.contains("DESIGN.md");
            if outside || issue.is_match(line) {
                found.push(format!("{}:{}: {line}", path.display(), number + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "documents that must stand alone:\n{}",
        found.join("\n")
    );
}
