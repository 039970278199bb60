//! Generated inputs through vigie's config loader: random documents, and
//! mutations of the shipped `config.toml` and `checks/*.toml` (bytes
//! deleted, inserted, lines replaced, duplicated, files cut short). Whatever
//! the text, `load` never panics and either gives a config or errors that
//! each name a file that was read, a line and a column inside it.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::Config as Cases;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped files, as (name under the case directory, text).
fn shipped() -> Vec<(String, String)> {
    let mut files = vec![(
        "config.toml".to_string(),
        std::fs::read_to_string(repo().join("config.toml")).unwrap(),
    )];
    let mut checks: Vec<PathBuf> = std::fs::read_dir(repo().join("checks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    checks.sort();
    for path in checks {
        let name = format!("checks/{}", path.file_name().unwrap().to_string_lossy());
        files.push((name, std::fs::read_to_string(&path).unwrap()));
    }
    files
}

/// One change to a text.
#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    ReplaceLine { line: usize, text: String },
    DuplicateLine { line: usize },
    Truncate { at: usize },
}

/// TOML-looking fragments: keys, sections, values of every type, and
/// characters that break strings, tables and arrays.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_.]{1,12} = [\"a-z0-9:/.*\\[\\]{}, ]{0,30}",
        "\\[{1,2}[a-z_.]{0,12}\\]{0,2}",
        "[a-z_]{1,10} = (-?[0-9]{1,25}|[0-9.e+-]{1,10}|true|false|\"[0-9]{1,6}(s|m|h|d|y|ms)\")",
        "[\"'\\[\\]{}=#,\\n\\\\]{1,6}",
        any::<String>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..40usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), fragment()).prop_map(|(at, text)| Mutation::Insert { at, text }),
        (any::<usize>(), fragment()).prop_map(|(line, text)| Mutation::ReplaceLine { line, text }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    match mutation {
        Mutation::Delete { at, len } => {
            let from = boundary(text, *at);
            let to = boundary(text, from + len);
            let to = to.max(from);
            format!("{}{}", &text[..from], &text[to..])
        }
        Mutation::Insert { at, text: fragment } => {
            let at = boundary(text, *at);
            format!("{}{fragment}{}", &text[..at], &text[at..])
        }
        Mutation::ReplaceLine {
            line,
            text: fragment,
        } => {
            let i = line % lines.len();
            lines[i] = fragment;
            lines.join("\n")
        }
        Mutation::DuplicateLine { line } => {
            let i = line % lines.len();
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        Mutation::Truncate { at } => text[..boundary(text, *at)].to_string(),
    }
}

/// Writes `files` into a fresh directory and loads its config.toml; checks
/// every error names a file written there, at a line and column inside it.
fn load_and_judge(files: &[(String, String)]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checks")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let config = dir.path().join("config.toml");
    let Err(errors) = vigie::config::load(&config) else {
        return Ok(());
    };
    prop_assert!(!errors.0.is_empty());
    for error in &errors.0 {
        let name = error
            .file
            .strip_prefix(dir.path())
            .map(|p| p.to_string_lossy().into_owned());
        let text = name
            .as_ref()
            .ok()
            .and_then(|name| files.iter().find(|(n, _)| n == name))
            .map(|(_, text)| text);
        prop_assert!(text.is_some(), "{error}: not one of the files read");
        let lines = text.map_or(0, |t| t.split('\n').count());
        prop_assert!(
            error.line >= 1 && error.line <= lines,
            "{error}: line outside the file's {lines} lines"
        );
        prop_assert!(error.col >= 1, "{error}: no column");
        prop_assert!(!error.message.trim().is_empty(), "{error}: no message");
    }
    Ok(())
}

proptest! {
    #![proptest_config(Cases { cases: 256, failure_persistence: None, ..Cases::default() })]

    #[test]
    fn mutated_shipped_files_load_or_say_where(
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut files = shipped();
        let i = which % files.len();
        for mutation in &mutations {
            files[i].1 = apply(&files[i].1, mutation);
        }
        load_and_judge(&files)?;
    }

    #[test]
    fn random_documents_load_or_say_where(
        config in proptest::collection::vec(fragment(), 0..12),
        check in proptest::collection::vec(fragment(), 0..12),
    ) {
        let files = vec![
            ("config.toml".to_string(), config.join("\n")),
            ("checks/random.toml".to_string(), check.join("\n")),
        ];
        load_and_judge(&files)?;
    }
}

#[test]
fn the_shipped_files_load_unchanged() {
    load_and_judge(&shipped()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checks")).unwrap();
    for (name, text) in shipped() {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let loaded = vigie::config::load(&dir.path().join("config.toml"));
    assert!(loaded.is_ok(), "{}", loaded.err().unwrap());
}
