//! Which layout a store holds: the version in `meta` / `schema_version`
//! and the sentinel file beside the database. What each version changed,
//! and how an older store is brought up to date at open, is in
//! `format/mod.rs`; the upgrades themselves are `sled/upgrade.rs`.

/// A file of vigie's own beside sled's, written once the schema version is
/// stored: sled opens a garbled or truncated file as an empty database,
/// and this file is how an empty database is told from a new one.
pub(in crate::store) const SENTINEL: &str = "vigie-store";

/// The layout this code reads and writes (`meta` / `schema_version`).
pub(in crate::store) const SCHEMA_VERSION: u32 = SCHEMA_JOURNAL;

/// The first layout with the `newest` tree (what `upgrade_from_1`
/// leaves).
pub(in crate::store) const SCHEMA_NEWEST: u32 = 2;

/// The first layout with `rollups` and `leaves` (what `upgrade_from_2`
/// leaves); version 4 writes every block column-wise, an hour of a check
/// to a block.
pub(in crate::store) const SCHEMA_ROLLUPS: u32 = 3;

/// The first layout with every block column-wise, an hour to a block
/// (what `upgrade_from_3` leaves).
pub(in crate::store) const SCHEMA_COLUMNS: u32 = 4;

/// The first layout with the unpacked singles in the journal file
/// (`format/journal.rs`) instead of the `newest` tree (what
/// `move_newest_to_journal` leaves).
pub(in crate::store) const SCHEMA_JOURNAL: u32 = 5;

/// `meta`: the schema version (u32 BE).
pub(in crate::store) const SCHEMA_KEY: &[u8] = b"schema_version";
