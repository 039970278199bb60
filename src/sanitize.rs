//! Text that came from a target, made safe to keep and to show.
//!
//! vigie talks to servers it does not control: a header, a certificate
//! name or a refusal body can be 60 KB long, carry a session cookie or a
//! token in a redirect, or hold terminal escapes that rewrite an
//! operator's screen. Every such value is passed through this module once,
//! where a probe captures it (`probe/`), so that the store, the mail, the
//! logs, the API, `/metrics` and the replicated segments only ever see:
//!
//! - control characters escaped ([`escape_controls`]): C0 and C1 controls,
//!   DEL, the Unicode line separators and the bidirectional overrides that
//!   reorder what a terminal or a mail reader shows;
//! - at most [`VALUE_CAP`] bytes a value ([`value`]), the cut marked with
//!   `…[+N bytes]` (N counts the bytes of the original left out);
//! - secrets redacted by header ([`header_value`]): cookies and
//!   credentials, authentication parameters, query strings and userinfo in
//!   URL-shaped headers, and any header a check lists in `redact_headers`.
//!
//! Shown text is also escaped on its way to a terminal ([`terminal`]), for
//! data stored by a vigie older than this module. The functions are
//! idempotent: a value sanitised twice is the value sanitised once.
//!
//! This is a leaf: it knows text and URLs (`redact`), nothing of probes,
//! outcomes or the store.

use std::fmt::Write;

use crate::redact::{redact, redact_str};

/// Most bytes of one value from a target that vigie keeps (before the cut
/// marker). Enough for any real header, DN or host name (DNS names stop at
/// 253); a hostile 60 KB header costs 256 bytes in every record.
pub const VALUE_CAP: usize = 256;

/// Most bytes of a sentence vigie composed around target values (a probe
/// error naming several redirect hops); each value in it is capped on its
/// own already.
pub const MESSAGE_CAP: usize = 2048;

/// Most entries of a list from a target (the SANs of a certificate, the
/// names of an Access-Control-Allow-Headers) that are kept; the rest is
/// counted in a last entry. Let's Encrypt issues at most 100 names.
pub const LIST_CAP: usize = 100;

/// What replaces a value that must not be shown at all.
pub const REDACTED: &str = "[redacted]";

/// Room kept under the cap for the cut marker, so that a capped value fits
/// within the cap and capping it again changes nothing.
const MARKER_ROOM: usize = 32;

/// One value from a target, escaped and capped at [`VALUE_CAP`].
pub fn value(text: &str) -> String {
    bounded(text, VALUE_CAP)
}

/// Bytes from a target (a header value, a body excerpt): valid UTF-8 is
/// escaped as in [`value`], invalid bytes are shown as `\xNN`.
pub fn value_bytes(bytes: &[u8]) -> String {
    bounded_bytes(bytes, VALUE_CAP)
}

/// A sentence composed around target values, escaped and capped at
/// [`MESSAGE_CAP`].
pub fn message(text: &str) -> String {
    bounded(text, MESSAGE_CAP)
}

/// `text` escaped, and cut to at most `cap` bytes with a marker.
pub fn bounded(text: &str, cap: usize) -> String {
    bounded_bytes(text.as_bytes(), cap)
}

/// The one walk every function here shares: escape, stop at the budget,
/// say how much of the original was left out. A value that fits the cap
/// once escaped is kept whole, so that capping a capped value changes
/// nothing.
pub fn bounded_bytes(bytes: &[u8], cap: usize) -> String {
    if escaped_len_within(bytes, cap) {
        return escape_all(bytes);
    }
    let budget = cap.saturating_sub(MARKER_ROOM).max(1);
    let mut out = String::with_capacity(cap);
    let mut consumed = 0;
    let mut piece = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            piece.clear();
            push_escaped(&mut piece, c);
            if out.len() + piece.len() > budget {
                return cut(out, bytes.len() - consumed);
            }
            out.push_str(&piece);
            consumed += c.len_utf8();
        }
        for b in chunk.invalid() {
            if out.len() + 4 > budget {
                return cut(out, bytes.len() - consumed);
            }
            let _ = write!(out, "\\x{b:02x}");
            consumed += 1;
        }
    }
    out
}

/// Whether `bytes`, escaped, take at most `cap` bytes (stops counting
/// past the cap: a 1 MiB body is not walked whole).
fn escaped_len_within(bytes: &[u8], cap: usize) -> bool {
    let mut len = 0;
    let mut piece = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            piece.clear();
            push_escaped(&mut piece, c);
            len += piece.len();
            if len > cap {
                return false;
            }
        }
        len += 4 * chunk.invalid().len();
        if len > cap {
            return false;
        }
    }
    true
}

fn escape_all(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

fn cut(mut out: String, left_out: usize) -> String {
    let _ = write!(out, "…[+{left_out} bytes]");
    out
}

/// `text` with every control character escaped, nothing cut: for text that
/// is already bounded (or, in a terminal, must be shown whole).
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

/// What a terminal is given: like [`escape_controls`], but line breaks are
/// kept (the table and report are lines), so a stored value from an older
/// vigie can neither move the cursor nor recolour the screen.
pub fn terminal(text: &str) -> String {
    if !text.chars().any(|c| c != '\n' && needs_escape(c)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c => push_escaped(&mut out, c),
        }
    }
    out
}

/// JSON for a terminal: serde_json escapes C0 controls itself, but writes
/// DEL, C1 controls (a lone U+009B is a CSI on some terminals) and the
/// bidirectional overrides as they are. Those can only occur inside JSON
/// strings, where `\uXXXX` means the same character, so the document is
/// unchanged for a parser.
pub fn terminal_json(json: &str) -> String {
    if !json.chars().any(needs_escape) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        match c {
            // Structural whitespace of pretty-printed JSON.
            '\n' | '\t' | '\r' => out.push(c),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Control characters (Unicode Cc: C0, DEL, C1), the line and paragraph
/// separators, and the bidirectional marks, embeddings, overrides and
/// isolates ("Trojan Source", CVE-2021-42574).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    if !needs_escape(c) {
        out.push(c);
        return;
    }
    let _ = match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if u32::from(c) < 0x80 => write!(out, "\\x{:02x}", u32::from(c)),
        c => write!(out, "\\u{{{:x}}}", u32::from(c)),
    };
}

/// A list from a target: each entry a [`value`], at most [`LIST_CAP`]
/// entries, the rest counted in a last entry.
pub fn list(items: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for item in items {
        match out.len() < LIST_CAP {
            true => out.push(value(item.as_ref())),
            false => more += 1,
        }
    }
    if more > 0 {
        out.push(format!("…[+{more} more]"));
    }
    out
}

/// Headers whose whole value is a credential or a session.
const SECRET_HEADERS: [&str; 4] = [
    "set-cookie",
    "cookie",
    "authorization",
    "proxy-authorization",
];

/// Headers whose value is one URL (redirect targets carry tokens and
/// presigned signatures in their query).
const URL_HEADERS: [&str; 2] = ["location", "content-location"];

/// A response header's value as vigie may keep and show it. `name` is
/// lower-case (as `http::HeaderName` gives it); `redact_also` are the
/// check's `redact_headers`, lower-case.
pub fn header_value(name: &str, raw: &[u8], redact_also: &[impl AsRef<str>]) -> String {
    if SECRET_HEADERS.contains(&name) || redact_also.iter().any(|h| h.as_ref() == name) {
        return REDACTED.to_string();
    }
    let text = String::from_utf8_lossy(raw);
    let shown = match name {
        n if URL_HEADERS.contains(&n) => url_text(&text),
        "link" => link(&text),
        "refresh" => refresh(&text),
        "www-authenticate" | "proxy-authenticate" => auth_scheme(&text),
        _ => return value_bytes(raw),
    };
    value(&shown)
}

/// A URL as a header gives it, absolute or relative, without userinfo,
/// query or fragment.
pub fn url_text(text: &str) -> String {
    let text = text.trim();
    if let Ok(url) = url::Url::parse(text) {
        return redact(&url);
    }
    // Relative: the path is kept, what follows `?` or `#` is not; a `@`
    // left in it may be userinfo of a scheme-relative `//user:pw@host`.
    let (path, rest) = match text.find(['?', '#']) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    if path.contains('@') {
        return REDACTED.to_string();
    }
    match rest.starts_with('?') {
        true => format!("{path}?{REDACTED}"),
        false => path.to_string(),
    }
}

/// `Link: <https://...?sig=...>; rel="next", <...>`: every `<URI>` redacted,
/// the parameters kept.
fn link(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            out.push('<');
            out.push_str(&url_text(&rest[open + 1..]));
            return out;
        };
        out.push('<');
        out.push_str(&url_text(&rest[open + 1..open + close]));
        out.push('>');
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// `Refresh: 5; url=https://...`: the delay kept, the URL redacted.
fn refresh(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    match lower.find("url=") {
        Some(i) => {
            let target = text[i + 4..].trim().trim_matches(['"', '\'']);
            format!("{}{}", &text[..i + 4], url_text(target))
        }
        None => redact_str(text.trim()),
    }
}

/// `WWW-Authenticate: Bearer realm="...", error_description="..."`: the
/// scheme says what the target asks for; the parameters can carry
/// anything, so they are not kept.
fn auth_scheme(text: &str) -> String {
    let text = text.trim();
    match text.split_once(char::is_whitespace) {
        Some((scheme, _)) => format!("{scheme} {REDACTED}"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [&str; 0] = [];

    #[test]
    fn controls_are_escaped_visibly() {
        assert_eq!(value("a\x1b[31mred\x07"), "a\\x1b[31mred\\x07");
        assert_eq!(value("two\nlines\r\tend"), "two\\nlines\\r\\tend");
        assert_eq!(value("csi\u{9b}31m del\x7f"), "csi\\u{9b}31m del\\x7f");
        assert_eq!(value("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(value("café, ok"), "café, ok");
        assert_eq!(value_bytes(b"bad\xff\xfe utf8"), "bad\\xff\\xfe utf8");
    }

    #[test]
    fn long_values_are_cut_with_a_marker_that_counts_the_rest() {
        let long = "x".repeat(60_000);
        let shown = value(&long);
        assert!(shown.len() <= VALUE_CAP, "{}", shown.len());
        let kept = VALUE_CAP - MARKER_ROOM;
        assert_eq!(
            shown,
            format!("{}…[+{} bytes]", "x".repeat(kept), 60_000 - kept)
        );
        assert_eq!(value(&shown), shown, "capping twice changes nothing");
    }

    #[test]
    fn a_value_that_fits_once_escaped_is_never_marked() {
        let fits = "é".repeat(VALUE_CAP / 2);
        assert_eq!(value(&fits), fits);
        let just_over = "y".repeat(VALUE_CAP + 1);
        assert!(value(&just_over).ends_with("…[+33 bytes]"));
    }

    #[test]
    fn escaping_is_idempotent() {
        let once = value("\x1b]0;title\x07 and \\x1b");
        assert_eq!(value(&once), once);
        assert_eq!(escape_controls(&once), once);
        assert_eq!(terminal(&once), once);
    }

    #[test]
    fn terminal_keeps_line_breaks_only() {
        assert_eq!(terminal("a\nb\x1b[2J"), "a\nb\\x1b[2J");
    }

    #[test]
    fn terminal_json_stays_the_same_document() {
        let value = serde_json::json!({"s": "a\u{9b}b\x7f\u{202e}\x1b"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let safe = terminal_json(&text);
        assert!(
            !safe.chars().any(|c| c != '\n' && needs_escape(c)),
            "{safe}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
            value
        );
    }

    #[test]
    fn secret_headers_are_redacted_whole() {
        let cookie = b"session=SECRET; HttpOnly";
        assert_eq!(header_value("set-cookie", cookie, &NONE), REDACTED);
        assert_eq!(header_value("authorization", b"Bearer x", &NONE), REDACTED);
        assert_eq!(header_value("x-api-key", b"k", &["x-api-key"]), REDACTED);
        assert_eq!(header_value("x-other", b"k", &["x-api-key"]), "k");
    }

    #[test]
    fn url_headers_lose_query_and_userinfo() {
        let loc = b"https://u:pw@login.example/cb?token=SECRET#frag";
        assert_eq!(
            header_value("location", loc, &NONE),
            "https://login.example/cb?[redacted]"
        );
        assert_eq!(
            header_value("content-location", b"/next?token=SECRET", &NONE),
            "/next?[redacted]"
        );
        assert_eq!(
            header_value("location", b"/plain/path", &NONE),
            "/plain/path"
        );
        assert_eq!(
            header_value("location", b"//user:pw@host/x", &NONE),
            REDACTED
        );
    }

    #[test]
    fn link_refresh_and_authenticate_keep_their_shape() {
        assert_eq!(
            header_value(
                "link",
                b"<https://x.example/p?sig=SECRET>; rel=\"next\", </a?b=c>; rel=preload",
                &NONE
            ),
            "<https://x.example/p?[redacted]>; rel=\"next\", </a?[redacted]>; rel=preload"
        );
        assert_eq!(
            header_value("refresh", b"5; URL=https://x.example/?t=SECRET", &NONE),
            "5; URL=https://x.example/?[redacted]"
        );
        assert_eq!(
            header_value(
                "www-authenticate",
                b"Bearer realm=\"api\", error_description=\"SECRET\"",
                &NONE
            ),
            "Bearer [redacted]"
        );
        assert_eq!(
            header_value("www-authenticate", b"Negotiate", &NONE),
            "Negotiate"
        );
    }

    #[test]
    fn lists_are_bounded() {
        let many: Vec<String> = (0..150).map(|i| format!("n{i}.example")).collect();
        let shown = list(&many);
        assert_eq!(shown.len(), LIST_CAP + 1);
        assert_eq!(shown[LIST_CAP], "…[+50 more]");
        assert_eq!(list(["a\x1b"]), ["a\\x1b"]);
    }

    mod generated {
        use proptest::prelude::*;

        use super::super::*;

        /// What no sanitised value may contain.
        fn clean(shown: &str) -> bool {
            !shown.chars().any(needs_escape)
        }

        proptest! {
            #[test]
            fn any_header_bytes_come_out_bounded_and_clean(
                name in prop::sample::select(vec![
                    "location", "content-location", "link", "refresh",
                    "www-authenticate", "set-cookie", "x-anything", "vary",
                ]),
                raw in prop::collection::vec(any::<u8>(), 0..2000),
            ) {
                let shown = header_value(name, &raw, &["x-redacted"]);
                prop_assert!(shown.len() <= VALUE_CAP, "{} bytes", shown.len());
                prop_assert!(clean(&shown), "{shown:?}");
                prop_assert_eq!(value(&shown), shown.clone());
            }

            #[test]
            fn any_text_is_bounded_clean_and_stable(text in ".{0,600}") {
                let shown = value(&text);
                prop_assert!(shown.len() <= VALUE_CAP);
                prop_assert!(clean(&shown));
                prop_assert_eq!(value(&shown), shown.clone());
                prop_assert!(clean(&terminal(&text).replace('\n', "")));
            }

            #[test]
            fn short_clean_text_is_kept_as_it_is(text in "[ -~]{0,200}") {
                prop_assert_eq!(value(&text), text);
            }
        }
    }
}
