//! The history's on-disk contract: what a key looks like (`keys.rs`),
//! what a value holds (`codec.rs` for results and chains, `columns.rs` for
//! the column-wise blocks, `entries.rs` for a value of either, `rollups.rs`
//! for rollups and the certificate timeline, `journal.rs` for the
//! journal file of the unpacked results) and how versions are read
//! (`schema.rs`). A store written by one vigie is read by the next, so
//! everything below is format: a key's bytes, a value's format byte, field
//! and variant order, the codes of the `*_code` functions. Changing any of
//! it is a new format byte or schema version with a reader for the old
//! one, never an edit in place.
//!
//! None of it knows sled: keys and values are bytes here, the trees they
//! go in are opened by `sled/mod.rs` and written by the files beside it.
//!
//! # Key layout (sled, schema version 5)
//!
//! | tree         | key                                   | value |
//! |--------------|---------------------------------------|-------|
//! | `results`    | check id (u32 BE) ++ started_at unix millis (u64 BE) | a block of the check's consecutive records from this time on (format byte `5`, header, zstd of columns; see `columns.rs`), or one record (format byte `1` ++ postcard) that arrived late, between blocks; see `codec.rs` |
//! | `checks`     | `n` ++ name (UTF-8)                   | check id (u32 BE) |
//! | `checks`     | `i` ++ check id (u32 BE)              | name (UTF-8) |
//! | `checks`     | `s` ++ check id ++ index (u32 BE each) | one string of the check's dictionary |
//! | `chains`     | chain key (16 bytes)                  | format byte `1` ++ postcard list of certificates |
//! | `chain_uses` | chain key ++ check id (u32 BE)        | last use, unix millis (u64 BE), at most an hour stale |
//! | `meta`       | `schema_version`                      | u32 BE |
//! | `meta`       | `replication_cursor`                  | last replicated seq (u64 BE); present once replication was enabled or restored |
//! | `meta`       | `replication_pending`                 | batch in flight: after, last seq, formed-at millis (u64 BE each) |
//! | `meta`       | `refused_segment/` ++ segment name    | a segment `vigie restore` refused: its ETag, a newline, why |
//! | `replication` | seq (u64 BE)                         | results key (check id u32 BE ++ millis u64 BE) not yet replicated |
//! | `rollups`    | check id (u32 BE) ++ `h` or `d` ++ bucket start unix millis (u64 BE) | format byte `1` ++ postcard: newest result counted (millis), up, warn, down, max ms, fewest days left, histogram (bucket, count)..., leaves (sha256 as 32 bytes, count)... |
//! | `leaves`     | check id (u32 BE) ++ `x` ++ sha256 (32 bytes), or ++ `t` ++ text | format byte `1` ++ postcard: subject, issuer, not_before, not_after, first seen, last seen (unix millis; last seen at most an hour stale) |
//!
//! A rollup is one key per check and hour or day (about 70 bytes of key
//! and value for a check serving one leaf), so a check's 90 days are one
//! range scan of 90 keys. Its value also records the newest result it
//! counts (unix millis), which the catch-up after an unclean stop starts
//! from. A leaf's key is written when the leaf is new, seen earlier than
//! before, or an hour after its last write.
//!
//! A check's newest results (its *singles*) are not in sled: they are held
//! in memory and in the journal file beside sled's, `newest.journal`
//! (`journal.rs`: a header, then one checksummed frame per single, check
//! id, millis and the record as `codec.rs` encodes it); older ones are
//! packed into blocks of 20 in `results` (`SledStore`'s packing), and
//! those are merged into blocks of 120 (an hour of a 30 s check) once
//! they add up to one, which is what keeps a result under 10 bytes of
//! key and value and a day of one check to 24 keys. A block is
//! column-wise (`columns.rs`): each distinct record *shape* (the record
//! without its durations, body size and days left) once, each result an
//! index to its shape, and the varying fields and start times as columns
//! of small numbers, compressed with zstd. Entries of one check never overlap in time,
//! and every single is later than the check's `results`, so `history` is
//! one range scan over the check's prefix in `results`, starting at the
//! block `since` falls into, then its singles. A journal frame at or
//! before the check's last `results` entry is a single packed since the
//! file was last rewritten: the replay at open skips it.
//!
//! The singles are out of sled because of how sled 0.34 spends disk:
//! every write to a leaf appends to its log, and every tenth rewrites the
//! whole leaf. In `results`, a check's singles shared leaves with its last
//! blocks (1–2 KB each), so each append rewrote kilobytes of blocks (253
//! bytes/result allocated for 22 of data, benches/store.rs); in a tree of
//! their own (`newest`, schemas 2 to 4), written once and removed minutes
//! later, they still made sled's log rewrite about 740 bytes per result
//! and were most of its file (56 to 63 bytes/result of the store's 40-byte
//! aim; see `docs/performance.md`).
//!
//! Check ids are allocated once per name (the highest id plus one), never
//! reused, and survive restarts: `checks` entries are never deleted, so a
//! check that comes back gets its old history back.
//!
//! A record does not repeat what a check repeats. The check's name is its
//! id in the key. Strings that stay the same for weeks (target URL, HTTP and
//! TLS versions, cipher suite, server name, CORS answers, issuer names in
//! verify errors) go to the check's append-only dictionary once and are
//! referenced by index; past 1024 entries per check they are stored inline.
//! The kind stays in the record (one byte): a check may change kind under
//! the same name, and old results must keep theirs. The certificate chain
//! (all but `days_left`, which is what the probe computed and is kept per
//! record, one varint per certificate; `hours_left` and `lifetime_hours`
//! are not stored: they are derived on read from `started_at` and the
//! dates, as the probe computes them) is stored once in `chains`, keyed by
//! the first 16 bytes of the SHA-256 of its encoding; that encoding carries
//! every certificate's SHA-256 fingerprint, so the key identifies the
//! certificates, and a change in how they are described (a parser upgrade)
//! makes a new entry rather than showing old text for new results.
//!
//! `chain_uses` lets [`Store::sweep`](crate::store::Store::sweep) drop chains no result refers to without
//! reading results: each (chain, check) pair keeps the time of its last use,
//! rewritten at most once an hour, so a chain whose every use is more than an
//! hour older than the sweep's cutoff is unreferenced.
//!
//! # Schema versions
//!
//! Each value starts with a format byte that its reader checks (results:
//! `1` a record, `2` a block, `3` and `4` the same with extensions, `5` a
//! column-wise block; chains, rollups and leaves: `1`): a byte a reader
//! does not know is refused and named, never guessed at. The layout as a
//! whole has a version, in `meta` / `schema_version`
//! ([`schema::SCHEMA_VERSION`], 5). At open a
//! fresh store gets the current version; a newer one is refused before
//! anything is written; an older one is upgraded in place
//! (`sled/upgrade.rs`); and a database found empty beside the sentinel
//! file [`schema::SENTINEL`] is damage, not a new store.
//!
//! Schema 4 kept the singles in the `newest` tree (key: check id ++
//! millis; value: one record, after the check's last `results` entry).
//! Opening such a store puts them in memory (dropping copies a block
//! covers), writes the journal file whole and `fsync`s it, then empties
//! and drops the tree, then bumps the version (after the older upgrades
//! below, which read the singles from memory by then); a stop before the
//! bump finds the tree gone or the same singles in both.
//!
//! Schema 3 wrote every block as its records one after the other, LZ4
//! (formats `2` and `4`), twenty to a block. Opening such a store
//! rewrites each check's blocks column-wise, 120 results to a block, in
//! batches that each remove the entries they replace, then bumps the
//! version (an interrupted rewrite is done again by the next open;
//! rewriting a column-wise block gives the same block). Blocks of the
//! older formats are still read wherever they are found.
//!
//! Schema 2 had no `rollups` and no `leaves`. Opening such a store builds
//! them once from its raw results, a day of one check at a time, then
//! bumps the version (an interrupted build is started over at the next
//! open). That is the only time rollups are made by scanning results.
//!
//! Schema 1 had no `newest`: the singles sat in `results` after the last
//! block. Opening such a store moves them to `newest` first (copy, then
//! remove, then bump the version; an interrupted move leaves copies that
//! the move to the journal skips), and on to the journal as above.

pub(super) mod codec;
pub(super) mod columns;
pub(super) mod entries;
pub(super) mod journal;
pub(super) mod keys;
pub(super) mod rollups;
pub(super) mod schema;
