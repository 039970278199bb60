//! One configuration file held in memory, and the translation of byte
//! offsets (what `toml` spans are) into the 1-based line and column a person
//! reads.
//!
//! Columns count characters, not bytes, so a position after a non-ASCII
//! character still lands under the right place in an editor.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// The text of one file, where it came from, and where its lines start.
#[derive(Debug)]
pub(crate) struct Source {
    pub path: PathBuf,
    pub text: String,
    /// Position of this file in the load order (config first, then checks
    /// files by name); problems are listed in that order.
    pub rank: usize,
    /// Byte offset of the first character of each line.
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(path: &Path, text: String, rank: usize) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self {
            path: path.to_path_buf(),
            text,
            rank,
            line_starts,
        }
    }

    /// 1-based (line, column) of a byte offset. Offsets past the end (toml
    /// reports "unexpected end of file" there) point just after the last
    /// character.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        // `line_starts[0] == 0`, so the partition point is at least 1.
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let col = match self.text.get(start..offset) {
            Some(prefix) => prefix.chars().count(),
            // Not on a character boundary: should not happen with toml's
            // spans, but a byte count is still a useful answer.
            None => offset - start,
        };
        (line, col + 1)
    }

    /// Where a span starts.
    pub fn span_position(&self, span: &Range<usize>) -> (usize, usize) {
        self.position(span.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source::new(Path::new("x.toml"), text.to_owned(), 0)
    }

    #[test]
    fn first_character_is_line_1_column_1() {
        assert_eq!(source("a = 1\n").position(0), (1, 1));
    }

    #[test]
    fn offsets_count_from_the_start_of_their_line() {
        let src = source("a = 1\nbb = 2\n");
        assert_eq!(src.position(4), (1, 5));
        assert_eq!(src.position(5), (1, 6), "the newline itself");
        assert_eq!(src.position(6), (2, 1));
        assert_eq!(src.position(11), (2, 6));
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        // "é" is two bytes; the 1 after `= ` is the 9th character.
        let src = source("[x]\né = \"é\" # 1\n");
        let offset = src.text.find('#').unwrap_or_default();
        assert_eq!(src.position(offset), (2, 9));
    }

    #[test]
    fn end_of_file_points_after_the_last_character() {
        let src = source("a = ");
        assert_eq!(src.position(4), (1, 5));
        assert_eq!(src.position(400), (1, 5));
        let src = source("a = 1\n");
        assert_eq!(src.position(6), (2, 1));
    }

    #[test]
    fn empty_file() {
        assert_eq!(source("").position(0), (1, 1));
    }

    #[test]
    fn crlf_line_endings() {
        let src = source("a = 1\r\nb = 2\r\n");
        assert_eq!(src.position(7), (2, 1));
    }
}
