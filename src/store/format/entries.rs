//! A `results` value, whatever its format: a lone record, a row block
//! (`codec.rs`) or a column-wise block (`columns.rs`). What the sled trees
//! read and write goes through here, so neither format's file needs the
//! other's.

use super::codec::{
    self, entry_format_error, DecodeError, Decoded, BLOCK_FORMAT, BLOCK_FORMAT_COLUMNS,
    BLOCK_FORMAT_EXT, RECORD_FORMAT, RECORD_FORMAT_EXT,
};
use super::columns;

/// A block of `results` (sorted by millis, at least one): the value to store
/// under the first one's key. Every block is written column-wise
/// (`format/columns.rs`); [`encode_row_block`] is the layout before it.
pub(in crate::store) fn encode_block(results: &[(u64, Decoded)]) -> Vec<u8> {
    columns::encode(results)
}

/// Every result of a `results` value, with its millis, oldest first.
pub(in crate::store) fn parse_entry(
    key_millis: u64,
    value: &[u8],
) -> Result<Vec<(u64, Decoded)>, DecodeError> {
    let mut reader = Reader::default();
    reader.read(key_millis, value)?;
    Ok(reader.results)
}

/// Reads `results` values one after the other, reusing its buffers: a
/// history of 24 blocks allocates them once, not 48 times (each large
/// allocation makes glibc's malloc consolidate everything freed since).
#[derive(Default)]
pub(in crate::store) struct Reader {
    raw: Vec<u8>,
    results: Vec<(u64, Decoded)>,
    /// zstd's context for column-wise blocks, made at the first one:
    /// making one per block cost more than decompressing it.
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

impl Reader {
    /// The results of one value, with their millis, oldest first.
    pub fn read(
        &mut self,
        key_millis: u64,
        value: &[u8],
    ) -> Result<&mut Vec<(u64, Decoded)>, DecodeError> {
        self.results.clear();
        match value.first() {
            Some(&RECORD_FORMAT | &RECORD_FORMAT_EXT) => {
                self.results.push((key_millis, Decoded::parse(value)?))
            }
            Some(&BLOCK_FORMAT | &BLOCK_FORMAT_EXT) => {
                codec::read_row_block(key_millis, value, &mut self.raw, &mut self.results)?
            }
            Some(&BLOCK_FORMAT_COLUMNS) => {
                let zstd = match &mut self.zstd {
                    Some(zstd) => zstd,
                    slot => slot.insert(zstd::bulk::Decompressor::new().map_err(|err| {
                        DecodeError(format!("block cannot be decompressed here: {err}"))
                    })?),
                };
                columns::read(key_millis, value, zstd, &mut self.raw, &mut self.results)?
            }
            _ => return Err(entry_format_error(value)),
        }
        Ok(&mut self.results)
    }
}
