//! One replication segment: a batch of results as one object. Pure: bytes
//! in, bytes out; no I/O.
//!
//! # Name
//!
//! `history/<node>/<yyyy>/<mm>/<dd>/<first>-<last>.ndjson.zst`, where
//! `first` and `last` are the batch's first and last replication sequence
//! numbers (the keys of the store's replication queue; 16 lower-case hex
//! digits, so names sort like the numbers) and the date is the UTC day the
//! batch was formed. Every part comes from the batch as the store recorded
//! it, so a retry after a crash produces the same name.
//!
//! # Content
//!
//! A zstd frame (with zstd's own content checksum) of newline-delimited
//! JSON:
//!
//! ```text
//! {"vigie_segment":1,"node":"prod-probe-1","after":0,"first":1,"last":3,"formed_at":"..."}
//! {"seq":1,"key":"000000010000019abc...","outcome":{...the Outcome JSON of DESIGN.md...}}
//! ...
//! {"end":{"results":3,"sha256":"<hex of every byte above this line>"}}
//! ```
//!
//! `after` is the last seq of the previous segment (0 for the first), so a
//! reader can tell that one is missing. Result lines come in the order the
//! store reads them (by check, then time), not by seq: the segment is
//! written as the results are read, so a batch never sits in memory
//! decoded; the closing line gives the count. `key` is the store's results key
//! (check id ++ started_at millis, hex) on the node that wrote it; restore
//! de-duplicates by check name and millisecond, which is the same thing.
//! The Outcome JSON is the public contract (fields only ever added), which
//! keeps old segments readable and lets an operator inspect one with
//! `zstd -dc | jq`. Encoding is deterministic: the same batch gives the
//! same bytes.

use std::io::{BufRead, BufReader, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::outcome::Outcome;
use crate::store::{Shipment, Shipped};

/// The format written in every header.
pub const FORMAT: u32 = 1;

/// zstd level: 3, zstd's default. Lines grouped by check repeat most of
/// their bytes (target, chain), so even this level gets a day of results
/// down to a few tens of bytes each, and a catch-up stays bound by reading
/// the store rather than by compression (benches/replicate.rs).
const LEVEL: i32 = 3;

/// Most a segment may inflate to; far above any real batch (a batch of
/// 20,000 results is ~30 MB of JSON). Memory does not depend on it (a
/// segment is read a line at a time): it bounds the time a hostile
/// object can take.
const MAX_DECODED_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Most bytes a segment object may have: checked before its body is read
/// (`Bucket::get_capped`). A real segment of 20,000 results compresses to
/// well under 2 MiB.
pub const MAX_SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

/// Most bytes of one line, newline included. A result line is one
/// Outcome's JSON, whose every value from a target is capped
/// (`sanitize`): a few KiB with a long chain. A longer line is not a
/// result vigie wrote.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Largest zstd window accepted (log2: 16 MiB), which is what the decoder
/// allocates. vigie writes with level 3, whose window is at most 2 MiB; a
/// frame asking for more is refused instead of costing up to the 128 MiB
/// zstd would otherwise allow.
const MAX_WINDOW_LOG: u32 = 24;

/// The first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub vigie_segment: u32,
    pub node: String,
    pub after: u64,
    pub first: u64,
    pub last: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub formed_at: OffsetDateTime,
}

#[derive(Serialize)]
struct LineOut<'a> {
    seq: u64,
    key: String,
    outcome: &'a Outcome,
}

#[derive(Deserialize)]
struct LineIn {
    seq: u64,
    key: String,
    outcome: Outcome,
}

#[derive(Debug, Serialize, Deserialize)]
struct Trailer {
    end: End,
}

#[derive(Debug, Serialize, Deserialize)]
struct End {
    results: u64,
    sha256: String,
}

/// A segment read back and verified.
#[derive(Debug, Clone)]
pub struct Segment {
    pub header: Header,
    /// (seq, outcome), in file order.
    pub results: Vec<(u64, Outcome)>,
}

/// Why a segment cannot be trusted; the caller names the object.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("cannot decompress it (not zstd, or damaged: zstd's checksum fails): {0}")]
    Decompress(std::io::Error),
    #[error("it is empty")]
    Empty,
    #[error("line {line} is not what a segment holds: {detail}")]
    Line { line: usize, detail: String },
    #[error("line {line} is longer than {MAX_LINE_BYTES} bytes, more than any result vigie writes: the segment is refused there, unread past that point")]
    LineTooLong { line: usize },
    #[error("it ends without its closing checksum line (truncated upload or damaged object)")]
    Truncated,
    #[error("its checksum does not match: the content says sha256 {expected}, the bytes hash to {found}")]
    Checksum { expected: String, found: String },
    #[error("its closing line counts {announced} results but it holds {found}")]
    Count { announced: u64, found: u64 },
    #[error("its header says node {node:?}, seqs {first}..={last}, but its name says {name_first}..={name_last} under node {expected_node:?}")]
    Mismatch {
        node: String,
        first: u64,
        last: u64,
        expected_node: String,
        name_first: u64,
        name_last: u64,
    },
    #[error(
        "format version {0} is newer than this vigie reads ({FORMAT}): restore with a newer vigie"
    )]
    TooNew(u32),
    #[error("cannot encode the segment: {0}")]
    Encode(String),
}

/// `history/<node>/`: where one node's segments live.
pub fn node_prefix(node: &str) -> String {
    format!("history/{node}/")
}

/// The object name of a batch.
pub fn object_name(node: &str, formed_at: OffsetDateTime, first: u64, last: u64) -> String {
    let day = formed_at.to_offset(time::UtcOffset::UTC);
    format!(
        "{}{:04}/{:02}/{:02}/{first:016x}-{last:016x}.ndjson.zst",
        node_prefix(node),
        day.year(),
        u8::from(day.month()),
        day.day()
    )
}

/// (first, last) of a segment name under `node`, or `None` for any other
/// object.
pub fn parse_name(node: &str, name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(&node_prefix(node))?;
    let mut parts = rest.split('/');
    let (year, month, day, file) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return None;
    }
    if ![year, month, day]
        .iter()
        .all(|p| p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let range = file.strip_suffix(".ndjson.zst")?;
    let (first, last) = range.split_once('-')?;
    if first.len() != 16 || last.len() != 16 {
        return None;
    }
    let first = u64::from_str_radix(first, 16).ok()?;
    let last = u64::from_str_radix(last, 16).ok()?;
    (first <= last).then_some((first, last))
}

/// The object name and bytes of a shipment.
pub fn encode(node: &str, shipment: &Shipment) -> Result<(String, Vec<u8>), SegmentError> {
    let mut builder = Builder::new(
        node,
        shipment.after,
        shipment.first,
        shipment.last,
        shipment.formed_at,
    )?;
    for shipped in &shipment.results {
        builder.add(shipped)?;
    }
    builder.finish()
}

/// Writes a segment as its results are handed over: each result goes
/// through JSON and zstd at once, so only the compressed bytes are held.
pub struct Builder {
    name: String,
    encoder: zstd::stream::Encoder<'static, Vec<u8>>,
    hasher: Sha256,
    line: Vec<u8>,
    results: u64,
}

impl Builder {
    /// Starts the segment of batch `after`, `first..=last`, formed at
    /// `formed_at` (its header line).
    pub fn new(
        node: &str,
        after: u64,
        first: u64,
        last: u64,
        formed_at: OffsetDateTime,
    ) -> Result<Builder, SegmentError> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), LEVEL).map_err(encode_err)?;
        encoder.include_checksum(true).map_err(encode_err)?;
        let mut builder = Builder {
            name: object_name(node, formed_at, first, last),
            encoder,
            hasher: Sha256::new(),
            line: Vec::with_capacity(4096),
            results: 0,
        };
        let header = Header {
            vigie_segment: FORMAT,
            node: node.to_string(),
            after,
            first,
            last,
            formed_at,
        };
        serde_json::to_writer(&mut builder.line, &header).map_err(json_err)?;
        builder.emit()?;
        Ok(builder)
    }

    /// The object name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds one result.
    pub fn add(&mut self, shipped: &Shipped) -> Result<(), SegmentError> {
        let out = LineOut {
            seq: shipped.seq,
            key: hex(&shipped.key),
            outcome: &shipped.outcome,
        };
        serde_json::to_writer(&mut self.line, &out).map_err(json_err)?;
        self.emit()?;
        self.results += 1;
        Ok(())
    }

    /// The closing line; the object name and bytes.
    pub fn finish(mut self) -> Result<(String, Vec<u8>), SegmentError> {
        let trailer = Trailer {
            end: End {
                results: self.results,
                sha256: hex(&self.hasher.clone().finalize()),
            },
        };
        serde_json::to_writer(&mut self.line, &trailer).map_err(json_err)?;
        self.line.push(b'\n');
        self.encoder.write_all(&self.line).map_err(encode_err)?;
        let bytes = self.encoder.finish().map_err(encode_err)?;
        Ok((self.name, bytes))
    }

    /// Ends the line in the buffer, hashes and compresses it.
    fn emit(&mut self) -> Result<(), SegmentError> {
        self.line.push(b'\n');
        self.hasher.update(&self.line);
        let written = self.encoder.write_all(&self.line).map_err(encode_err);
        self.line.clear();
        written
    }
}

fn encode_err(e: std::io::Error) -> SegmentError {
    SegmentError::Encode(e.to_string())
}

fn json_err(e: serde_json::Error) -> SegmentError {
    SegmentError::Encode(e.to_string())
}

/// Reads and verifies a segment stored under `name` for `node`, whole:
/// every result in memory at once. `vigie restore` reads with [`read`]
/// instead, which holds one line at a time.
pub fn decode(node: &str, name: &str, bytes: &[u8]) -> Result<Segment, SegmentError> {
    let mut results = Vec::new();
    let header = read(node, name, bytes, |seq, outcome| {
        results.push((seq, outcome));
        Ok::<(), std::convert::Infallible>(())
    })?;
    let Ok(header) = header;
    Ok(Segment { header, results })
}

/// Reads the segment stored under `name` for `node` one line at a time,
/// handing each result to `each` as it is parsed, and verifies it (the
/// header against the name, each seq within the header's, the closing
/// count and sha256). Memory stays at one line ([`MAX_LINE_BYTES`]) and
/// zstd's window ([`MAX_WINDOW_LOG`]) whatever the segment inflates to: a
/// longer line refuses the segment where it passes the cap, without
/// reading the rest of it. `each` sees results before the closing line is
/// checked, so a caller that must not act on an unverified segment reads
/// it twice (`restore.rs`). The outer error is the segment's; the inner
/// one is what `each` returned, which stops the read.
pub fn read<E>(
    node: &str,
    name: &str,
    bytes: &[u8],
    each: impl FnMut(u64, Outcome) -> Result<(), E>,
) -> Result<Result<Header, E>, SegmentError> {
    read_hashing(node, name, bytes, Some(Sha256::new()), each)
}

/// [`read`] again of the same `bytes`, which [`read`] verified: every
/// check but the sha256 of the lines, which these bytes passed already
/// (hashing them twice was a tenth of a restore's time).
pub fn read_verified<E>(
    node: &str,
    name: &str,
    bytes: &[u8],
    each: impl FnMut(u64, Outcome) -> Result<(), E>,
) -> Result<Result<Header, E>, SegmentError> {
    read_hashing(node, name, bytes, None, each)
}

/// [`read`], with the sha256 of the lines checked when `hasher` is given.
fn read_hashing<E>(
    node: &str,
    name: &str,
    bytes: &[u8],
    mut hasher: Option<Sha256>,
    mut each: impl FnMut(u64, Outcome) -> Result<(), E>,
) -> Result<Result<Header, E>, SegmentError> {
    let mut decoder = zstd::stream::Decoder::new(bytes).map_err(SegmentError::Decompress)?;
    decoder
        .window_log_max(MAX_WINDOW_LOG)
        .map_err(SegmentError::Decompress)?;
    let mut reader = BufReader::new(std::io::Read::take(decoder, MAX_DECODED_BYTES));
    let mut line = Vec::new();
    let mut number = 1;
    let bad = |line: usize, detail: String| SegmentError::Line { line, detail };

    if read_line(&mut reader, &mut line, number)? == 0 {
        return Err(SegmentError::Empty);
    }
    let header: Header = serde_json::from_slice(&line)
        .map_err(|e| bad(number, format!("not a segment header: {e}")))?;
    check_header(node, name, &header)?;
    if let Some(hasher) = hasher.as_mut() {
        hasher.update(&line);
    }

    let mut count = 0u64;
    loop {
        number += 1;
        let read = read_line(&mut reader, &mut line, number)?;
        // A last line without its newline is as truncated as no last line.
        if read == 0 || !line.ends_with(b"\n") {
            return Err(SegmentError::Truncated);
        }
        if line.starts_with(b"{\"end\":") {
            let trailer: Trailer = serde_json::from_slice(&line)
                .map_err(|e| bad(number, format!("not a closing line: {e}")))?;
            if let Some(hasher) = hasher {
                let digest = hex(&hasher.finalize());
                if trailer.end.sha256 != digest {
                    return Err(SegmentError::Checksum {
                        expected: trailer.end.sha256,
                        found: digest,
                    });
                }
            }
            if trailer.end.results != count {
                return Err(SegmentError::Count {
                    announced: trailer.end.results,
                    found: count,
                });
            }
            return Ok(Ok(header));
        }
        if let Some(hasher) = hasher.as_mut() {
            hasher.update(&line);
        }
        let parsed: LineIn =
            serde_json::from_slice(&line).map_err(|e| bad(number, format!("not a result: {e}")))?;
        if parsed.seq < header.first || parsed.seq > header.last || parsed.key.len() != 24 {
            return Err(bad(
                number,
                format!(
                    "seq {} (key {}) is outside the segment's {}..={}",
                    parsed.seq,
                    crate::sanitize::terminal(&crate::sanitize::value(&parsed.key)),
                    header.first,
                    header.last
                ),
            ));
        }
        count += 1;
        if let Err(err) = each(parsed.seq, parsed.outcome) {
            return Ok(Err(err));
        }
    }
}

/// The next line of `reader` into `line`, newline included; its length (0
/// at the end). Refuses a line longer than [`MAX_LINE_BYTES`] as soon as
/// it passes the cap.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    number: usize,
) -> Result<usize, SegmentError> {
    line.clear();
    loop {
        let buffer = reader.fill_buf().map_err(SegmentError::Decompress)?;
        if buffer.is_empty() {
            return Ok(line.len());
        }
        let (take, ends) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if line.len() + take > MAX_LINE_BYTES {
            return Err(SegmentError::LineTooLong { line: number });
        }
        line.extend_from_slice(&buffer[..take]);
        reader.consume(take);
        if ends {
            return Ok(line.len());
        }
    }
}

/// The header must be a format this code reads, and agree with the name.
fn check_header(node: &str, name: &str, header: &Header) -> Result<(), SegmentError> {
    if header.vigie_segment > FORMAT {
        return Err(SegmentError::TooNew(header.vigie_segment));
    }
    let (name_first, name_last) = parse_name(node, name).unwrap_or_default();
    if header.node != node || header.first != name_first || header.last != name_last {
        return Err(SegmentError::Mismatch {
            node: header.node.clone(),
            first: header.first,
            last: header.last,
            expected_node: node.to_string(),
            name_first,
            name_last,
        });
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::store::Shipped;

    fn shipment(n: u64) -> Shipment {
        let at = datetime!(2026-11-29 07:00:00 UTC);
        Shipment {
            after: 4,
            first: 5,
            last: 4 + n.max(1),
            formed_at: datetime!(2026-11-29 23:59:59.5 UTC),
            results: (0..n)
                .map(|i| {
                    let mut outcome = crate::store::contract::up(
                        "site",
                        at + time::Duration::seconds(30 * i as i64),
                    );
                    outcome.duration_ms = 0.1 + i as f64 / 3.0;
                    Shipped {
                        seq: 5 + i,
                        key: [0, 0, 0, 1, 0, 0, 1, 2, 3, 4, 5, i as u8],
                        outcome,
                    }
                })
                .collect(),
            gone: 0,
        }
    }

    #[test]
    fn names_sort_like_their_numbers_and_parse_back() {
        let at = datetime!(2026-01-02 03:04:05 UTC);
        let name = object_name("prod-probe-1", at, 10, 255);
        assert_eq!(
            name,
            "history/prod-probe-1/2026/01/02/000000000000000a-00000000000000ff.ndjson.zst"
        );
        assert_eq!(parse_name("prod-probe-1", &name), Some((10, 255)));
        assert_eq!(parse_name("prod-probe-2", &name), None);
        assert_eq!(
            parse_name("prod-probe-1", "history/prod-probe-1/README"),
            None
        );
        assert_eq!(
            parse_name("team/probe", &object_name("team/probe", at, 1, 1)),
            Some((1, 1))
        );
    }

    #[test]
    fn a_segment_round_trips_exactly_and_deterministically() {
        let shipment = shipment(50);
        let (name, bytes) = encode("node-a", &shipment).unwrap();
        assert_eq!(
            name,
            "history/node-a/2026/11/29/0000000000000005-0000000000000036.ndjson.zst"
        );
        assert_eq!(
            encode("node-a", &shipment).unwrap().1,
            bytes,
            "same batch, same bytes"
        );
        let segment = decode("node-a", &name, &bytes).unwrap();
        assert_eq!(segment.header.after, 4);
        let expected: Vec<(u64, Outcome)> = shipment
            .results
            .iter()
            .map(|s| (s.seq, s.outcome.clone()))
            .collect();
        assert_eq!(segment.results, expected);
    }

    #[test]
    fn an_empty_batch_is_a_valid_segment() {
        let (name, bytes) = encode("n", &shipment(0)).unwrap();
        assert!(decode("n", &name, &bytes).unwrap().results.is_empty());
    }

    #[test]
    fn damage_is_detected_and_described() {
        let (name, bytes) = encode("node-a", &shipment(20)).unwrap();
        let mut flipped = bytes.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        assert!(decode("node-a", &name, &flipped).is_err());
        let cut = &bytes[..bytes.len() - 7];
        assert!(matches!(
            decode("node-a", &name, cut),
            Err(SegmentError::Decompress(_))
        ));
        let err = decode("node-a", &name, b"not zstd at all").unwrap_err();
        assert!(err.to_string().starts_with("cannot decompress it"), "{err}");

        // Well-formed zstd whose lines were altered: the sha256 catches it.
        let plain = zstd::decode_all(&bytes[..]).unwrap();
        let text = String::from_utf8(plain)
            .unwrap()
            .replacen("\"up\"", "\"down\"", 1);
        let forged = zstd::encode_all(text.as_bytes(), 3).unwrap();
        let err = decode("node-a", &name, &forged).unwrap_err();
        assert!(matches!(err, SegmentError::Checksum { .. }), "{err}");

        let without_end: String = String::from_utf8(zstd::decode_all(&bytes[..]).unwrap())
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("{\"end\""))
            .map(|l| format!("{l}\n"))
            .collect();
        let truncated = zstd::encode_all(without_end.as_bytes(), 3).unwrap();
        assert!(matches!(
            decode("node-a", &name, &truncated),
            Err(SegmentError::Truncated)
        ));

        let err = decode("node-b", &name.replace("node-a", "node-b"), &bytes).unwrap_err();
        assert!(matches!(err, SegmentError::Mismatch { .. }), "{err}");
    }

    /// The second read of a verified segment skips only the sha256: it
    /// hands over the same results, and a segment whose lines were
    /// altered is still refused by the first read.
    #[test]
    fn a_segment_read_again_without_its_hash_gives_the_same_results() {
        let (name, bytes) = encode("node-a", &shipment(20)).unwrap();
        let collect = |verified: bool| {
            let mut results = Vec::new();
            let each = |seq, outcome| {
                results.push((seq, outcome));
                Ok::<(), std::convert::Infallible>(())
            };
            let header = match verified {
                true => read_verified("node-a", &name, &bytes, each),
                false => read("node-a", &name, &bytes, each),
            };
            (header.unwrap().unwrap(), results)
        };
        let (header, results) = collect(false);
        let (again, results_again) = collect(true);
        assert_eq!(header, again);
        assert_eq!(results.len(), 20);
        assert_eq!(results, results_again);
    }

    #[test]
    fn a_line_past_the_cap_refuses_the_segment_there() {
        let (name, bytes) = encode("node-a", &shipment(3)).unwrap();
        let plain = String::from_utf8(zstd::decode_all(&bytes[..]).unwrap()).unwrap();
        let mut lines: Vec<&str> = plain.lines().collect();
        let long = format!("{{\"seq\":5,\"key\":\"{}\"}}", "a".repeat(MAX_LINE_BYTES));
        lines.insert(1, &long);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let hostile = zstd::encode_all(text.as_bytes(), 3).unwrap();
        let mut seen = 0;
        let err = read("node-a", &name, &hostile, |_, _| {
            seen += 1;
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap_err();
        assert!(
            matches!(err, SegmentError::LineTooLong { line: 2 }),
            "{err}"
        );
        assert_eq!(seen, 0);

        // One byte under the cap is a line like any other (here not a
        // result, so refused for that instead).
        let under = format!("{}\n", "b".repeat(MAX_LINE_BYTES - 1));
        lines[1] = under.trim_end();
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let err = decode(
            "node-a",
            &name,
            &zstd::encode_all(text.as_bytes(), 3).unwrap(),
        )
        .unwrap_err();
        assert!(matches!(err, SegmentError::Line { line: 2, .. }), "{err}");
    }

    #[test]
    fn a_frame_asking_for_a_window_over_the_limit_is_refused() {
        let (name, _) = encode("node-a", &shipment(1)).unwrap();
        // A frame header with a 32 MiB window (exponent 15), then a raw
        // block.
        let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
        frame.extend_from_slice(&[0x00, 15 << 3]);
        frame.extend_from_slice(&(1u32 | (4 << 3)).to_le_bytes()[..3]);
        frame.extend_from_slice(b"abcd");
        let err = decode("node-a", &name, &frame).unwrap_err();
        assert!(matches!(err, SegmentError::Decompress(_)), "{err}");
    }

    #[test]
    fn results_are_handed_over_as_read_and_a_callers_error_stops_the_read() {
        let (name, bytes) = encode("node-a", &shipment(10)).unwrap();
        let mut seqs = Vec::new();
        let header = read("node-a", &name, &bytes, |seq, _| {
            seqs.push(seq);
            Ok::<(), &str>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(header.first, 5);
        assert_eq!(seqs, (5..15).collect::<Vec<u64>>());
        let mut taken = 0;
        let stopped = read("node-a", &name, &bytes, |_, _| {
            taken += 1;
            if taken == 3 {
                return Err("store full");
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(stopped.unwrap_err(), "store full");
        assert_eq!(taken, 3);
    }
}
