//! What `vigie check` prints: a table for people, the DESIGN.md JSON for
//! scripts. Pure functions from outcomes to text.
//!
//! Every cell is escaped for the terminal (`sanitize::escape_controls`):
//! new outcomes are sanitised where they were captured, but a store or a
//! daemon written by an older vigie may still hold a certificate subject
//! with escape sequences in it. `main` passes all output through
//! [`sanitize::terminal`] as well.

use std::fmt::Write;
use std::io;

use crate::cert;
use crate::outcome::Outcome;
use crate::sanitize;

/// `{"checks": [...]}`, pretty-printed, safe for a terminal, with a final
/// line break: the text [`JsonWriter`] writes.
pub fn json(outcomes: &[Outcome]) -> String {
    let mut writer = JsonWriter::new(Vec::new());
    for outcome in outcomes {
        writer.push(outcome);
    }
    let bytes = writer.finish().unwrap_or_default();
    // Only `str`s and ASCII punctuation were written into the vector.
    String::from_utf8(bytes).unwrap_or_default()
}

/// `vigie check --json` written one outcome at a time, as the outcomes
/// come: the output is the text of `serde_json::to_string_pretty` of
/// `{"checks": [...]}` and a line break, but only one outcome's JSON is
/// held at a time instead of the whole document and its copies.
///
/// Each outcome is pretty-printed on its own and indented to its place in
/// the array: inside a JSON string a line break is always written `\n`, so
/// every line break of the pretty text is structural and can take the
/// indent. The first write error (a reader that went away) ends the
/// writing; [`JsonWriter::finish`] returns it.
pub struct JsonWriter<W: io::Write> {
    out: W,
    /// Outcomes written so far.
    written: usize,
    /// The current outcome's JSON, kept between outcomes for its capacity.
    buffer: Vec<u8>,
    error: Option<io::Error>,
}

/// An outcome's lines within `{"checks": [` (two levels of two spaces).
const ITEM_INDENT: &[u8] = b"    ";

impl<W: io::Write> JsonWriter<W> {
    pub fn new(out: W) -> JsonWriter<W> {
        let mut writer = JsonWriter {
            out,
            written: 0,
            buffer: Vec::new(),
            error: None,
        };
        writer.write(b"{\n  \"checks\": [");
        writer
    }

    pub fn push(&mut self, outcome: &Outcome) {
        self.buffer.clear();
        if let Err(err) = serde_json::to_writer_pretty(&mut self.buffer, outcome) {
            let text = format!("{{\"error\": \"cannot encode outcomes: {err}\"}}");
            self.buffer = text.into_bytes();
        }
        let separator: &[u8] = match self.written {
            0 => b"\n",
            _ => b",\n",
        };
        self.written += 1;
        self.write(separator);
        // Most outcomes are printable ASCII, which has nothing to escape.
        let plain = self
            .buffer
            .iter()
            .all(|&b| (b' '..=b'~').contains(&b) || b == b'\n');
        if plain {
            let json = std::mem::take(&mut self.buffer);
            self.write_indented(&json);
            self.buffer = json;
            return;
        }
        // serde_json writes valid UTF-8.
        let text = sanitize::terminal_json(&String::from_utf8_lossy(&self.buffer));
        self.write_indented(text.as_bytes());
    }

    /// Closes the document and flushes it; the writer back, or the first
    /// error met.
    pub fn finish(mut self) -> io::Result<W> {
        match self.written {
            0 => self.write(b"]\n}\n"),
            _ => self.write(b"\n  ]\n}\n"),
        }
        if self.error.is_none() {
            if let Err(err) = self.out.flush() {
                self.error = Some(err);
            }
        }
        match self.error {
            Some(err) => Err(err),
            None => Ok(self.out),
        }
    }

    /// `json`, every line indented to its place in the array.
    fn write_indented(&mut self, json: &[u8]) {
        for (i, line) in json.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                self.write(b"\n");
            }
            self.write(ITEM_INDENT);
            self.write(line);
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Err(err) = self.out.write_all(bytes) {
            self.error = Some(err);
        }
    }
}

/// One line per check: name, status, time, leaf days left, leaf issuer,
/// first failure in plain words.
pub fn table(outcomes: &[Outcome]) -> String {
    let rows: Vec<[String; 6]> = outcomes
        .iter()
        .map(|o| row(o).map(|cell| sanitize::escape_controls(&cell)))
        .collect();
    let header = ["NAME", "STATUS", "TIME", "DAYS", "ISSUER", "REASON"].map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            match i {
                5 => line.push_str(cell),
                _ => {
                    let _ = write!(line, "{cell:<width$}  ");
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// DAYS and ISSUER are the leaf certificate's, or for a domain check the
/// registration's days left and its registrar.
fn row(outcome: &Outcome) -> [String; 6] {
    let leaf = outcome.leaf();
    let domain = outcome.domain.as_deref();
    let days = match (leaf, domain.and_then(|d| d.expires_at)) {
        (Some(leaf), _) => Some(leaf.days_left),
        (None, Some(expires_at)) => Some((expires_at - outcome.started_at).whole_days()),
        (None, None) => None,
    };
    let issuer = match (leaf, domain.and_then(|d| d.registrar.as_ref())) {
        (Some(leaf), _) => Some(cert::common_name(&leaf.issuer).to_string()),
        (None, registrar) => registrar.cloned(),
    };
    [
        outcome.name.clone(),
        outcome.status.to_string().to_uppercase(),
        format!("{:.0} ms", outcome.duration_ms),
        days.map_or_else(|| "-".into(), |d| d.to_string()),
        issuer.unwrap_or_else(|| "-".into()),
        outcome
            .first_failure()
            .map(|f| match outcome.failures.len() {
                1 => f.message.clone(),
                n => format!("{} (+{} more)", f.message, n - 1),
            })
            .unwrap_or_default(),
    ]
}

/// `vigie history`: one line per stored result, oldest first.
pub fn history_table(outcomes: &[Outcome]) -> String {
    let mut out = String::from("STARTED (UTC)            STATUS  TIME      REASON\n");
    for o in outcomes {
        let reason = o
            .first_failure()
            .map(|f| sanitize::escape_controls(&f.message))
            .unwrap_or_default();
        let line = format!(
            "{:<23}  {:<6}  {:<8}  {reason}",
            crate::when::minute(o.started_at)
                .trim_end_matches(" UTC")
                .to_string()
                + &format!(":{:02}", o.started_at.second()),
            o.status.to_string().to_uppercase(),
            format!("{:.0} ms", o.duration_ms),
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Assertion, Failure, Status};
    use crate::testing::{up, T0};

    /// What `vigie check --json` printed when it built the whole document
    /// before writing it.
    fn whole(outcomes: &[Outcome]) -> String {
        #[derive(serde::Serialize)]
        struct Report<'a> {
            checks: &'a [Outcome],
        }
        let text = serde_json::to_string_pretty(&Report { checks: outcomes }).unwrap();
        format!("{}\n", sanitize::terminal_json(&text))
    }

    fn down_with_hostile_text() -> Outcome {
        let mut outcome = up("hostile", T0);
        outcome.status = Status::Down;
        outcome.failures.push(Failure {
            assertion: Assertion::HttpStatus,
            expected: "2xx".to_string(),
            observed: "503".to_string(),
            // A line break, a tab, a C1 CSI and a bidi override, as a
            // target could send them.
            message: "status 503\n\tsaid \u{9b}31m \u{202e}evil".to_string(),
        });
        outcome
    }

    #[test]
    fn the_written_json_is_the_whole_documents_text() {
        let cases: [Vec<Outcome>; 3] = [
            Vec::new(),
            vec![up("one", T0)],
            vec![up("one", T0), down_with_hostile_text(), up("three", T0)],
        ];
        for outcomes in cases {
            assert_eq!(
                json(&outcomes),
                whole(&outcomes),
                "{} outcomes",
                outcomes.len()
            );
        }
    }

    #[test]
    fn the_written_json_parses_back_to_the_outcomes() {
        let outcomes = vec![up("one", T0), down_with_hostile_text()];
        let text = json(&outcomes);
        assert!(
            !text.contains('\u{9b}') && !text.contains('\u{202e}'),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        let back: Vec<Outcome> = serde_json::from_value(back["checks"].clone()).unwrap();
        assert_eq!(back, outcomes);
    }

    /// A reader that takes `room` bytes, then goes away.
    struct Closing {
        room: usize,
    }

    impl io::Write for Closing {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = bytes.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_domain_shows_its_days_left_and_registrar_in_the_table() {
        let mut domain = up("brand", T0);
        domain.tls = None;
        domain.domain = Some(Box::new(crate::outcome::DomainReport {
            domain: "example.com".into(),
            expires_at: Some(T0 + time::Duration::days(40)),
            registrar: Some("Example Registrar, Inc.".into()),
            ..Default::default()
        }));
        let text = table(&[domain]);
        let line = text.lines().nth(1).unwrap();
        assert!(line.contains("  40  "), "{text}");
        assert!(line.contains("Example Registrar, Inc."), "{text}");
    }

    #[test]
    fn a_reader_that_goes_away_ends_the_writing_with_its_error() {
        let mut writer = JsonWriter::new(Closing { room: 100 });
        for name in ["one", "two", "three"] {
            writer.push(&up(name, T0));
        }
        let err = writer.finish().err().expect("the broken pipe");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
