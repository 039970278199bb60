//! Segment objects written as a vigie would (`segment::encode`) and as an
//! attacker with write access to the bucket would: a few KiB of zstd that
//! inflate to one line of gigabytes.

use time::{Duration, OffsetDateTime};
use vigie::replicate::segment;
use vigie::store::{Shipment, Shipped};

use super::history;

/// A genuine segment of `node` holding `n` results of check `site`, seqs
/// `first..first + n`, after seq `after`.
pub fn genuine(
    node: &str,
    after: u64,
    first: u64,
    n: u64,
    at: OffsetDateTime,
) -> (String, Vec<u8>) {
    let shipment = Shipment {
        after,
        first,
        last: first + n - 1,
        formed_at: at,
        results: (0..n)
            .map(|i| {
                let started = at + Duration::seconds(i as i64);
                let millis = (started.unix_timestamp_nanos() / 1_000_000) as u64;
                let mut key = [0u8; 12];
                key[..4].copy_from_slice(&1u32.to_be_bytes());
                key[4..].copy_from_slice(&millis.to_be_bytes());
                Shipped {
                    seq: first + i,
                    key,
                    outcome: history::outcome("site", started, i),
                }
            })
            .collect(),
        gone: 0,
    };
    segment::encode(node, &shipment).expect("a segment encodes")
}

/// A segment of `node` named for seq `seq`, whose header is genuine and
/// whose second line is `line_bytes` bytes of `a` without a newline: zstd
/// RLE blocks of 128 KiB, 4 bytes each, so 2 GiB cost 64 KiB.
pub fn one_long_line(
    node: &str,
    after: u64,
    seq: u64,
    at: OffsetDateTime,
    line_bytes: u64,
) -> (String, Vec<u8>) {
    let name = segment::object_name(node, at, seq, seq);
    let header = serde_json::json!({
        "vigie_segment": segment::FORMAT,
        "node": node,
        "after": after,
        "first": seq,
        "last": seq,
        "formed_at": at.format(&time::format_description::well_known::Rfc3339).unwrap(),
    });
    let start = format!("{header}\n{{\"seq\":{seq},\"key\":\"");
    let mut bytes = zstd::encode_all(start.as_bytes(), 3).expect("zstd");
    // A second frame: magic, a descriptor without content size or
    // checksum, a 128 KiB window, then RLE blocks.
    bytes.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    bytes.push(0x00);
    bytes.push(7 << 3);
    const BLOCK: u64 = 128 * 1024;
    let mut left = line_bytes;
    while left > 0 {
        let size = left.min(BLOCK);
        left -= size;
        let last = u32::from(left == 0);
        let block_header = last | (1 << 1) | ((size as u32) << 3);
        bytes.extend_from_slice(&block_header.to_le_bytes()[..3]);
        bytes.push(b'a');
    }
    (name, bytes)
}
