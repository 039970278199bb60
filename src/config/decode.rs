//! From TOML text to the raw structs of `raw.rs`, one piece at a time,
//! reporting every structural problem (syntax, unknown key, wrong type).
//!
//! serde stops at the first error, so a file is never deserialized in one
//! go. The text is parsed once into a spanned tree ([`DeTable`]); then each
//! piece (a section of `config.toml`, one `[[maintenance]]` or `[[check]]`
//! entry) is deserialized on its own. When a piece fails, the offending key
//! is found in the tree by the error's span, reported with its full path,
//! removed from a working copy, and the piece is tried again, so a check
//! with three bad keys yields three errors, and the keys that were fine
//! still reach `resolve` for semantic checks.
//!
//! This file knows the *shape* of the files (which sections exist, that
//! `check` and `maintenance` are arrays of tables) but nothing about what a
//! value means; that is `resolve`.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

use super::error::Diagnostics;
use super::raw::{
    RawAlerting, RawAnnouncement, RawApi, RawCheck, RawChecksFile, RawConnectivity, RawHeartbeat,
    RawHistory, RawMaintenance, RawNotify, RawReplication, RawReport, RawRoute, RawSmtp,
    RawStatusPage, RawTop, RawVantage,
};
use super::source::Source;

/// One successfully decoded piece.
#[derive(Debug)]
pub(crate) struct Decoded<T> {
    pub value: T,
    /// The piece's span: for a `[section]` or `[[entry]]`, its header.
    pub span: Range<usize>,
    /// Top-level keys of the piece that were dropped because they were
    /// malformed (already reported). `resolve` must not then also call them
    /// missing.
    pub broken: BTreeSet<String>,
}

/// `config.toml`, section by section. A section that is absent or could
/// not be decoded at all is `None`.
#[derive(Debug)]
pub(crate) struct RawConfig {
    pub top: Option<Decoded<RawTop>>,
    pub api: Option<Decoded<RawApi>>,
    pub connectivity: Option<Decoded<RawConnectivity>>,
    pub alerting: Option<Decoded<RawAlerting>>,
    pub smtp: Option<Decoded<RawSmtp>>,
    pub report: Option<Decoded<RawReport>>,
    pub history: Option<Decoded<RawHistory>>,
    pub replication: Option<Decoded<RawReplication>>,
    pub heartbeat: Option<Decoded<RawHeartbeat>>,
    pub vantage: Option<Decoded<RawVantage>>,
    pub maintenance: Vec<Decoded<RawMaintenance>>,
    pub notify: Vec<Decoded<RawNotify>>,
    pub route: Vec<Decoded<RawRoute>>,
    pub status_page: Option<Decoded<RawStatusPage>>,
    pub announcement: Vec<Decoded<RawAnnouncement>>,
}

/// Decodes `config.toml`; `None` when it is not valid TOML (reported).
pub(crate) fn config(src: &Source, diag: &mut Diagnostics) -> Option<RawConfig> {
    let doc = parse(src, diag)?;
    let root = Spanned::new(doc.span(), DeValue::Table(doc.into_inner()));
    let top = piece(src, &root, &Place::top(), diag);
    let table = root.get_ref().as_table()?;
    let api = section(src, table, "api", diag);
    let connectivity = section(src, table, "connectivity", diag);
    let alerting = section(src, table, "alerting", diag);
    let smtp = section(src, table, "smtp", diag);
    let report = section(src, table, "report", diag);
    let history = section(src, table, "history", diag);
    let replication = section(src, table, "replication", diag);
    let heartbeat = section(src, table, "heartbeat", diag);
    let vantage = section(src, table, "vantage", diag);
    let status_page = section(src, table, "status_page", diag);
    Some(RawConfig {
        top,
        api,
        connectivity,
        alerting,
        smtp,
        report,
        history,
        replication,
        heartbeat,
        vantage,
        maintenance: entries(src, table, "maintenance", diag)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| piece(src, v, &Place::section(&format!("maintenance[{i}]")), diag))
            .collect(),
        notify: entries(src, table, "notify", diag)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| piece(src, v, &Place::section(&format!("notify[{i}]")), diag))
            .collect(),
        route: entries(src, table, "route", diag)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| piece(src, v, &Place::section(&format!("route[{i}]")), diag))
            .collect(),
        status_page,
        announcement: entries(src, table, "announcement", diag)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| {
                piece(src, v, &Place::section(&format!("announcement[{i}]")), diag)
            })
            .collect(),
    })
}

/// Decodes a checks file into its `[[check]]` entries, in file order;
/// `None` when it is not valid TOML (reported).
pub(crate) fn checks(src: &Source, diag: &mut Diagnostics) -> Option<Vec<Decoded<RawCheck>>> {
    let doc = parse(src, diag)?;
    let root = Spanned::new(doc.span(), DeValue::Table(doc.into_inner()));
    // Only for the unknown-key report; the entries are decoded below.
    piece::<RawChecksFile>(src, &root, &Place::top(), diag);
    let table = root.get_ref().as_table()?;
    let checks = entries(src, table, "check", diag)
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| piece(src, v, &Place::check(i, v), diag))
        .collect();
    Some(checks)
}

/// Parses the text, reporting the first syntax error. Later syntax errors
/// are not reported: toml's recovery after the first one mostly produces
/// echoes of it.
fn parse<'t>(src: &'t Source, diag: &mut Diagnostics) -> Option<Spanned<DeTable<'t>>> {
    match DeTable::parse(&src.text) {
        Ok(doc) => Some(doc),
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            diag.at(src, &span, format!("TOML syntax error: {}", e.message()));
            None
        }
    }
}

/// Decodes the `[name]` section, if present.
fn section<T: DeserializeOwned>(
    src: &Source,
    table: &DeTable<'_>,
    name: &str,
    diag: &mut Diagnostics,
) -> Option<Decoded<T>> {
    let value = table.get(name)?;
    if !expect_table(src, name, value, diag) {
        return None;
    }
    piece(src, value, &Place::section(name), diag)
}

/// Reports a section written as something other than a table
/// (`api = 5`); true when it is a table.
fn expect_table(
    src: &Source,
    name: &str,
    value: &Spanned<DeValue<'_>>,
    diag: &mut Diagnostics,
) -> bool {
    if value.get_ref().is_table() {
        return true;
    }
    let message = format!(
        "`{name}`: expected a table ([{name}]), found {}",
        describe(value.get_ref())
    );
    diag.at(src, &value.span(), message);
    false
}

/// The entries of an array of tables (`[[name]]`), reporting anything else.
fn entries<'v, 'i>(
    src: &Source,
    table: &'v DeTable<'i>,
    name: &str,
    diag: &mut Diagnostics,
) -> Vec<&'v Spanned<DeValue<'i>>> {
    let Some(value) = table.get(name) else {
        return Vec::new();
    };
    let all_tables = value
        .get_ref()
        .as_array()
        .filter(|a| a.iter().all(|v| v.get_ref().is_table()));
    match all_tables {
        Some(array) => array.iter().collect(),
        None => {
            let message = format!(
                "`{name}`: expected an array of tables ([[{name}]]), found {}",
                describe(value.get_ref())
            );
            diag.at(src, &value.span(), message);
            Vec::new()
        }
    }
}

/// Where a piece sits, for messages.
#[derive(Debug)]
struct Place {
    /// Key path of the piece itself: "" for the top level and for checks
    /// (whose keys are named without `check[3].`), "smtp", "maintenance[0]".
    prefix: String,
    /// Added to unknown-key messages: ` in check "site"`.
    context: String,
}

impl Place {
    fn top() -> Self {
        Self {
            prefix: String::new(),
            context: String::new(),
        }
    }

    fn section(name: &str) -> Self {
        Self {
            prefix: name.to_owned(),
            context: String::new(),
        }
    }

    /// A check is named by its `name` when that is a string, else by its
    /// position in the file (1-based, as people count).
    fn check(index: usize, value: &Spanned<DeValue<'_>>) -> Self {
        let context = match value
            .get_ref()
            .get("name")
            .and_then(|n| n.get_ref().as_str())
        {
            Some(name) => format!(" in check {name:?}"),
            None => format!(" in check #{}", index + 1),
        };
        Self {
            prefix: String::new(),
            context,
        }
    }
}

/// Deserializes one piece, reporting every serde error in it (see the
/// module docs for the retry loop). `None` when nothing usable is left.
fn piece<T: DeserializeOwned>(
    src: &Source,
    value: &Spanned<DeValue<'_>>,
    place: &Place,
    diag: &mut Diagnostics,
) -> Option<Decoded<T>> {
    let mut work = value.clone();
    let mut broken = BTreeSet::new();
    // Every round either succeeds, gives up, or removes one key, so this
    // ends after at most as many rounds as the piece has keys.
    loop {
        let error = match T::deserialize(ValueDeserializer::from(work.clone())) {
            Ok(decoded) => {
                return Some(Decoded {
                    value: decoded,
                    span: value.span(),
                    broken,
                })
            }
            Err(error) => error,
        };
        let span = error.span().unwrap_or_else(|| work.span());
        let problem = explain(&work, error.message(), &span, place);
        diag.at(src, &span, problem.message);
        let culprit = problem.culprit?;
        if !remove(&mut work, &culprit) {
            return None;
        }
        if let Some(Seg::Key(top)) = culprit.first() {
            broken.insert(top.clone());
        }
    }
}

/// A serde error in words that name the key.
#[derive(Debug)]
struct Problem {
    message: String,
    /// The key to drop before trying again; `None` to give up on the piece.
    culprit: Option<Vec<Seg>>,
}

fn explain(
    root: &Spanned<DeValue<'_>>,
    message: &str,
    span: &Range<usize>,
    place: &Place,
) -> Problem {
    if let Some((name, known)) = unknown_field(message) {
        // deny_unknown_fields errors carry the span of the key itself.
        let path = find_key(root, span).unwrap_or_else(|| vec![Seg::Key(name.clone())]);
        let mut message = format!(
            "unknown key `{}`{}",
            render(&place.prefix, &path),
            place.context
        );
        match closest(&name, &known) {
            Some(near) => message.push_str(&format!(": did you mean `{near}`?")),
            None if !known.is_empty() => {
                message.push_str(&format!(" (known keys: {})", known.join(", ")))
            }
            None => {}
        }
        return Problem {
            message,
            culprit: Some(path),
        };
    }
    let (path, found) = match find_value(root, span) {
        Some((path, value)) => (path, Some(value)),
        None => (Vec::new(), None),
    };
    let key = render(&place.prefix, &path);
    let what = reword(message, found);
    let message = match key.is_empty() {
        true => what,
        false => format!("`{key}`: {what}"),
    };
    // Drop the innermost key holding the bad value: for `status = [200,
    // "x"]` that is `status`, the array element itself cannot be removed
    // without changing what the other elements mean.
    let culprit = path
        .iter()
        .rposition(|s| matches!(s, Seg::Key(_)))
        .map(|last| path[..=last].to_vec());
    Problem { message, culprit }
}

/// `unknown field `x`, expected one of `a`, `b`` -> ("x", ["a", "b"]).
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    if !message.starts_with("unknown field `") {
        return None;
    }
    let mut names = backticked(message).into_iter();
    let name = names.next()?;
    Some((name, names.collect()))
}

/// The known key `name` is most likely a typo of, if one is close enough
/// (Jaro-Winkler, which weighs a shared start: `stat_dir` for `state_dir`,
/// `repeats` for `repeat`). Below the threshold the operator gets the whole
/// list rather than a guess that sends them the wrong way.
fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    const CLOSE: f64 = 0.85;
    known
        .iter()
        .map(|key| (strsim::jaro_winkler(name, key), key))
        .filter(|(score, _)| *score >= CLOSE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, key)| key.as_str())
}

/// The `quoted` words of a serde message, in order. serde lists the
/// expected names as "`a`", "`a` or `b`" or "one of `a`, `b`, `c`"
/// depending on how many there are; the backticks are the stable part.
pub(crate) fn backticked(message: &str) -> Vec<String> {
    message
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Rewords serde's "invalid type: X, expected Y" in TOML's vocabulary
/// ("array", "table", not "sequence", "struct RawExpect"), describing the
/// value actually found from the tree rather than from serde's view of it
/// (serde sees a TOML date-time as a map, for one).
fn reword(message: &str, found: Option<&DeValue<'_>>) -> String {
    let type_error =
        message.starts_with("invalid type: ") || message.starts_with("invalid value: ");
    let expected = message.rsplit_once(", expected ").map(|(_, e)| e);
    match (type_error, expected, found) {
        (true, Some(expected), Some(found)) => {
            format!(
                "expected {}, found {}",
                toml_terms(expected),
                describe(found)
            )
        }
        _ => message.to_owned(),
    }
}

fn toml_terms(expected: &str) -> String {
    let range = |max: u64| format!("an integer from 0 to {max}");
    match expected {
        "a sequence" => "an array".to_owned(),
        "a map" => "a table".to_owned(),
        "a borrowed string" => "a string".to_owned(),
        "u8" => range(u8::MAX.into()),
        "u16" => range(u16::MAX.into()),
        "u32" => range(u32::MAX.into()),
        "u64" | "usize" => "a non-negative integer".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".to_owned(),
        e if e.starts_with("struct ") => "a table".to_owned(),
        e => e.to_owned(),
    }
}

/// A value as a person would name it: `a string "200"`, `an integer 5`.
fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => format!("a string {:?}", abbreviate(s)),
        DeValue::Integer(i) => format!("an integer {i}"),
        DeValue::Float(f) => format!("a float {f}"),
        DeValue::Boolean(b) => format!("a boolean {b}"),
        DeValue::Datetime(d) => format!("a date-time {d}"),
        DeValue::Array(_) => "an array".to_owned(),
        DeValue::Table(_) => "a table".to_owned(),
    }
}

/// Long strings (a pasted certificate, say) are cut so the message stays on
/// one readable line.
fn abbreviate(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_owned(),
    }
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// `prefix` + path as written in TOML: `expect.status[1]`,
/// `expect.headers."x.y"`.
fn render(prefix: &str, path: &[Seg]) -> String {
    let mut out = prefix.to_owned();
    for seg in path {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key_as_written(key));
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A key as it would be written in TOML: bare when it can be, quoted
/// otherwise.
pub(crate) fn key_as_written(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match bare {
        true => key.to_owned(),
        false => format!("{key:?}"),
    }
}

/// One value of the tree, with its path and the span of the key naming it
/// (array elements have none).
struct Node<'v, 'i> {
    path: Vec<Seg>,
    key_span: Option<Range<usize>>,
    value: &'v Spanned<DeValue<'i>>,
}

/// Every value below `root`, parents before children.
fn nodes<'v, 'i>(root: &'v Spanned<DeValue<'i>>) -> Vec<Node<'v, 'i>> {
    let mut out = Vec::new();
    collect_children(root, &[], &mut out);
    out
}

fn collect_children<'v, 'i>(
    value: &'v Spanned<DeValue<'i>>,
    path: &[Seg],
    out: &mut Vec<Node<'v, 'i>>,
) {
    let child = |seg: Seg, key_span, value| {
        let mut path = path.to_vec();
        path.push(seg);
        Node {
            path,
            key_span,
            value,
        }
    };
    let children: Vec<Node<'v, 'i>> = match value.get_ref() {
        DeValue::Table(table) => table
            .iter()
            .map(|(k, v)| child(Seg::Key(k.get_ref().to_string()), Some(k.span()), v))
            .collect(),
        DeValue::Array(array) => array
            .iter()
            .enumerate()
            .map(|(i, v)| child(Seg::Index(i), None, v))
            .collect(),
        _ => Vec::new(),
    };
    for node in children {
        let (value, path) = (node.value, node.path.clone());
        out.push(node);
        collect_children(value, &path, out);
    }
}

/// The path of the key whose own span is `span`.
///
/// The tree is searched whole rather than pruned by containment: a table
/// opened by a `[check.expect]` header has the header as its span, while
/// its keys are on the following lines.
fn find_key(root: &Spanned<DeValue<'_>>, span: &Range<usize>) -> Option<Vec<Seg>> {
    nodes(root)
        .into_iter()
        .find(|n| n.key_span.as_ref() == Some(span))
        .map(|n| n.path)
}

/// The deepest value whose span is `span`, and its path (empty for the
/// root itself). Deepest, because a dotted key (`a.b = 1`) makes a table
/// `a` whose span is the key `a`.
fn find_value<'v, 'i>(
    root: &'v Spanned<DeValue<'i>>,
    span: &Range<usize>,
) -> Option<(Vec<Seg>, &'v DeValue<'i>)> {
    let deepest = nodes(root)
        .into_iter()
        .filter(|n| n.value.span() == *span)
        .max_by_key(|n| n.path.len());
    match deepest {
        Some(node) => Some((node.path, node.value.get_ref())),
        None => (root.span() == *span).then(|| (Vec::new(), root.get_ref())),
    }
}

/// Removes the key at `path` from `root`; false when it is not there.
fn remove(root: &mut Spanned<DeValue<'_>>, path: &[Seg]) -> bool {
    let Some((Seg::Key(last), parents)) = path.split_last() else {
        return false;
    };
    let mut node = root.get_mut();
    for seg in parents {
        let child = match (node, seg) {
            (DeValue::Table(t), Seg::Key(k)) => t.get_mut(k.as_str()),
            (DeValue::Array(a), Seg::Index(i)) => a.get_mut(*i),
            _ => None,
        };
        match child {
            Some(child) => node = child.get_mut(),
            None => return false,
        }
    }
    match node {
        DeValue::Table(t) => t.remove(last.as_str()).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn source(text: &str) -> Source {
        Source::new(Path::new("c.toml"), text.to_owned(), 0)
    }

    fn messages(src: &Source, run: impl FnOnce(&Source, &mut Diagnostics)) -> Vec<String> {
        let mut diag = Diagnostics::default();
        run(src, &mut diag);
        match diag.finish(()) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.0.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn renders_paths_as_written_in_toml() {
        let path = [
            Seg::Key("expect".into()),
            Seg::Key("headers".into()),
            Seg::Key("x.y".into()),
        ];
        assert_eq!(render("", &path), "expect.headers.\"x.y\"");
        let path = [Seg::Key("to".into()), Seg::Index(1)];
        assert_eq!(render("alerting", &path), "alerting.to[1]");
    }

    #[test]
    fn every_bad_key_of_one_check_is_reported() {
        let src = source(
            "[[check]]\nname = \"site\"\nbogus = 1\ntimeout = 5\n\n[check.expect]\nstatus = \"200\"\n",
        );
        let got = messages(&src, |src, diag| {
            let checks = checks(src, diag).unwrap_or_default();
            assert_eq!(checks.len(), 1, "the check survives with its good keys");
            assert!(checks[0].value.name.is_some());
            let broken: Vec<_> = checks[0].broken.iter().map(String::as_str).collect();
            assert_eq!(broken, ["bogus", "expect", "timeout"]);
        });
        assert_eq!(
            got,
            [
                "c.toml:3:1: unknown key `bogus` in check \"site\" (known keys: name, kind, url, every, schedule, timeout, resolve, labels, tls, alert, follow_redirects, redirect_to_private, redact_headers, expect, origin, method, request_headers, deny_origins, allow_any_origin, credentials, min_max_age, expose_headers, query, resolvers, dns, region, key_prefix, content_type, access_key_id_file, access_key_id_credential, secret_access_key_file, secret_access_key_credential, address, server_name, require_starttls, domain, rdap_url, rdap)",
                "c.toml:4:11: `timeout`: expected a duration such as \"30s\", found an integer 5",
                "c.toml:7:10: `expect.status`: expected an array, found a string \"200\"",
            ]
        );
    }

    #[test]
    fn a_close_known_key_is_suggested_and_a_far_one_is_not() {
        let known: Vec<String> = ["enabled", "to", "from", "failure_threshold", "repeat"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            closest("failure_treshold", &known),
            Some("failure_threshold")
        );
        assert_eq!(closest("repeats", &known), Some("repeat"));
        assert_eq!(closest("recipients", &known), None);
        assert_eq!(closest("x", &known), None);
        assert_eq!(closest("anything", &[]), None);
    }

    #[test]
    fn array_elements_are_named_by_index() {
        let src = source("[alerting]\nto = [\"a@b.c\", 5]\n");
        let got = messages(&src, |src, diag| {
            let raw = config(src, diag);
            assert!(raw.is_some_and(|r| r.alerting.is_some_and(|a| a.broken.contains("to"))));
        });
        assert_eq!(
            got,
            ["c.toml:2:16: `alerting.to[1]`: expected a string, found an integer 5"]
        );
    }

    #[test]
    fn sections_must_be_tables_and_entries_arrays_of_tables() {
        let src = source("api = 5\nmaintenance = { checks = [] }\n");
        let got = messages(&src, |src, diag| {
            config(src, diag);
        });
        assert_eq!(
            got,
            [
                "c.toml:1:7: `api`: expected a table ([api]), found an integer 5",
                "c.toml:2:15: `maintenance`: expected an array of tables ([[maintenance]]), found a table",
            ]
        );
    }

    #[test]
    fn out_of_range_integers_say_the_range() {
        let src = source("[smtp]\nport = 70000\n");
        let got = messages(&src, |src, diag| {
            config(src, diag);
        });
        assert_eq!(
            got,
            ["c.toml:2:8: `smtp.port`: expected an integer from 0 to 65535, found an integer 70000"]
        );
    }

    #[test]
    fn syntax_errors_have_toml_positions() {
        let src = source("a = 1\nb = \n");
        let got = messages(&src, |src, diag| {
            assert!(config(src, diag).is_none());
        });
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("c.toml:2:5: TOML syntax error: "),
            "{got:?}"
        );
    }

    #[test]
    fn serde_name_lists_of_every_length() {
        let parse = |m: &str| unknown_field(m);
        assert_eq!(
            parse("unknown field `x`, there are no fields"),
            Some(("x".into(), vec![]))
        );
        assert_eq!(
            parse("unknown field `x`, expected `a`"),
            Some(("x".into(), vec!["a".into()]))
        );
        assert_eq!(
            parse("unknown field `x`, expected `a` or `b`"),
            Some(("x".into(), vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            parse("unknown field `x`, expected one of `a`, `b`, `c`"),
            Some(("x".into(), vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(parse("invalid type: string \"x\", expected u16"), None);
    }

    #[test]
    fn long_strings_are_abbreviated() {
        let long = "x".repeat(100);
        assert_eq!(abbreviate(&long).len(), 43);
        assert_eq!(abbreviate("short"), "short");
    }
}
