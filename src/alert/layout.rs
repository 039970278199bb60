//! A mail laid out once ([`Doc`]: sections, headings, key-value fields,
//! titled items, tables) and written twice, as plain text and as HTML, so
//! that the two alternatives of a mail always say the same thing; plus the
//! few phrases every mail shares (spans of time, days left).
//!
//! Everything shown comes from targets and servers vigie does not control
//! (URLs, certificate names, header values quoted in failure messages).
//! Both writers put every value on one line, control characters replaced,
//! so nothing can forge a header line or a terminal escape; the HTML writer
//! escapes every string it is given. Callers never pre-escape.
//!
//! Not here: what a mail says (`render.rs`, `report/render.rs`).

use std::fmt::Write as _;

use time::OffsetDateTime;

/// "61 days left", "expires today", "expired 2 days ago", from `now`.
pub(super) fn days_left(not_after: OffsetDateTime, now: OffsetDateTime) -> String {
    let days = (not_after - now).whole_days();
    match days {
        d if d > 1 => format!("{d} days left"),
        1 => "1 day left".to_string(),
        0 if not_after > now => "expires today".to_string(),
        0 => "expired today".to_string(),
        -1 => "expired 1 day ago".to_string(),
        d => format!("expired {} days ago", -d),
    }
}

/// The text on one line: control characters (newlines, escapes) become
/// spaces.
pub(super) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Text safe inside HTML elements and double-quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A mail laid out once, written as text and as HTML.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Doc {
    pub title: String,
    pub tone: Tone,
    pub blocks: Vec<Block>,
    /// Signature lines.
    pub footer: Vec<String>,
}

/// The title's colour in HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    Alarm,
    Reminder,
    Resolved,
    Neutral,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    /// A part of its own (one check in a grouped mail).
    Section(String),
    Heading(String),
    Para(String),
    /// Key-value lines.
    Fields(Vec<(String, String)>),
    /// Titled groups of key-value lines (a failure, a certificate).
    Items(Vec<Item>),
    Table {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
        /// Rows to be seen first (expired, overdue, still open), by index:
        /// `!` before them in text, red in HTML.
        marked: Vec<usize>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Item {
    pub title: String,
    pub fields: Vec<(String, String)>,
}

/// The plain-text alternative.
pub(super) fn text(doc: &Doc) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", one_line(&doc.title));
    for block in &doc.blocks {
        out.push('\n');
        match block {
            Block::Section(h) => {
                let h = one_line(h);
                let _ = writeln!(out, "\n{h}\n{}", "=".repeat(h.chars().count()));
            }
            Block::Heading(h) => {
                let h = one_line(h);
                let _ = writeln!(out, "{h}\n{}", "-".repeat(h.chars().count()));
            }
            Block::Para(p) => {
                let _ = writeln!(out, "{}", one_line(p));
            }
            Block::Fields(fields) => text_fields(&mut out, fields, "  "),
            Block::Items(items) => {
                for item in items {
                    let _ = writeln!(out, "  {}", one_line(&item.title));
                    text_fields(&mut out, &item.fields, "      ");
                }
            }
            Block::Table { head, rows, marked } => text_table(&mut out, head, rows, marked),
        }
    }
    out.push_str("\n-- \n");
    for line in &doc.footer {
        let _ = writeln!(out, "{}", one_line(line));
    }
    out
}

fn text_fields(out: &mut String, fields: &[(String, String)], indent: &str) {
    let width = fields
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    for (key, value) in fields {
        let line = format!("{indent}{:<width$}  {}", one_line(key), one_line(value));
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn text_table(out: &mut String, head: &[String], rows: &[Vec<String>], marked: &[usize]) {
    let cells = |row: &[String]| row.iter().map(|c| one_line(c)).collect::<Vec<_>>();
    let all: Vec<Vec<String>> = std::iter::once(cells(head))
        .chain(rows.iter().map(|r| cells(r)))
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            all.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, row) in all.iter().enumerate() {
        // Row 0 is the head.
        let mark = match i > 0 && marked.contains(&(i - 1)) {
            true => "!",
            false => " ",
        };
        let mut line = String::from(mark);
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, " {cell:<width$} ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The HTML alternative: plain markup with inline styles (mail clients
/// drop style sheets), every string escaped.
pub(super) fn html(doc: &Doc) -> String {
    let colour = match doc.tone {
        Tone::Alarm => "#b00020",
        Tone::Reminder => "#b35900",
        Tone::Resolved => "#1b7f3b",
        Tone::Neutral => "#222222",
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body style=\"font-family:sans-serif;font-size:14px;color:#222222\">\n\
         <h2 style=\"color:{colour}\">{title}</h2>\n",
        title = escape(&doc.title)
    );
    for block in &doc.blocks {
        match block {
            Block::Section(h) => {
                let _ = writeln!(
                    out,
                    "<h3 style=\"border-top:1px solid #cccccc;padding-top:8px\">{}</h3>",
                    escape(h)
                );
            }
            Block::Heading(h) => {
                let _ = writeln!(out, "<h4>{}</h4>", escape(h));
            }
            Block::Para(p) => {
                let _ = writeln!(out, "<p>{}</p>", escape(p));
            }
            Block::Fields(fields) => html_fields(&mut out, fields),
            Block::Items(items) => {
                for item in items {
                    let _ = writeln!(
                        out,
                        "<p style=\"margin:8px 0 2px 0\"><b>{}</b></p>",
                        escape(&item.title)
                    );
                    html_fields(&mut out, &item.fields);
                }
            }
            Block::Table { head, rows, marked } => html_table(&mut out, head, rows, marked),
        }
    }
    let footer: Vec<String> = doc.footer.iter().map(|l| escape(l)).collect();
    let _ = write!(
        out,
        "<p style=\"color:#666666;font-size:12px\">{}</p>\n</body></html>\n",
        footer.join("<br>")
    );
    out
}

fn html_fields(out: &mut String, fields: &[(String, String)]) {
    out.push_str("<table style=\"border-collapse:collapse\">\n");
    for (key, value) in fields {
        let _ = writeln!(
            out,
            "<tr><th style=\"text-align:left;padding:1px 12px 1px 0;color:#555555\">{}</th>\
             <td style=\"font-family:monospace\">{}</td></tr>",
            escape(key),
            escape(value)
        );
    }
    out.push_str("</table>\n");
}

fn html_table(out: &mut String, head: &[String], rows: &[Vec<String>], marked: &[usize]) {
    const CELL: &str = "border:1px solid #cccccc;padding:3px 6px;text-align:left";
    out.push_str("<table style=\"border-collapse:collapse\">\n<tr>");
    for h in head {
        let _ = write!(out, "<th style=\"{CELL}\">{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for (i, row) in rows.iter().enumerate() {
        match marked.contains(&i) {
            true => {
                out.push_str("<tr style=\"color:#b00020;font-weight:bold;background:#fdecee\">")
            }
            false => out.push_str("<tr>"),
        }
        for cell in row {
            let _ = write!(out, "<td style=\"{CELL}\">{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape("a\r\nBcc: x"), "a  Bcc: x");
    }

    #[test]
    fn days_left_is_counted_from_now() {
        let now = time::macros::datetime!(2026-11-29 07:00 UTC);
        let day = time::Duration::days(1);
        assert_eq!(days_left(now + 61 * day, now), "61 days left");
        assert_eq!(days_left(now + day, now), "1 day left");
        assert_eq!(days_left(now + day / 2, now), "expires today");
        assert_eq!(days_left(now - day / 2, now), "expired today");
        assert_eq!(days_left(now - 2 * day, now), "expired 2 days ago");
    }

    #[test]
    fn text_and_html_say_the_same_thing() {
        let doc = Doc {
            title: "t <b>".to_string(),
            tone: Tone::Neutral,
            blocks: vec![
                Block::Section("s".to_string()),
                Block::Fields(vec![("key".to_string(), "v\nInjected: x".to_string())]),
                Block::Table {
                    head: vec!["a".to_string(), "bb".to_string()],
                    rows: vec![
                        vec!["long cell".to_string(), "x".to_string()],
                        vec!["late".to_string(), "y".to_string()],
                    ],
                    marked: vec![1],
                },
            ],
            footer: vec!["sig".to_string()],
        };
        assert_eq!(
            text(&doc),
            "t <b>\n\n\ns\n=\n\n  key  v Injected: x\n\n  a          bb\n  long cell  x\n! late       y\n\n-- \nsig\n"
        );
        let html = html(&doc);
        assert!(html.contains("<h2 style=\"color:#222222\">t &lt;b&gt;</h2>"));
        assert!(html.contains(">v Injected: x</td>"));
        assert!(
            html.contains("<tr style=\"color:#b00020;font-weight:bold;background:#fdecee\"><td")
        );
    }
}
