//! The journal file's bytes (`<store dir>/newest.journal`, written by
//! `sled/journal.rs`): a header, then frames one after the other, each a
//! check's unpacked result exactly as a `newest` value held it (a record,
//! format byte `1`, `codec.rs`).
//!
//! | part | bytes |
//! |------|-------|
//! | header | [`MAGIC`] (8 bytes: `vigie` `jn` and the file format, 1) |
//! | frame | record length (u32 BE) ++ check id (u32 BE) ++ started_at unix millis (u64 BE) ++ record ++ CRC-32 (u32 BE) of everything before it in the frame |
//!
//! The checksum is what tells a frame a power loss tore, or a disk
//! garbled, from a good one: a reader stops at the first frame that is
//! short or does not match and trusts nothing after it.

/// The file's first bytes: what it is, and its format (the last byte).
pub(in crate::store) const MAGIC: &[u8; 8] = b"vigiejn\x01";

/// Length, id and millis before the record; the CRC after it.
const HEAD: usize = 16;
const CRC: usize = 4;

/// A record longer than this is a garbled length, not a result (a record
/// is about 70 bytes; an inline chain of a dozen certificates a few KB).
const MAX_RECORD: usize = 1 << 20;

/// One frame read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct Frame<'a> {
    pub(in crate::store) id: u32,
    pub(in crate::store) millis: u64,
    pub(in crate::store) record: &'a [u8],
}

/// Why reading stopped before the end of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum Damage {
    /// Fewer bytes than the frame claims: a write cut short.
    Torn,
    /// The bytes are all there and do not match their checksum.
    Checksum,
    /// A length no record has.
    Length(u32),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Torn => write!(f, "a frame cut short"),
            Damage::Checksum => write!(f, "a frame whose checksum does not match"),
            Damage::Length(len) => write!(f, "a frame claiming a {len}-byte record"),
        }
    }
}

/// The bytes of a frame for `record`, appended to `out`.
pub(in crate::store) fn encode(out: &mut Vec<u8>, id: u32, millis: u64, record: &[u8]) {
    let start = out.len();
    // A record is far below 4 GiB (see MAX_RECORD); a longer one would
    // be refused when read back, never silently cut.
    out.extend_from_slice(&(record.len() as u32).to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&millis.to_be_bytes());
    out.extend_from_slice(record);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// The size of the frame [`encode`] makes for a record of `len` bytes.
pub(in crate::store) fn frame_len(len: usize) -> usize {
    HEAD + len + CRC
}

/// The frame at the start of `bytes` and its length; `Ok(None)` at the
/// end of the bytes.
pub(in crate::store) fn read(bytes: &[u8]) -> Result<Option<(Frame<'_>, usize)>, Damage> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let Some(head) = bytes.get(..HEAD) else {
        return Err(Damage::Torn);
    };
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let len = be32(0);
    if len as usize > MAX_RECORD {
        return Err(Damage::Length(len));
    }
    let total = frame_len(len as usize);
    let Some(frame) = bytes.get(..total) else {
        return Err(Damage::Torn);
    };
    let (body, crc) = frame.split_at(total - CRC);
    if crc32fast::hash(body).to_be_bytes() != crc {
        return Err(Damage::Checksum);
    }
    let mut millis = [0; 8];
    millis.copy_from_slice(&head[8..16]);
    Ok(Some((
        Frame {
            id: be32(4),
            millis: u64::from_be_bytes(millis),
            record: &body[HEAD..],
        },
        total,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_frames() -> Vec<u8> {
        let mut bytes = Vec::new();
        encode(&mut bytes, 7, 1_000, b"\x01abc");
        encode(&mut bytes, 8, 2_000, b"\x01defgh");
        bytes
    }

    #[test]
    fn frames_read_back_in_order_then_the_end() {
        let bytes = two_frames();
        let (first, used) = read(&bytes).unwrap().unwrap();
        assert_eq!(
            first,
            Frame {
                id: 7,
                millis: 1_000,
                record: b"\x01abc"
            }
        );
        assert_eq!(used, frame_len(4));
        let (second, rest) = read(&bytes[used..]).unwrap().unwrap();
        assert_eq!(
            (second.id, second.millis, second.record),
            (8, 2_000, &b"\x01defgh"[..])
        );
        assert_eq!(read(&bytes[used + rest..]), Ok(None));
    }

    #[test]
    fn a_cut_frame_is_torn_and_a_flipped_byte_fails_the_checksum() {
        let bytes = two_frames();
        let first = frame_len(4);
        for cut in [first + 1, first + 10, bytes.len() - 1] {
            assert_eq!(read(&bytes[first..cut]), Err(Damage::Torn), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[first + HEAD + 2] ^= 0x40;
        assert_eq!(read(&flipped[first..]), Err(Damage::Checksum));
        let mut long = bytes;
        long[first..first + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(read(&long[first..]), Err(Damage::Length(u32::MAX)));
    }
}
