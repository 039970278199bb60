//! The resolution context ([`Cx`]) and the conversions every section
//! shares: one written string -> one typed value, or one message naming the
//! key, at the value's position.

use std::fmt::Display;
use std::fs;
use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use lettre::message::Mailbox;
use regex::Regex;
use time::OffsetDateTime;
use toml::Spanned;
use url::Url;

use crate::clock::{cron_before, to_chrono};

use crate::config::credentials::{self, CredentialDirs};
use crate::config::decode::Decoded;
use crate::config::error::Diagnostics;
use crate::config::raw::{CronText, DurationText};
use crate::config::source::Source;

// Appended to the messages of values people often get wrong: the reason
// from the parsing crate alone rarely says what *would* be accepted.
const CRON_HELP: &str =
    "cron crate syntax with seconds: sec min hour day-of-month month day-of-week [year], \
     e.g. \"0 0 7 * * *\" for 07:00 every day";
const DURATION_HELP: &str = "humantime syntax, e.g. \"30s\", \"5m\", \"4h\", \"400d\"";
const MAILBOX_HELP: &str = "expected \"name@example.com\" or \"Name <name@example.com>\"";

/// Resolution context for one section or file: where problems go, how
/// keys are named in messages, where relative paths start.
pub(super) struct Cx<'a> {
    src: &'a Source,
    diag: &'a mut Diagnostics,
    base: &'a Path,
    /// "smtp." while resolving `[smtp]`, "" at the top level and in checks
    /// (whose keys are named without `check[3].`).
    prefix: String,
    /// When the files are read: a cron expression must fire after it.
    now: OffsetDateTime,
    /// Where `*_credential` names are looked up.
    credentials: &'a CredentialDirs,
}

impl<'a> Cx<'a> {
    /// Top-level keys of `src`; relative paths against `base`; schedules
    /// judged at `now`; credentials looked up in `credentials`.
    pub(super) fn new(
        src: &'a Source,
        diag: &'a mut Diagnostics,
        base: &'a Path,
        now: OffsetDateTime,
        credentials: &'a CredentialDirs,
    ) -> Self {
        Self {
            src,
            diag,
            base,
            prefix: String::new(),
            now,
            credentials,
        }
    }

    /// The same file, keys prefixed with `name.`. Borrows `self` mutably,
    /// so sections are resolved one after another, each reporting into the
    /// same collector.
    pub(super) fn section(&mut self, name: &str) -> Cx<'_> {
        Cx {
            src: self.src,
            diag: self.diag,
            base: self.base,
            prefix: format!("{name}."),
            now: self.now,
            credentials: self.credentials,
        }
    }

    /// "smtp." inside `[smtp]`: for messages that name their keys
    /// themselves.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Reports "`key`: message" at `span`.
    pub(super) fn error(&mut self, span: &Range<usize>, key: &str, message: impl Display) {
        let message = format!("`{}{key}`: {message}", self.prefix);
        self.diag.at(self.src, span, message);
    }

    /// Reports `message` as it is, for messages that name their keys
    /// themselves.
    pub(super) fn report(&mut self, span: &Range<usize>, message: String) {
        self.diag.at(self.src, span, message);
    }

    /// Reports `message` about the whole file (shown at 1:1): for what is
    /// wrong because something is missing from it.
    pub(super) fn file_error(&mut self, message: String) {
        self.diag.file(self.src.rank, &self.src.path, message);
    }

    /// Warns "`key`: message" at `span` (see [`Diagnostics::warn_at`]).
    pub(super) fn warn(&mut self, span: &Range<usize>, key: &str, message: impl Display) {
        let message = format!("`{}{key}`: {message}", self.prefix);
        self.diag.warn_at(self.src, span, message);
    }

    /// "FILE:LINE:COL" of a span, to refer to it from another message.
    pub(super) fn location(&self, span: &Range<usize>) -> String {
        let (line, col) = self.src.span_position(span);
        format!("{}:{line}:{col}", self.src.path.display())
    }

    /// The value of a required key, or a report at the table's header. A
    /// key that was present but malformed was reported by `decode` and is
    /// not called missing.
    pub(super) fn required<'v, T, P>(
        &mut self,
        piece: &Decoded<P>,
        key: &str,
        value: Option<&'v T>,
        context: &str,
    ) -> Option<&'v T> {
        if value.is_none() && !piece.broken.contains(key) {
            let message = format!("missing key `{}{key}`{context}", self.prefix);
            self.diag.at(self.src, &piece.span, message);
        }
        value
    }

    /// Two keys that only make sense together.
    pub(super) fn both_or_neither<A, B>(
        &mut self,
        a: (&str, Option<&Spanned<A>>),
        b: (&str, Option<&Spanned<B>>),
    ) {
        let (alone, other, span) = match (a.1, b.1) {
            (Some(x), None) => (a.0, b.0, x.span()),
            (None, Some(y)) => (b.0, a.0, y.span()),
            _ => return,
        };
        let message = format!("set without `{}{other}`; give both or neither", self.prefix);
        self.error(&span, alone, message);
    }

    /// A path as written, made relative to the file it is written in.
    pub(super) fn path(&self, value: &str) -> PathBuf {
        self.base.join(value)
    }

    /// A file that must exist now (CA bundles, `*_file` secrets): better a
    /// validation error than a daemon that starts and fails its first
    /// handshake or delivery.
    pub(super) fn file(&mut self, key: &str, value: &Spanned<String>) -> Option<PathBuf> {
        let path = self.path(value.get_ref());
        let problem = match fs::metadata(&path) {
            Ok(meta) if !meta.is_dir() => return Some(path),
            Ok(_) => format!("{} is a directory, not a file", path.display()),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                format!("file {} does not exist", path.display())
            }
            Err(e) => format!("cannot access file {}: {e}", path.display()),
        };
        self.error(&value.span(), key, problem);
        None
    }

    /// A file holding a secret (a token, a password, a key): as
    /// [`Cx::file`], and a warning naming the file and its mode when its
    /// group or others may read or write it.
    pub(super) fn secret_file(&mut self, key: &str, value: &Spanned<String>) -> Option<PathBuf> {
        let path = self.file(key, value)?;
        self.warn_if_shared(key, value, &path);
        Some(path)
    }

    /// Warns when the group or others may read or write the secret at
    /// `path`, naming its mode and the command that fixes it.
    fn warn_if_shared(&mut self, key: &str, value: &Spanned<String>, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                let who = match (mode & 0o070 != 0, mode & 0o007 != 0) {
                    (true, true) => "its group and others",
                    (true, false) => "its group",
                    _ => "others",
                };
                let message = format!(
                    "{} holds a secret but {who} may read it (mode {mode:04o}); run `chmod 600 {}`",
                    path.display(),
                    path.display()
                );
                self.warn(&value.span(), key, message);
            }
        }
    }

    /// A secret given either as `{stem}_file = "PATH"` or as
    /// `{stem}_credential = "NAME"` (see `config/credentials.rs`): the
    /// path of the file that holds it, checked as [`Cx::secret_file`]
    /// checks one. Both at once is an error: which one wins would be a
    /// guess.
    pub(super) fn secret(
        &mut self,
        stem: &str,
        file: Option<&Spanned<String>>,
        credential: Option<&Spanned<String>>,
    ) -> Option<PathBuf> {
        let file_key = format!("{stem}_file");
        let credential_key = format!("{stem}_credential");
        match (file, credential) {
            (None, None) => None,
            (Some(file), None) => self.secret_file(&file_key, file),
            (None, Some(name)) => self.credential(&credential_key, name),
            (Some(file), Some(name)) => {
                let message = format!(
                    "set together with `{}{file_key}` at {}; give the secret one way: keep `{credential_key}` and remove `{file_key}`, or the other way round",
                    self.prefix,
                    self.location(&file.span())
                );
                self.error(&name.span(), &credential_key, message);
                None
            }
        }
    }

    /// `{key} = "NAME"`: the file NAME stands for, which must exist.
    fn credential(&mut self, key: &str, value: &Spanned<String>) -> Option<PathBuf> {
        let name = value.get_ref();
        if let Some(problem) = credentials::name_problem(name) {
            self.error(&value.span(), key, problem);
            return None;
        }
        let Some(path) = self.credentials.find(name) else {
            let message = self.credentials.missing_help(name);
            self.error(&value.span(), key, message);
            return None;
        };
        if path.is_dir() {
            let message = format!("{} is a directory, not a file", path.display());
            self.error(&value.span(), key, message);
            return None;
        }
        self.warn_if_shared(key, value, &path);
        Some(path)
    }

    /// A humantime duration. Its error is kept verbatim: humantime names the
    /// unit it did not understand and the ones it would.
    pub(super) fn duration(
        &mut self,
        key: &str,
        value: &Spanned<DurationText>,
    ) -> Option<Duration> {
        let text = &value.get_ref().0;
        humantime::parse_duration(text)
            .map_err(|e| {
                let message = format!("invalid duration {text:?}: {e} ({DURATION_HELP})");
                self.error(&value.span(), key, message);
            })
            .ok()
    }

    /// A duration from `min` to `max`, both included. Every duration key
    /// has both bounds (`config/limits.rs`): the maximum is what keeps a
    /// deadline computed from it inside the calendar.
    pub(super) fn duration_within(
        &mut self,
        key: &str,
        value: &Spanned<DurationText>,
        min: Duration,
        max: Duration,
    ) -> Option<Duration> {
        let duration = self.duration(key, value)?;
        let (comparison, bound) = match duration {
            d if d < min => ("shorter than the minimum", min),
            d if d > max => ("longer than the maximum", max),
            d => return Some(d),
        };
        let message = format!(
            "{:?} is {comparison} of {}",
            value.get_ref().0,
            humantime::format_duration(bound)
        );
        self.error(&value.span(), key, message);
        None
    }

    /// A size in bytes written as a whole number and a binary unit
    /// ("64 MiB"), within `min..=max`.
    pub(super) fn size_within(
        &mut self,
        key: &str,
        value: &Spanned<String>,
        min: usize,
        max: usize,
    ) -> Option<usize> {
        let text = value.get_ref();
        let Some(size) = parse_size(text) else {
            let message = format!(
                "{text:?} is not a size: write a whole number and B, KiB, MiB or GiB, e.g. \"64 MiB\""
            );
            self.error(&value.span(), key, message);
            return None;
        };
        let (comparison, bound) = match size {
            s if s < min => ("less than the minimum", min),
            s if s > max => ("more than the maximum", max),
            s => return Some(s),
        };
        let message = format!("{text:?} is {comparison} of {} MiB", bound / (1024 * 1024));
        self.error(&value.span(), key, message);
        None
    }

    /// An optional duration with its default; a wrong value is reported
    /// and replaced by the default so resolution can go on.
    pub(super) fn duration_or(
        &mut self,
        key: &str,
        value: Option<&Spanned<DurationText>>,
        default: Duration,
        min: Duration,
        max: Duration,
    ) -> Duration {
        value
            .and_then(|v| self.duration_within(key, v, min, max))
            .unwrap_or(default)
    }

    /// A cron expression, cron crate syntax (six or seven fields, seconds
    /// first), which differs from crontab's five fields: the commonest
    /// mistake, so the message always shows the expected form.
    ///
    /// It must also fire after now: one that never does (a past year, the
    /// 30th of February) parses, and would leave a check, the report or a
    /// maintenance window silently idle.
    pub(super) fn cron(&mut self, key: &str, value: &Spanned<CronText>) -> Option<cron::Schedule> {
        let text = &value.get_ref().0;
        let schedule = cron::Schedule::from_str(text)
            .map_err(|e| {
                let message = format!(
                    "invalid cron expression {text:?}{} ({CRON_HELP})",
                    cron_reason(text, &e)
                );
                self.error(&value.span(), key, message);
            })
            .ok()?;
        match never_fires(&schedule, self.now) {
            None => Some(schedule),
            Some(why) => {
                self.error(&value.span(), key, format!("{text:?} never fires: {why}"));
                None
            }
        }
    }

    /// A regex, compiled once here so no probe can meet an invalid one.
    pub(super) fn regex(&mut self, key: &str, value: &Spanned<String>) -> Option<Regex> {
        Regex::new(value.get_ref())
            .map_err(|e| {
                let message = format!("invalid regex: {}", regex_reason(&e));
                self.error(&value.span(), key, message);
            })
            .ok()
    }

    /// Any URL with a host. The URL itself is not repeated in messages: it
    /// may carry a secret (a heartbeat UUID, a presigned query).
    pub(super) fn url(&mut self, key: &str, value: &Spanned<String>) -> Option<Url> {
        self.url_with_scheme(key, value, "a scheme such as s3://")
    }

    /// [`Cx::url`]; a URL written without its scheme ("example.com/")
    /// is told to start with `scheme` rather than the `url` crate's
    /// "relative URL without a base".
    pub(super) fn url_with_scheme(
        &mut self,
        key: &str,
        value: &Spanned<String>,
        scheme: &str,
    ) -> Option<Url> {
        let url = match Url::parse(value.get_ref()) {
            Ok(url) => url,
            Err(url::ParseError::RelativeUrlWithoutBase) => {
                self.error(&value.span(), key, format!("must start with {scheme}"));
                return None;
            }
            Err(e) => {
                self.error(&value.span(), key, format!("invalid URL: {e}"));
                return None;
            }
        };
        if url.host_str().is_none_or(str::is_empty) {
            self.error(&value.span(), key, "URL has no host");
            return None;
        }
        Some(url)
    }

    /// An http or https URL with a host.
    pub(super) fn web_url(&mut self, key: &str, value: &Spanned<String>) -> Option<Url> {
        let url = self.url_with_scheme(key, value, "https:// (or http://)")?;
        if !matches!(url.scheme(), "http" | "https") {
            let message = format!("must be an http or https URL, not {:?}", url.scheme());
            self.error(&value.span(), key, message);
            return None;
        }
        Some(url)
    }

    /// `name@example.com` or `Name <name@example.com>`.
    pub(super) fn mailbox(&mut self, key: &str, value: &Spanned<String>) -> Option<Mailbox> {
        Mailbox::from_str(value.get_ref())
            .map_err(|_| {
                // lettre's error says only "Invalid input".
                let message = format!("invalid mailbox {:?}: {MAILBOX_HELP}", value.get_ref());
                self.error(&value.span(), key, message);
            })
            .ok()
    }

    /// A list of mailboxes, each named by its index in messages.
    pub(super) fn mailboxes(
        &mut self,
        key: &str,
        values: Option<&[Spanned<String>]>,
    ) -> Vec<Mailbox> {
        values
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter_map(|(i, v)| self.mailbox(&format!("{key}[{i}]"), v))
            .collect()
    }
}

/// The cron crate's errors are its input, a caret line, then the reason
/// (sometimes none); keep the reason, and explain the most common mistake,
/// a five-field Unix crontab line, outright.
fn cron_reason(text: &str, error: &cron::error::Error) -> String {
    let fields = text.split_whitespace().count();
    if !(6..=7).contains(&fields) {
        return format!(": it has {fields} fields, this syntax has 6 or 7");
    }
    let message = error.to_string();
    let reason = message
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && *l != text.trim() && !l.chars().all(|c| c == '^'));
    match reason {
        Some(reason) => format!(": {reason}"),
        None => String::new(),
    }
}

/// Why `schedule` has no time after `now`, or `None` when it has one. The
/// message names the last time it had, not `now`, so it is the same from
/// one run to the next.
fn never_fires(schedule: &cron::Schedule, now: OffsetDateTime) -> Option<String> {
    if schedule.after(&to_chrono(now)).next().is_some() {
        return None;
    }
    Some(match cron_before(schedule, now).next() {
        Some(last) => format!(
            "it has no time after now (its last was {} {:02}:{:02}:{:02} UTC)",
            last.date(),
            last.hour(),
            last.minute(),
            last.second()
        ),
        None => "no date matches it".to_string(),
    })
}

/// regex's errors repeat the pattern with a caret; the last line,
/// `error: ...`, is the reason.
fn regex_reason(error: &regex::Error) -> String {
    let message = error.to_string();
    let reason = message
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .or_else(|| message.lines().next());
    reason.unwrap_or("not understood").to_owned()
}

/// "64 MiB", "64MiB", "512 KiB", "1 GiB", "1048576 B" in bytes.
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: usize = number.parse().ok()?;
    let unit: usize = match unit.trim() {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_a_whole_number_and_a_binary_unit() {
        assert_eq!(parse_size("64 MiB"), Some(64 << 20));
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1 GiB"), Some(1 << 30));
        assert_eq!(parse_size("512 KiB"), Some(512 << 10));
        assert_eq!(parse_size("1048576 B"), Some(1 << 20));
        for wrong in ["64", "64 MB", "1.5 MiB", "MiB", "-1 MiB", ""] {
            assert_eq!(parse_size(wrong), None, "{wrong:?}");
        }
    }

    #[test]
    fn cron_reasons() {
        let reason = |text: &str| match cron::Schedule::from_str(text) {
            Ok(_) => None,
            Err(e) => Some(cron_reason(text, &e)),
        };
        assert_eq!(
            reason("0 7 * * *").as_deref(),
            Some(": it has 5 fields, this syntax has 6 or 7")
        );
        let hours = reason("0 0 25 * * *").unwrap_or_default();
        assert!(hours.contains("25"), "{hours}");
        assert_eq!(reason("0 0 7 * * *"), None);
    }

    #[test]
    fn a_cron_with_no_time_after_now_never_fires() {
        let cron = |text: &str| cron::Schedule::from_str(text).unwrap();
        let now = time::macros::datetime!(2026-11-30 12:00 UTC);
        assert_eq!(never_fires(&cron("0 0 7 * * *"), now), None);
        assert_eq!(
            never_fires(&cron("0 0 0 1 1 * 2020"), now).as_deref(),
            Some("it has no time after now (its last was 2020-01-01 00:00:00 UTC)")
        );
        // The last time of a past year is its last day, whatever today is
        // (the cron crate alone would say 2020-11-30).
        assert_eq!(
            never_fires(&cron("0 30 7 * * * 2020"), now).as_deref(),
            Some("it has no time after now (its last was 2020-12-31 07:30:00 UTC)")
        );
        assert_eq!(
            never_fires(&cron("0 0 20 * * Mon-Fri 2019-2021"), now).as_deref(),
            Some("it has no time after now (its last was 2021-12-31 20:00:00 UTC)")
        );
        // A time later today still fires; one that passed an hour ago, no.
        assert_eq!(never_fires(&cron("0 0 13 30 11 * 2026"), now), None);
        assert!(never_fires(&cron("0 0 11 30 11 * 2026"), now).is_some());
        assert_eq!(
            never_fires(&cron("0 0 0 30 2 *"), now).as_deref(),
            Some("no date matches it")
        );
    }

    #[test]
    fn regex_reason_is_the_error_line() {
        // Built at run time: clippy rejects invalid regex literals.
        let pattern = String::from("(abc");
        let e = Regex::new(&pattern).err();
        assert_eq!(
            e.map(|e| regex_reason(&e)).as_deref(),
            Some("unclosed group")
        );
    }
}
