//! The column-wise block of a check's results (format byte
//! [`BLOCK_FORMAT_COLUMNS`]): what every `results` block is written as
//! since schema 4. The older blocks (`codec.rs`, formats 2 and 4) kept
//! each record whole, one after the other, and let LZ4 find what repeats;
//! this one takes a record apart so that what repeats is stored once and
//! what varies is stored as small numbers next to its like.
//!
//! A record is split into its *shape* (everything but the fields that
//! change at every probe: the durations, the body's size, the days left
//! of each certificate) and those fields. Results of one check mostly
//! share a shape (same target, status, HTTP version, chain key, the same
//! failure for every result of an outage), so a block stores each distinct
//! shape once, as postcard, and each result refers to one by index. The
//! rest is columns, one value per result:
//!
//! | column | values | encoding |
//! |---|---|---|
//! | count | the block's | varint (the header's, again) |
//! | shapes | distinct shapes | varint count, then postcard [`Full`]s |
//! | shape | one per result | varint index |
//! | started at | one per result | varint zigzag of the change in the gap since the previous result (a steady period is a run of zeros) |
//! | duration | one per result | f64 XORed with the previous, as 8 byte planes |
//! | response time | one per result with HTTP facts | as the duration |
//! | body size | one per result with HTTP facts | varint zigzag of the difference to the previous |
//! | days left | one per certificate of each result | varint zigzag of the difference to the previous result's certificate at the same position |
//!
//! The columns are concatenated in this order and compressed with zstd
//! (level [`LEVEL`]) behind the same 17-byte header as the older blocks
//! (format byte, count, last result's unix millis, uncompressed length),
//! so that a block's span is read without decompressing it. Byte planes
//! put the sign, exponent and high mantissa bytes of similar durations
//! side by side, where they are runs zstd's entropy coder shrinks to a
//! few bits.
//!
//! Nothing is rounded: every field reads back as it was written, the
//! floats to the bit.

pub(in crate::store) use super::codec::BLOCK_FORMAT_COLUMNS;
use super::codec::{block_header, write_header, DecodeError, Decoded, Full, BLOCK_HEADER};

/// zstd's level: 3 (its default) packs an hour of a check into about a
/// third of what LZ4 did for the same records, and compresses a block in
/// tens of microseconds.
const LEVEL: i32 = 3;

/// The value of a block holding `results` (sorted by millis, at least
/// one), to store under the first one's key.
pub(in crate::store) fn encode(results: &[(u64, Decoded)]) -> Vec<u8> {
    let base = results.first().map_or(0, |(millis, _)| *millis);
    let last = results.last().map_or(0, |(millis, _)| *millis);
    let mut shapes: Vec<Vec<u8>> = Vec::new();
    let mut indexes = Vec::with_capacity(results.len());
    let mut varying = Vec::with_capacity(results.len());
    for (_, decoded) in results {
        let (shape, fields) = decoded.0.clone().split();
        // As in `codec::to_bytes`: postcard into a Vec cannot fail.
        let bytes = postcard::to_allocvec(&shape).expect("postcard into a Vec cannot fail");
        let index = match shapes.iter().position(|known| *known == bytes) {
            Some(index) => index,
            None => {
                shapes.push(bytes);
                shapes.len() - 1
            }
        };
        indexes.push(index as u64);
        varying.push(fields);
    }
    let mut raw = Vec::new();
    put_varint(&mut raw, results.len() as u64);
    put_varint(&mut raw, shapes.len() as u64);
    for shape in &shapes {
        raw.extend_from_slice(shape);
    }
    for index in indexes {
        put_varint(&mut raw, index);
    }
    let (mut previous, mut gap) = (base, 0i64);
    for (millis, _) in results {
        let next_gap = millis.wrapping_sub(previous) as i64;
        put_varint(&mut raw, zigzag(next_gap.wrapping_sub(gap)));
        (previous, gap) = (*millis, next_gap);
    }
    put_planes(&mut raw, varying.iter().map(|v| v.duration_ms));
    put_planes(
        &mut raw,
        varying.iter().filter_map(|v| v.http.map(|(ms, _)| ms)),
    );
    put_deltas(
        &mut raw,
        varying
            .iter()
            .filter_map(|v| v.http.map(|(_, bytes)| bytes as i64)),
    );
    let mut before: Vec<i64> = Vec::new();
    for fields in &varying {
        for (position, days) in fields.days_left.iter().enumerate() {
            let previous = before.get(position).copied().unwrap_or(0);
            put_varint(&mut raw, zigzag(days.wrapping_sub(previous)));
        }
        before.clone_from(&fields.days_left);
    }
    // zstd into a Vec only fails on a level out of range or an allocation
    // failure; LEVEL is in range.
    let packed = zstd::bulk::compress(&raw, LEVEL).expect("zstd into a Vec cannot fail");
    let mut value = write_header(
        BLOCK_FORMAT_COLUMNS,
        results.len(),
        last,
        raw.len(),
        packed.len(),
    );
    value.extend_from_slice(&packed);
    value
}

/// Appends the results of the block `value` (stored under `key_millis`)
/// to `results`, decompressing with `zstd` into `raw` (both reused across
/// blocks).
pub(super) fn read(
    key_millis: u64,
    value: &[u8],
    zstd: &mut zstd::bulk::Decompressor<'static>,
    raw: &mut Vec<u8>,
    results: &mut Vec<(u64, Decoded)>,
) -> Result<(), DecodeError> {
    let (count, last, raw_len) = block_header(value)?;
    raw.clear();
    raw.resize(raw_len, 0);
    let written = zstd
        .decompress_to_buffer(&value[BLOCK_HEADER..], &mut raw[..])
        .map_err(|err| DecodeError(format!("block does not decompress: {err}")))?;
    if written != raw_len {
        return Err(disagree(count, last));
    }
    let mut cursor = Cursor(&raw[..]);
    if cursor.varint()? != count {
        return Err(disagree(count, last));
    }
    let shape_count = cursor.varint()?;
    if shape_count > count {
        return Err(disagree(count, last));
    }
    let mut shapes = Vec::with_capacity(shape_count as usize);
    for _ in 0..shape_count {
        let (shape, rest): (Full, _) = postcard::take_from_bytes(cursor.0)
            .map_err(|err| DecodeError(format!("block does not decode: {err}")))?;
        let slots = shape.varying_slots();
        shapes.push((shape, slots));
        cursor.0 = rest;
    }
    let count = usize::try_from(count).map_err(|_| disagree(count, last))?;
    // Every column holds at least a byte per value: a count the bytes
    // cannot hold is refused before anything is allocated for it.
    if count > cursor.0.len() {
        return Err(disagree(count as u64, last));
    }
    let mut indexes = Vec::with_capacity(count);
    let (mut with_http, mut certificates) = (0, 0);
    for _ in 0..count {
        let index = cursor.varint()?;
        let (_, (http, certs)) = shapes.get(index as usize).ok_or_else(|| {
            DecodeError(format!("block refers to shape {index} of {shape_count}"))
        })?;
        with_http += usize::from(*http);
        certificates += certs;
        indexes.push(index as usize);
    }
    let mut times = Vec::with_capacity(count);
    let (mut millis, mut gap) = (key_millis, 0i64);
    for n in 0..count {
        gap = gap.wrapping_add(unzigzag(cursor.varint()?));
        millis = millis.wrapping_add(gap as u64);
        if n > 0 && gap <= 0 {
            return Err(DecodeError(format!(
                "block results out of order at {millis}"
            )));
        }
        times.push(millis);
    }
    let durations = cursor.planes(count)?;
    let responses = cursor.planes(with_http)?;
    let bodies = cursor.deltas(with_http)?;
    // Every result's days left, one after the other.
    let mut days: Vec<i64> = Vec::with_capacity(certificates);
    let mut before = 0..0;
    for &index in &indexes {
        let certs = shapes[index].1 .1;
        let start = days.len();
        for position in 0..certs {
            let previous = match position < before.len() {
                true => days[before.start + position],
                false => 0,
            };
            days.push(previous.wrapping_add(unzigzag(cursor.varint()?)));
        }
        before = start..days.len();
    }
    if !cursor.0.is_empty() {
        return Err(DecodeError(format!(
            "block has {} bytes after its columns",
            cursor.0.len()
        )));
    }
    results.reserve(count);
    let mut http = responses.into_iter().zip(bodies);
    let mut days_at = 0;
    for ((index, millis), duration_ms) in indexes.into_iter().zip(times).zip(durations) {
        let (shape, (has_http, certs)) = &shapes[index];
        let http = match has_http {
            true => http.next().map(|(ms, bytes)| (ms, bytes as u64)),
            false => None,
        };
        let mut record = shape.clone();
        record.join(duration_ms, http, &days[days_at..days_at + certs]);
        days_at += certs;
        results.push((millis, Decoded(record)));
    }
    if results.last().map(|(millis, _)| *millis) != Some(last) {
        return Err(disagree(count as u64, last));
    }
    Ok(())
}

fn disagree(count: u64, last: u64) -> DecodeError {
    DecodeError(format!(
        "block header says {count} results up to {last}, its contents disagree"
    ))
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// LEB128: seven bits a byte, low first, the high bit set on all but the
/// last.
fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Floats XORed with the one before, as eight planes: every value's
/// lowest byte, then every value's next byte, and so on.
fn put_planes(out: &mut Vec<u8>, values: impl Iterator<Item = f64>) {
    let mut previous = 0u64;
    let xored: Vec<[u8; 8]> = values
        .map(|value| {
            let bits = value.to_bits();
            let xor = bits ^ previous;
            previous = bits;
            xor.to_le_bytes()
        })
        .collect();
    for plane in 0..8 {
        out.extend(xored.iter().map(|bytes| bytes[plane]));
    }
}

/// Integers as zigzag varints of the difference to the one before.
fn put_deltas(out: &mut Vec<u8>, values: impl Iterator<Item = i64>) {
    let mut previous = 0i64;
    for value in values {
        put_varint(out, zigzag(value.wrapping_sub(previous)));
        previous = value;
    }
}

/// The columns of a decompressed block, read from the front.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        for (position, &byte) in self.0.iter().enumerate().take(10) {
            n |= u64::from(byte & 0x7f) << (7 * position);
            if byte & 0x80 == 0 {
                self.0 = &self.0[position + 1..];
                return Ok(n);
            }
        }
        Err(DecodeError("block column ends inside a number".into()))
    }

    fn planes(&mut self, count: usize) -> Result<Vec<f64>, DecodeError> {
        let size = count
            .checked_mul(8)
            .filter(|size| *size <= self.0.len())
            .ok_or_else(|| DecodeError("block column of floats is cut short".into()))?;
        let (planes, rest) = self.0.split_at(size);
        self.0 = rest;
        let mut previous = 0u64;
        Ok((0..count)
            .map(|n| {
                let mut bytes = [0; 8];
                for (plane, byte) in bytes.iter_mut().enumerate() {
                    *byte = planes[plane * count + n];
                }
                previous ^= u64::from_le_bytes(bytes);
                f64::from_bits(previous)
            })
            .collect())
    }

    fn deltas(&mut self, count: usize) -> Result<Vec<i64>, DecodeError> {
        let mut previous = 0i64;
        (0..count)
            .map(|_| {
                previous = previous.wrapping_add(unzigzag(self.varint()?));
                Ok(previous)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_through_their_columns() {
        let mut raw = Vec::new();
        let ints = [0, 1, -1, i64::MAX, i64::MIN, 30_000, -29];
        for n in ints {
            put_varint(&mut raw, zigzag(n));
        }
        let floats = [40.0, 40.333_333, f64::NAN, -0.0, f64::INFINITY, 1e-300];
        put_planes(&mut raw, floats.iter().copied());
        put_deltas(&mut raw, ints.iter().copied());
        let mut cursor = Cursor(&raw);
        for n in ints {
            assert_eq!(unzigzag(cursor.varint().unwrap()), n);
        }
        let back = cursor.planes(floats.len()).unwrap();
        assert_eq!(
            back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(cursor.deltas(ints.len()).unwrap(), ints);
        assert!(cursor.0.is_empty());
        assert!(Cursor(&[0x80, 0x80]).varint().is_err());
        assert!(Cursor(&[0; 15]).planes(2).is_err());
    }
}
