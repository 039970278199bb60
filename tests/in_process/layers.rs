//! No import circle between the files of any folder of `src/`.
//!
//! Imports point down (the layers show in the layout), and that holds
//! inside a folder as much as between top-level modules: within
//! `src/mail/`, `sender.rs` may use `outbox.rs` or the other way round,
//! not both, so each file can be read knowing only what it imports.
//!
//! The test reads `src/**/*.rs` as text. Each path that starts with
//! `crate::`, `super::` or `self::` (in `use` trees and in code), and each
//! `use` of a child module by its bare name, is resolved to the deepest
//! module it names; a name a `mod.rs` re-exports (`pub use child::Name`) is
//! followed to the child that defines it, so importing through the parent
//! still counts. An import between two modules is an arrow between the two
//! entries (files or subfolders) of the deepest folder that holds both.
//! Arrows from a folder's `mod.rs` to its own entries, and from an entry
//! to its parents, are the module tree itself and are not counted. The
//! trailing `#[cfg(test)] mod tests { ... }` block and comments are
//! skipped: tests may reach anywhere.
//!
//! Every circle found is reported (folder, the entries, and the files
//! behind each arrow), not only the first.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Folders whose circles other work is breaking, each with the circle
/// known today. A folder listed here that has no circle any more fails the
/// test too, so the list only shrinks.
const KNOWN: &[&str] = &[];

type Module = Vec<String>;

#[test]
fn no_import_circle_between_the_files_of_a_folder() {
    let crate_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tree = Tree::read(&crate_src);
    let arrows = tree.arrows();
    let circles = circles(&arrows);

    let mut report = String::new();
    let mut seen = BTreeSet::new();
    for circle in &circles {
        let folder = folder_name(&circle.folder);
        seen.insert(folder.clone());
        if KNOWN.contains(&folder.as_str()) {
            continue;
        }
        report.push_str(&circle.describe(&arrows));
    }
    for known in KNOWN {
        if !seen.contains(*known) {
            report.push_str(&format!(
                "{known} has no import circle any more: remove it from KNOWN in tests/in_process/layers.rs\n"
            ));
        }
    }
    assert!(report.is_empty(), "\n{report}");
}

/// The crate's modules, each with its file and the modules it imports.
struct Tree {
    files: BTreeMap<Module, PathBuf>,
    /// What a module's `pub use` makes visible: name -> defining module.
    reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

/// An arrow between two entries of `folder`, and the files behind it.
type Arrows = BTreeMap<(Module, String, String), BTreeSet<String>>;

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut files = BTreeMap::new();
        for file in rust_files(src) {
            let relative = file.strip_prefix(src).expect("under src");
            let mut module: Module = relative
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            // main.rs is the binary's crate: its `crate::` is not the
            // library's.
            if module == ["main"] {
                continue;
            }
            if module == ["lib"] {
                module.clear();
            }
            files.insert(module, file);
        }
        let mut tree = Tree {
            files,
            reexports: BTreeMap::new(),
        };
        let mut reexports = BTreeMap::new();
        for module in tree.files.keys() {
            let code = tree.code(module);
            let mut names = BTreeMap::new();
            for (public, path, name) in use_paths(&code) {
                if !public {
                    continue;
                }
                if let Some((target, _)) = tree.resolve_raw(module, &path) {
                    names.insert(name, target);
                }
            }
            reexports.insert(module.clone(), names);
        }
        tree.reexports = reexports;
        tree
    }

    /// The module's code without comments and without its trailing test
    /// module.
    fn code(&self, module: &Module) -> String {
        let text = fs::read_to_string(&self.files[module]).expect("readable source");
        let text = match text.find("#[cfg(test)]\nmod tests {") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        text.lines()
            .map(|line| match line.find("//") {
                Some(at) => &line[..at],
                None => line,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every import, as an arrow in the deepest folder holding both ends.
    fn arrows(&self) -> Arrows {
        let mut arrows = Arrows::new();
        for (module, file) in &self.files {
            let code = self.code(module);
            let mut paths: Vec<Vec<String>> =
                use_paths(&code).into_iter().map(|(_, p, _)| p).collect();
            paths.extend(inline_paths(&code));
            for path in paths {
                let Some(target) = self.resolve(module, &path) else {
                    continue;
                };
                let common = module
                    .iter()
                    .zip(&target)
                    .take_while(|(a, b)| a == b)
                    .count();
                if common == module.len() || common == target.len() {
                    continue;
                }
                let key = (
                    module[..common].to_vec(),
                    module[common].clone(),
                    target[common].clone(),
                );
                let shown = file.to_string_lossy();
                let shown = shown[shown.find("src/").unwrap_or(0)..].to_string();
                arrows.entry(key).or_default().insert(shown);
            }
        }
        arrows
    }

    /// The module `path` (seen from `from`) ends in, re-exports followed.
    fn resolve(&self, from: &Module, path: &[String]) -> Option<Module> {
        let (mut module, rest) = self.resolve_raw(from, path)?;
        // A name re-exported by the module is defined further down.
        if let Some(name) = rest.first() {
            let mut hops = 0;
            while let Some(target) = self.reexports.get(&module).and_then(|r| r.get(name)) {
                if *target == module || hops > 16 {
                    break;
                }
                module = target.clone();
                hops += 1;
            }
        }
        Some(module)
    }

    /// The deepest module `path` names, and the segments left after it.
    fn resolve_raw<'p>(&self, from: &Module, path: &'p [String]) -> Option<(Module, &'p [String])> {
        let (mut module, mut rest) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.clone(), &path[1..]),
            "super" => {
                let mut module = from.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop()?;
                    rest = &rest[1..];
                }
                (module, rest)
            }
            // A bare path in a `use` names a child module, or an external
            // crate (not ours to follow).
            child => {
                let mut module = from.clone();
                module.push(child.to_string());
                if !self.files.contains_key(&module) {
                    return None;
                }
                (module, &path[1..])
            }
        };
        while let Some(next) = rest.first() {
            let mut deeper = module.clone();
            deeper.push(next.clone());
            if !self.files.contains_key(&deeper) {
                break;
            }
            module = deeper;
            rest = &rest[1..];
        }
        Some((module, rest))
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("readable folder")
        .map(|e| e.expect("folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Each `use` tree of `code`, expanded into its paths, with whether the
/// `use` is public (`pub`, `pub(crate)`, `pub(super)`) and the name it
/// makes visible (the last segment, or what follows `as`).
fn use_paths(code: &str) -> Vec<(bool, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let last = before
            .rsplit(|c: char| c.is_whitespace() || matches!(c, ';' | '{' | '}'))
            .next()
            .unwrap_or("");
        let public = last == "pub" || last.starts_with("pub(");
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else {
            break;
        };
        let tree = &after[..end];
        // "use" in a string or an identifier is not a `use` tree.
        let is_tree = tree
            .chars()
            .all(|c| c.is_alphanumeric() || c.is_whitespace() || "_:{},*".contains(c));
        let paths = match is_tree {
            true => expand(tree, Vec::new()),
            false => Vec::new(),
        };
        for (path, name) in paths {
            out.push((public, path, name));
        }
        rest = &after[end..];
    }
    out
}

/// Where `word` starts in `text` as a whole word, followed by a space.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let starts = before.is_none_or(|c| !c.is_alphanumeric() && c != '_');
        if starts && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `a::{b, c::{d, e as f}}` under `prefix`, as full paths, each with the
/// name it is visible as.
fn expand(tree: &str, prefix: Vec<String>) -> Vec<(Vec<String>, String)> {
    let tree = tree.trim();
    let mut out = Vec::new();
    for part in split_top(tree) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        match part.find('{') {
            Some(open) => {
                let head = part[..open].trim().trim_end_matches("::");
                let close = part.rfind('}').filter(|c| *c > open).unwrap_or(part.len());
                let inner = &part[open + 1..close];
                let mut base = prefix.clone();
                base.extend(segments(head));
                out.extend(expand(inner, base));
            }
            None => {
                let mut halves = part.split(" as ");
                let head = halves.next().unwrap_or(part);
                let alias = halves.next().map(str::trim);
                let mut path = prefix.clone();
                path.extend(segments(head));
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                if path.last().is_some_and(|s| s == "*") {
                    path.pop();
                }
                let name = alias.map(str::to_string).or_else(|| path.last().cloned());
                if let Some(name) = name {
                    out.push((path, name));
                }
            }
        }
    }
    out
}

/// `tree` split at the commas outside braces.
fn split_top(tree: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    parts
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Paths written in code: `crate::a::b`, `super::x`, `self::y`.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            let path = segments(&code[at..end]);
            if path.len() > 1 {
                out.push(path);
            }
        }
    }
    out
}

/// Entries of one folder that import each other, directly or not.
struct Circle {
    folder: Module,
    entries: Vec<String>,
}

impl Circle {
    fn describe(&self, arrows: &Arrows) -> String {
        let mut text = format!(
            "import circle in {}: {}\n",
            folder_name(&self.folder),
            self.entries.join(", ")
        );
        for ((folder, from, to), files) in arrows {
            if *folder == self.folder && self.entries.contains(from) && self.entries.contains(to) {
                let files: Vec<_> = files.iter().map(String::as_str).collect();
                text.push_str(&format!("  {from} -> {to}  ({})\n", files.join(", ")));
            }
        }
        text
    }
}

fn folder_name(folder: &Module) -> String {
    let mut name = String::from("src");
    for part in folder {
        name.push('/');
        name.push_str(part);
    }
    name
}

/// The strongly connected groups of more than one entry, per folder.
fn circles(arrows: &Arrows) -> Vec<Circle> {
    let mut graphs: BTreeMap<&Module, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (folder, from, to) in arrows.keys() {
        graphs
            .entry(folder)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to);
    }
    let mut out = Vec::new();
    for (folder, graph) in graphs {
        let reach = |start: &str| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start];
            while let Some(node) = stack.pop() {
                for next in graph.get(node).into_iter().flatten() {
                    if seen.insert(*next) {
                        stack.push(next);
                    }
                }
            }
            seen
        };
        let mut placed: BTreeSet<String> = BTreeSet::new();
        for start in graph.keys() {
            if placed.contains(*start) {
                continue;
            }
            let group: Vec<String> = reach(start)
                .into_iter()
                .filter(|other| reach(other).contains(start))
                .map(str::to_string)
                .collect();
            if group.len() > 1 {
                placed.extend(group.iter().cloned());
                out.push(Circle {
                    folder: folder.clone(),
                    entries: group,
                });
            }
        }
    }
    out
}

#[test]
fn use_trees_are_expanded_into_paths() {
    let code = "pub(crate) use super::{a::{b, c as d}, e::*, self};\nuse crate::f::g;\n";
    let paths = use_paths(code);
    let shown: Vec<(bool, String, &str)> = paths
        .iter()
        .map(|(public, path, name)| (*public, path.join("::"), name.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            (true, "super::a::b".to_string(), "b"),
            (true, "super::a::c".to_string(), "d"),
            (true, "super::e".to_string(), "e"),
            (true, "super".to_string(), "super"),
            (false, "crate::f::g".to_string(), "g"),
        ]
    );
}

#[test]
fn a_circle_names_its_entries_and_the_files_behind_each_arrow() {
    let mut arrows = Arrows::new();
    let mail = vec!["mail".to_string()];
    for (from, to) in [
        ("outbox", "stats"),
        ("stats", "sender"),
        ("sender", "outbox"),
    ] {
        let file = format!("src/mail/{from}.rs");
        arrows
            .entry((mail.clone(), from.to_string(), to.to_string()))
            .or_default()
            .insert(file);
    }
    arrows
        .entry((mail.clone(), "maildir".to_string(), "message".to_string()))
        .or_default()
        .insert("src/mail/maildir.rs".to_string());
    let found = circles(&arrows);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].describe(&arrows),
        "import circle in src/mail: outbox, sender, stats\n  \
         outbox -> stats  (src/mail/outbox.rs)\n  \
         sender -> outbox  (src/mail/sender.rs)\n  \
         stats -> sender  (src/mail/stats.rs)\n"
    );
}
