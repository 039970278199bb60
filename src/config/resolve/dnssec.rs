//! `[check.dns]` of a dns check (whether its answers are validated by
//! DNSSEC, and from which trust anchor) and `expect.dnssec`.
//!
//! A trust anchor file is read and parsed here, at load: a file that is
//! not one is a config error naming the file, the line and what is wrong,
//! not a check that turns bogus at its first probe. The file is DNSKEY
//! records in zone-file syntax, as `dig` prints them or as the root's
//! anchors are published (comments, parentheses across lines, TTL and
//! class optional). It is read here rather than by hickory's own reader,
//! which takes neither parentheses nor a lower-case class.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use hickory_resolver::proto::dnssec::rdata::DNSKEY;
use hickory_resolver::proto::dnssec::{Algorithm, PublicKeyBuf, TrustAnchors, Verifier};
use toml::Spanned;

use super::cx::Cx;
use crate::check::TrustAnchor;
use crate::config::raw::RawDns;

/// The most a trust anchor file may hold. The root's two anchors take
/// under 2 KiB; a file larger than this is not a trust anchor file.
const MAX_ANCHOR_FILE: u64 = 64 * 1024;

/// How the records must be written, for the messages.
const EXAMPLE: &str = "write DNSKEY records as `dig +noall +answer DNSKEY example.com.` prints them, e.g. `example.com. 3600 IN DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==`";

/// `[check.dns]`: the trust anchor to validate from, or `None` when the
/// answers are not validated.
pub(super) fn validation(cx: &mut Cx<'_>, raw: Option<&RawDns>) -> Option<TrustAnchor> {
    let raw = raw?;
    let enabled = raw.dnssec.as_ref().is_some_and(|d| *d.get_ref());
    match (&raw.trust_anchor_file, enabled) {
        (None, true) => Some(TrustAnchor::Root),
        (Some(file), true) => trust_anchor(cx, file),
        (Some(file), false) => {
            let message = "is where DNSSEC validation starts, and `dns.dnssec = true` is not set: set it too, or remove this key";
            cx.error(&file.span(), "dns.trust_anchor_file", message);
            None
        }
        (None, false) => None,
    }
}

/// `expect.dnssec`: only `"secure"` is something to expect. A bogus
/// answer is down whenever answers are validated, and an insecure one is
/// reported as a fact; expecting either would be expecting a failure.
pub(super) fn expect(cx: &mut Cx<'_>, value: &Spanned<String>, validated: bool) -> bool {
    let key = "expect.dnssec";
    if value.get_ref() != "secure" {
        let message = format!(
            "{:?} cannot be expected: write \"secure\" (every answer signed and valid), or leave the key out (bogus answers are down, insecure ones reported)",
            value.get_ref()
        );
        cx.error(&value.span(), key, message);
        return false;
    }
    if !validated {
        let message =
            "judges DNSSEC validation, which is off: set `dnssec = true` under `[check.dns]`";
        cx.error(&value.span(), key, message);
        return false;
    }
    true
}

/// The trust anchors of the file `value` names (relative to the file it
/// is written in).
fn trust_anchor(cx: &mut Cx<'_>, value: &Spanned<String>) -> Option<TrustAnchor> {
    let key = "dns.trust_anchor_file";
    let path = cx.file(key, value)?;
    let keys = read(&path).and_then(|text| anchors(&text));
    match keys {
        Ok(keys) => Some(TrustAnchor::File {
            path,
            keys: Arc::new(keys),
        }),
        Err(problem) => {
            let message = format!("{}: {problem}", path.display());
            cx.error(&value.span(), key, message);
            None
        }
    }
}

/// The file's text, refused past [`MAX_ANCHOR_FILE`] before it is read.
fn read(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read it ({err})"))?;
    let mut text = String::new();
    file.take(MAX_ANCHOR_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read it as text ({err})"))?;
    if text.len() as u64 > MAX_ANCHOR_FILE {
        return Err(format!(
            "is larger than {} KiB, far more than a trust anchor file holds: {EXAMPLE}",
            MAX_ANCHOR_FILE / 1024
        ));
    }
    Ok(text)
}

/// The DNSKEY records of a trust anchor file's text, each a key that
/// validation may start from. Every record must be a zone key that is not
/// revoked, of an algorithm vigie validates; at least one is needed.
pub(super) fn anchors(text: &str) -> Result<TrustAnchors, String> {
    let mut keys = TrustAnchors::empty();
    for record in records(text)? {
        let (owner, key) =
            dnskey(&record.tokens).map_err(|problem| format!("line {}: {problem}", record.line))?;
        check_key(&key)
            .map_err(|problem| format!("line {}: the DNSKEY of {owner} {problem}", record.line))?;
        keys.insert(key.public_key());
    }
    if keys.is_empty() {
        return Err(format!("holds no DNSKEY record: {EXAMPLE}"));
    }
    Ok(keys)
}

/// One record of the file: its words, and the line it starts on.
struct Written {
    line: usize,
    tokens: Vec<String>,
}

/// The records of a zone file's text: comments (`;` to the end of the
/// line) dropped, a record continued across lines inside parentheses.
fn records(text: &str) -> Result<Vec<Written>, String> {
    let mut records = Vec::new();
    let mut current = Written {
        line: 1,
        tokens: Vec::new(),
    };
    let mut open = false;
    for (index, line) in text.lines().enumerate() {
        if current.tokens.is_empty() {
            current.line = index + 1;
        }
        let content = line.split(';').next().unwrap_or_default();
        for word in content.split_whitespace() {
            for piece in word.split_inclusive(['(', ')']) {
                let (token, paren) = match piece.strip_suffix(['(', ')']) {
                    Some(token) => (token, piece.chars().last()),
                    None => (piece, None),
                };
                if !token.is_empty() {
                    current.tokens.push(token.to_string());
                }
                match (paren, open) {
                    (Some('('), false) => open = true,
                    (Some(')'), true) => open = false,
                    (Some(paren), _) => {
                        return Err(format!("line {}: unbalanced '{paren}'", index + 1));
                    }
                    (None, _) => {}
                }
            }
        }
        if !open && !current.tokens.is_empty() {
            let next = Written {
                line: index + 2,
                tokens: Vec::new(),
            };
            records.push(std::mem::replace(&mut current, next));
        }
    }
    if open {
        return Err(format!("line {}: '(' is never closed", current.line));
    }
    Ok(records)
}

/// `owner [ttl] [class] DNSKEY flags 3 algorithm base64...`: the owner
/// and the key.
fn dnskey(tokens: &[String]) -> Result<(String, DNSKEY), String> {
    let owner = &tokens[0];
    if owner.starts_with('$') {
        return Err(format!(
            "{owner} is a directive; a trust anchor file holds records only: {EXAMPLE}"
        ));
    }
    // TTL and class, in either order, both optional.
    let mut rest = tokens[1..].iter().peekable();
    while let Some(word) = rest.next_if(|w| is_ttl(w) || is_class(w)) {
        if is_class(word) && !word.eq_ignore_ascii_case("IN") {
            return Err(format!("{owner} has class {word}: DNSSEC anchors are IN"));
        }
    }
    let Some(rtype) = rest.next() else {
        return Err(format!("{owner} has no record type: {EXAMPLE}"));
    };
    if rtype.eq_ignore_ascii_case("DS") {
        return Err(format!(
            "{owner} has a DS record; vigie anchors at DNSKEY records, not at their digests: {EXAMPLE}"
        ));
    }
    if !rtype.eq_ignore_ascii_case("DNSKEY") {
        let shown: Vec<&str> = tokens.iter().take(6).map(String::as_str).collect();
        return Err(format!(
            "`{}` is not a DNSKEY record: {EXAMPLE}",
            crate::sanitize::value(&shown.join(" "))
        ));
    }
    let fields: Vec<&String> = rest.collect();
    let [flags, protocol, algorithm, key @ ..] = fields.as_slice() else {
        return Err(format!(
            "the DNSKEY of {owner} lacks fields (flags, protocol, algorithm, key): {EXAMPLE}"
        ));
    };
    let number = |what: &str, text: &str| {
        text.parse::<u16>()
            .map_err(|_| format!("the DNSKEY of {owner} has {what} {text:?}, not a number"))
    };
    let flags = number("flags", flags)?;
    if number("protocol", protocol)? != 3 {
        return Err(format!(
            "the DNSKEY of {owner} has protocol {protocol}; DNSSEC keys have 3"
        ));
    }
    let algorithm = u8::try_from(number("algorithm", algorithm)?)
        .map_err(|_| format!("the DNSKEY of {owner} has algorithm {algorithm}, past 255"))?;
    let text: String = key.iter().map(|k| k.as_str()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&text)
        .map_err(|err| format!("the DNSKEY of {owner} has a key that is not base64 ({err})"))?;
    let public = PublicKeyBuf::new(bytes, Algorithm::from_u8(algorithm));
    Ok((owner.clone(), DNSKEY::with_flags(flags, public)))
}

fn is_ttl(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_digit())
}

fn is_class(word: &str) -> bool {
    ["IN", "CH", "HS", "CS"]
        .iter()
        .any(|class| word.eq_ignore_ascii_case(class))
}

/// Why `key` cannot anchor validation, if it cannot.
fn check_key(key: &DNSKEY) -> Result<(), String> {
    let flags = key.flags();
    if !key.zone_key() {
        return Err(format!(
            "has flags {flags}, without the zone key bit (256 for a ZSK, 257 for a KSK): it signs nothing in a zone"
        ));
    }
    if key.revoke() {
        return Err(format!(
            "has flags {flags}, with the revoked bit (RFC 5011): its zone has retired it"
        ));
    }
    let algorithm = key.algorithm();
    if !algorithm.is_supported() {
        return Err(format!(
            "uses algorithm {algorithm}, which vigie cannot validate (it can RSASHA256, RSASHA512, ECDSAP256SHA256, ECDSAP384SHA384 and ED25519)"
        ));
    }
    match key.key() {
        Ok(_) => Ok(()),
        Err(err) => Err(format!("holds no valid {algorithm} public key ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key (algorithm 13), as RFC 6605 section 6.1 prints it.
    const P256: &str =
        "GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==";

    /// Why `text` is refused.
    fn refusal(text: &str) -> String {
        match anchors(text) {
            Ok(keys) => panic!("{text:?} was read as {} anchors", keys.len()),
            Err(problem) => problem,
        }
    }

    fn line(flags: u16, algorithm: u8, key: &str) -> String {
        format!("example.net. 3600 IN DNSKEY {flags} 3 {algorithm} {key}\n")
    }

    #[test]
    fn dnskey_records_as_dig_prints_them_or_as_zone_files_write_them_are_anchors() {
        let text = format!(
            "; the zone's keys\n{}{}{}",
            line(257, 13, P256),
            "example.net. in DNSKEY 256 3 13 (\n  GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7w\n  NcP+e+MAnLr+Wi9xMWyQLc8NAA== ) ; same key, as a ZSK\n",
            "\n. IN 172800 dnskey 257 3 8 AwEAAaz/tAm8yTn4Mfeh5eyI96WSVexTBAvkMgJzkKTOiW1vkIbzxeF3+/4RgWOq7HrxRixHlFlExOLAJr5emLvN7SWXgnLh4+B5xQlNVz8Og8kvArMtNROxVQuCaSnIDdD5LKyWbRd2n9WGe2R8PzgCmr3EgVLrjyBxWezF0jLHwVN8efS3rCj/EWgvIWgb9tarpVUDK/b58Da+sqqls3eNbuv7pr+eoZG+SrDK6nWeL3c6H5Apxz7LjVc1uTIdsIXxuOLYA4/ilBmSVIzuDWfdRUfhHdY6+cn8HFRm+2hM8AnXGXws9555KrUB5qihylGa8subX2Nn6UwNR1AkUTV74bU=\n",
        );
        let keys = anchors(&text).unwrap();
        // The same key twice is one anchor; the root's KSK-2017 another.
        assert_eq!(keys.len(), 2);
    }

    #[test]
    fn a_ds_record_is_refused_saying_what_to_write_instead() {
        let text = "; from the registrar\nexample.net. 3600 IN DS 55648 13 2 b4c8c1fe2e7477127b27115656ad6256f424625bf5c1e2770ce6d6e37df61d17\n";
        let problem = refusal(text);
        assert!(
            problem.starts_with(
                "line 2: example.net. has a DS record; vigie anchors at DNSKEY records, not at their digests: write DNSKEY records as `dig +noall +answer DNSKEY example.com.` prints them"
            ),
            "{problem}"
        );
    }

    #[test]
    fn what_is_not_a_list_of_dnskey_records_is_refused_with_its_line() {
        let cases = [
            ("this is not a key\n", "line 1: `this is not a key` is not a DNSKEY record: "),
            ("; only a comment\n\n", "holds no DNSKEY record: "),
            ("$TTL 3600\n", "line 1: $TTL is a directive; a trust anchor file holds records only: "),
            ("\nexample.net. CH DNSKEY 257 3 13 AA==\n", "line 2: example.net. has class CH: DNSSEC anchors are IN"),
            ("example.net. 3600 IN\n", "line 1: example.net. has no record type: "),
            ("example.net. DNSKEY 257 3\n", "line 1: the DNSKEY of example.net. lacks fields (flags, protocol, algorithm, key): "),
            ("example.net. DNSKEY 257 2 13 AA==\n", "line 1: the DNSKEY of example.net. has protocol 2; DNSSEC keys have 3"),
            ("example.net. DNSKEY KSK 3 13 AA==\n", "line 1: the DNSKEY of example.net. has flags \"KSK\", not a number"),
            ("example.net. DNSKEY 257 3 13 not-base64!\n", "line 1: the DNSKEY of example.net. has a key that is not base64 ("),
            ("example.net. DNSKEY 257 3 13 (\n AA==\n", "line 1: '(' is never closed"),
            ("example.net. DNSKEY 257 3 13 AA== )\n", "line 1: unbalanced ')'"),
        ];
        for (text, expected) in cases {
            let problem = refusal(text);
            assert!(problem.starts_with(expected), "{text:?}: {problem}");
        }
    }

    #[test]
    fn keys_that_cannot_anchor_are_named_with_the_reason() {
        let cases = [
            (line(0, 13, P256), "has flags 0, without the zone key bit"),
            (line(385, 13, P256), "has flags 385, with the revoked bit"),
            (
                line(257, 3, P256),
                "uses algorithm DSA, which vigie cannot validate",
            ),
            (
                line(257, 13, "AAAA"),
                "holds no valid ECDSAP256SHA256 public key",
            ),
        ];
        for (text, expected) in cases {
            let problem = refusal(&text);
            assert!(
                problem.starts_with(&format!("line 1: the DNSKEY of example.net. {expected}")),
                "{text}: {problem}"
            );
        }
    }
}
