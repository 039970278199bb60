//! A damaged history store at startup is moved aside, not fought with.
//!
//! sled does not report most damage: it opens a garbled or truncated file
//! as an empty database (its `SENTINEL` beside it tells vigie that is
//! damage), or panics inside `open`. Either way a daemon that exits on it
//! is restarted by systemd into the same damage forever. Instead the
//! directory is renamed to `<state_dir>/history.corrupt-<UTC timestamp>`
//! (kept for the operator, never opened again), a marker file
//! `<state_dir>/history.corrupt` says where it went, and a fresh store is
//! opened. The daemon pages once and lists the marker under `degraded`
//! until `vigie store ack-corrupt` or a successful `vigie restore` removes
//! it.
//!
//! sled's own recovery may already have written to the file while opening
//! it; from the moment vigie knows, nothing writes there again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use time::OffsetDateTime;

use super::error::StoreError;
use super::sled::SledStore;

/// The marker naming the store set aside, in `state_dir`.
pub const CORRUPT_MARKER: &str = "history.corrupt";

/// A store found damaged and moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// Where the damaged directory is now.
    pub moved_to: PathBuf,
    /// What was wrong with it.
    pub why: String,
}

impl SetAside {
    /// The page and the log line.
    pub fn message(&self) -> String {
        format!(
            "history store was corrupt ({}); moved aside to {}; vigie started on an empty store. `vigie restore` brings the replicated history back; `vigie store ack-corrupt` clears this notice",
            self.why,
            self.moved_to.display()
        )
    }
}

/// Opens the history at `dir` (in `state_dir`), setting it aside first if
/// it is damaged; see the module docs. Any failure to open it is damage
/// but three, which are errors as before: the disk refusing it
/// ([`StoreError::is_disk_refusal`]: permission, no space, read-only), a
/// lock held by another vigie, and a schema written by a newer vigie;
/// moving those aside would hide a mistake of the operator's behind an
/// empty history.
pub fn open_or_set_aside(
    dir: &Path,
    flush_every: Duration,
    now: OffsetDateTime,
) -> Result<(SledStore, Option<SetAside>), StoreError> {
    let why = match catch_open(dir, flush_every) {
        Ok(store) => return Ok((store, None)),
        Err(Damage::Not(err)) => return Err(err),
        Err(Damage::Found(why)) => why,
    };
    // The failed open's handles are gone; sled lets go of its lock a
    // moment later.
    let moved_to = aside_path(dir, now);
    let mut renamed = std::fs::rename(dir, &moved_to);
    for _ in 0..50 {
        if renamed.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        renamed = std::fs::rename(dir, &moved_to);
    }
    let aside = SetAside { moved_to, why };
    let set_aside = |source: std::io::Error| StoreError::Io {
        path: dir.to_path_buf(),
        action: format!(
            "be moved aside to {} after damage ({})",
            aside.moved_to.display(),
            aside.why
        ),
        cause: ::sled::Error::Io(source),
    };
    renamed.map_err(set_aside)?;
    if let Some(state_dir) = dir.parent() {
        let marker = format!("{}\n{}\n", aside.moved_to.display(), aside.why);
        std::fs::write(state_dir.join(CORRUPT_MARKER), marker).map_err(set_aside)?;
    }
    let store = SledStore::open(dir, flush_every)?;
    Ok((store, Some(aside)))
}

/// The store moved aside earlier and not yet acknowledged, from the marker
/// in `state_dir`.
pub fn set_aside_earlier(state_dir: &Path) -> Option<SetAside> {
    let text = std::fs::read_to_string(state_dir.join(CORRUPT_MARKER)).ok()?;
    let mut lines = text.lines();
    let moved_to = PathBuf::from(lines.next()?);
    let why = lines.next().unwrap_or_default().to_string();
    Some(SetAside { moved_to, why })
}

/// Removes the marker (`vigie store ack-corrupt`, a successful restore);
/// `Ok(None)` when there was none.
pub fn acknowledge(state_dir: &Path) -> std::io::Result<Option<SetAside>> {
    let earlier = set_aside_earlier(state_dir);
    match std::fs::remove_file(state_dir.join(CORRUPT_MARKER)) {
        Ok(()) => Ok(earlier),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

enum Damage {
    /// Damaged: why.
    Found(String),
    /// Failed for another reason.
    Not(StoreError),
}

fn catch_open(dir: &Path, flush_every: Duration) -> Result<SledStore, Damage> {
    let opened = std::panic::catch_unwind(|| SledStore::open(dir, flush_every));
    match opened {
        Ok(Ok(store)) => Ok(store),
        Ok(Err(StoreError::Corrupt { what, detail, .. })) => {
            Err(Damage::Found(format!("{what}: {detail}")))
        }
        // Refused by the disk: a temporary store waits for it. Locked: another
        // vigie. Too new: a downgrade, the operator's to decide.
        Ok(Err(err)) if err.is_disk_refusal() => Err(Damage::Not(err)),
        Ok(Err(err @ (StoreError::Locked { .. } | StoreError::SchemaTooNew { .. }))) => {
            Err(Damage::Not(err))
        }
        // Anything else sled cannot open (a damaged `conf`, a format it does
        // not support, a failed checksum, an I/O error that is not the
        // disk refusing) is damage.
        Ok(Err(StoreError::Open { cause, .. } | StoreError::Io { cause, .. })) => {
            Err(Damage::Found(format!("sled cannot read it: {cause}")))
        }
        Ok(Err(other)) => Err(Damage::Found(other.brief())),
        Err(panic) => Err(Damage::Found(format!(
            "sled panicked while opening it: {}",
            crate::supervise::panic_message(panic)
        ))),
    }
}

fn aside_path(dir: &Path, now: OffsetDateTime) -> PathBuf {
    let stamp = crate::clock::compact_utc(now);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "history".to_string());
    let base = dir.with_file_name(format!("{name}.corrupt-{stamp}"));
    // Two damages within a second keep both.
    let mut path = base.clone();
    let mut n = 1;
    while path.exists() {
        path = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    path
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::store::Store;

    const T0: OffsetDateTime = datetime!(2026-12-01 03:00:00 UTC);

    fn written_store(state: &Path) -> PathBuf {
        let dir = state.join("history");
        let store = SledStore::open(&dir, Duration::ZERO).unwrap();
        // Enough to fill more than one of sled's segments, so that half the
        // file is not all of it.
        for i in 0..20_000 {
            let at = T0 - Duration::from_secs(i);
            store
                .append(&crate::store::contract::up(&format!("site-{}", i % 50), at))
                .unwrap();
            // Packs wait for the journal's flush (there is no background
            // one here); each result after them is a late one, into sled.
            if i % 1000 == 999 {
                store.flush().unwrap();
            }
        }
        store.flush().unwrap();
        drop(store);
        dir
    }

    /// sled lets go of its lock a moment after the last handle is dropped.
    fn reopen(dir: &Path) -> (SledStore, Option<SetAside>) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match open_or_set_aside(dir, Duration::ZERO, T0) {
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other.unwrap(),
            }
        }
    }

    fn damage(dir: &Path, how: &str) {
        let db = dir.join("db");
        let size = std::fs::metadata(&db).unwrap().len();
        match how {
            "garbage" => {
                let garbage: Vec<u8> = (0..size).map(|i| (i * 7919 % 251) as u8).collect();
                std::fs::write(&db, garbage).unwrap();
            }
            "truncated" => {
                let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
                file.set_len(size / 2).unwrap();
            }
            "cut short" => {
                let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
                file.set_len(100).unwrap();
            }
            // sled's own settings file, which it parses before the data.
            "conf" => std::fs::write(dir.join("conf"), "segment_size: lots\nversion: ?\n\0\0\0\0")
                .unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_damaged_store_is_moved_aside_and_a_fresh_one_opened() {
        let written = tempfile::tempdir().unwrap();
        let original = written_store(written.path());
        for how in ["garbage", "truncated", "cut short", "conf"] {
            let state = tempfile::tempdir().unwrap();
            let dir = state.path().join("history");
            crate::store::sled::tests::copy_dir(&original, &dir);
            damage(&dir, how);
            let (store, aside) = reopen(&dir);
            let aside = aside.unwrap_or_else(|| panic!("{how}: not set aside"));
            assert_eq!(
                aside.moved_to,
                state.path().join("history.corrupt-20261201T030000Z"),
                "{how}"
            );
            assert!(
                aside.moved_to.join("db").exists(),
                "{how}: the damage is kept"
            );
            assert_eq!(store.len().unwrap(), 0, "{how}: a fresh store");
            assert_eq!(
                set_aside_earlier(state.path()),
                Some(aside.clone()),
                "{how}"
            );
            assert!(aside.message().contains("vigie restore"), "{how}");
            assert_eq!(acknowledge(state.path()).unwrap(), Some(aside), "{how}");
            assert_eq!(set_aside_earlier(state.path()), None, "{how}");
            assert_eq!(acknowledge(state.path()).unwrap(), None, "{how}");
        }
    }

    #[test]
    fn a_sound_store_and_a_new_one_open_as_they_are() {
        let state = tempfile::tempdir().unwrap();
        let fresh = state.path().join("fresh");
        let (_store, aside) = open_or_set_aside(&fresh, Duration::ZERO, T0).unwrap();
        assert_eq!(aside, None);
        let dir = written_store(state.path());
        let (store, aside) = reopen(&dir);
        assert_eq!(aside, None);
        assert_eq!(store.len().unwrap(), 20_000);
    }
}
