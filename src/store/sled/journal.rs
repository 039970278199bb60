//! The journal file of the unpacked results, `<store dir>/newest.journal`
//! (frames as `format/journal.rs` lays them out): how the singles held in
//! memory (`sled/singles.rs`) come back after a stop. It owns the file,
//! its replay at open, the flush that writes what appends buffered, the
//! checkpoint that rewrites it, and the background thread that flushes
//! every `flush_every`. What goes into a frame, and when singles are
//! packed, is `sled/history.rs`'s.
//!
//! Why a file of its own: as a sled tree, the singles (each written once
//! and removed minutes later, when packed) made sled's log rewrite about
//! 740 bytes per result and were most of sled's file
//! (`docs/performance.md`).
//!
//! Ordering with sled. An append writes to sled what its result refers
//! to (the check id, dictionary strings, the chain), then buffers the
//! result's frame in memory ([`State::unwritten`]). A flush takes the
//! buffer, then calls `db.flush()` (every sled write the taken frames
//! refer to, and every block packed so far, is then on disk), then
//! writes the frames to the file and `fsync`s it. So a frame on disk
//! never refers to something sled lost. Each flush is an *epoch*: the
//! frames buffered between two takes; once a flush's file write is done,
//! [`State::durable_epoch`] says so, and a pack takes only singles of a
//! durable epoch (`sled/history.rs`), so that a block sled keeps never
//! holds a result that the journal, and so the other checks' results
//! appended before it, lost: what survives an unclean stop is the
//! results appended up to the last flush, every check alike.
//!
//! Checkpoint. When the file has grown past [`CHECKPOINT_FLOOR`] and four
//! times what the singles in memory take, a flush writes, instead of the
//! buffer, every single in memory to a new file (`newest.journal.tmp`,
//! `fsync`ed, renamed over, the directory `fsync`ed). It takes them with
//! the buffer, before `db.flush()`: a single packed since then is in a
//! block that flush made durable. A sweep also asks for one, before it
//! removes chains, so that a replay never brings back a single older
//! than a sweep with a chain the sweep removed.
//!
//! Failures. A failed flush is logged, remembered and handed to the next
//! append or [`Store::flush`](crate::store::Store::flush) as its error;
//! the flush after it is a checkpoint (the file may end in a torn frame
//! then, and the buffer it took is gone: the singles in memory are the
//! whole truth).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ::sled::Db;

use super::state::State;
use super::SledStore;
use crate::store::error::StoreError;
use crate::store::format::journal::{self, Damage, Frame, MAGIC};

/// The journal's file name in the store's directory.
pub(super) const FILE: &str = "newest.journal";

/// Where a checkpoint is written before it is renamed over [`FILE`].
const TEMPORARY: &str = "newest.journal.tmp";

/// The file is rewritten once past this size (and four times the live
/// singles): at 1,000 checks, about 2 MiB of singles, so a checkpoint of
/// 2 MiB every 6 MiB appended (45 minutes of a 30 s fleet).
pub(super) const CHECKPOINT_FLOOR: u64 = 1024 * 1024;

/// The journal file; see the module docs.
pub(super) struct Journal {
    dir: PathBuf,
    written: Mutex<Written>,
    /// Set once the file's singles are in memory: until then a flush would
    /// checkpoint an empty memory over them (an open that failed half-way
    /// and is dropped).
    live: AtomicBool,
    /// A background flush's failure, for the next append or flush.
    failed: Mutex<Option<StoreError>>,
    has_failed: AtomicBool,
}

/// The file as written so far (held through a whole flush, which is how
/// two flushes never interleave).
struct Written {
    file: File,
    /// Bytes of good frames (and the header): where the next write goes.
    len: u64,
    /// The next flush rewrites the file whole (the last one failed).
    must_checkpoint: bool,
}

/// What a flush is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flush {
    /// The background thread, every `flush_every`: with nothing to
    /// write, sled alone is flushed (its own flusher runs less often,
    /// `sled/mod.rs`).
    Background,
    /// [`Store::flush`](crate::store::Store::flush) and the close: sled is
    /// flushed even with nothing to write.
    Everything,
    /// A checkpoint, whatever the file's size.
    Checkpoint,
}

/// The frames the file held at open, all good.
pub(super) struct Replay {
    bytes: Vec<u8>,
}

impl Replay {
    pub(super) fn frames(&self) -> impl Iterator<Item = Frame<'_>> {
        let mut rest = &self.bytes[..];
        std::iter::from_fn(move || {
            // Every frame was checked by `Journal::open`.
            let (frame, used) = journal::read(rest).ok().flatten()?;
            rest = &rest[used..];
            Some(frame)
        })
    }
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, which sled has opened (and
    /// locked) already. A torn or damaged frame ends it: the file is cut
    /// there, and what was dropped is logged.
    pub(super) fn open(dir: &Path) -> Result<(Journal, Replay), StoreError> {
        let path = dir.join(FILE);
        let io = |action: &str| io_error(dir, action);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(io("read the journal of the newest results")(err)),
        };
        // A file shorter than its header was cut while being created: it
        // holds nothing.
        if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] != MAGIC[..] {
            return Err(StoreError::Corrupt {
                path: dir.to_path_buf(),
                what: format!("the journal of the newest results ({FILE})"),
                detail: "it does not start as vigie's journal does (another format, or garbled)"
                    .to_string(),
            });
        }
        if bytes.len() < MAGIC.len() {
            let journal = Journal::create(dir, &path)?;
            return Ok((journal, Replay { bytes: Vec::new() }));
        }
        let (good, damage) = good_frames(&bytes[MAGIC.len()..]);
        let len = (MAGIC.len() + good) as u64;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io("open the journal of the newest results"))?;
        if let Some(damage) = damage {
            tracing::warn!(
                path = %path.display(),
                kept_bytes = len,
                dropped_bytes = bytes.len() as u64 - len,
                "the journal of the newest results ended in {damage} (an unclean stop cut a write short, or the disk garbled it); what follows it was dropped"
            );
            file.set_len(len)
                .and_then(|()| file.sync_all())
                .map_err(io("cut a torn end off the journal"))?;
        }
        let mut bytes = bytes;
        bytes.truncate(len as usize);
        bytes.drain(..MAGIC.len());
        let journal = Journal::with_file(dir, file, len);
        Ok((journal, Replay { bytes }))
    }

    /// A new, empty journal: the header, on disk, then the directory
    /// entry.
    fn create(dir: &Path, path: &Path) -> Result<Journal, StoreError> {
        let io = |action: &str| io_error(dir, action);
        let mut file =
            File::create(path).map_err(io("create the journal of the newest results"))?;
        file.write_all(MAGIC)
            .and_then(|()| file.sync_all())
            .and_then(|()| sync_dir(dir))
            .map_err(io("create the journal of the newest results"))?;
        Ok(Journal::with_file(dir, file, MAGIC.len() as u64))
    }

    fn with_file(dir: &Path, file: File, len: u64) -> Journal {
        Journal {
            dir: dir.to_path_buf(),
            written: Mutex::new(Written {
                file,
                len,
                must_checkpoint: false,
            }),
            live: AtomicBool::new(false),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
        }
    }

    /// The file's singles are in memory now: flushes may write.
    pub(super) fn set_live(&self) {
        self.live.store(true, Ordering::Release);
    }

    /// The failure of a background flush since the last call, if any.
    pub(super) fn take_failure(&self) -> Result<(), StoreError> {
        if !self.has_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let failure = lock(&self.failed).take();
        self.has_failed.store(false, Ordering::Release);
        failure.map_or(Ok(()), Err)
    }

    fn remember(&self, failure: StoreError) {
        *lock(&self.failed) = Some(failure);
        self.has_failed.store(true, Ordering::Release);
    }

    /// Writes what appends buffered (or a checkpoint), after `db.flush()`;
    /// see the module docs.
    pub(super) fn flush(
        &self,
        state: &Mutex<State>,
        db: &Db,
        why: Flush,
    ) -> Result<(), StoreError> {
        if !self.live.load(Ordering::Acquire) {
            return db.flush().map(drop).map_err(sled_error(&self.dir));
        }
        let mut written = lock(&self.written);
        let (bytes, checkpoint, epoch) = {
            let mut state = lock(state);
            let unwritten = std::mem::take(&mut state.unwritten);
            let grown = written.len + unwritten.len() as u64;
            let live = state.singles.frame_bytes() as u64;
            let checkpoint = why == Flush::Checkpoint
                || written.must_checkpoint
                || grown > CHECKPOINT_FLOOR.max(live.saturating_mul(4));
            // Nothing to journal: sled is still flushed, as it is every
            // `flush_every` (sled's own flusher runs less often).
            if !checkpoint && unwritten.is_empty() && why == Flush::Background {
                drop(state);
                return db.flush().map(drop).map_err(sled_error(&self.dir));
            }
            let bytes = if checkpoint {
                let mut frames = Vec::with_capacity(MAGIC.len() + live as usize);
                frames.extend_from_slice(MAGIC);
                state.singles.frames(&mut frames);
                frames
            } else {
                unwritten
            };
            // Frames buffered from now on are the next epoch's.
            let epoch = state.epoch;
            state.epoch = state.epoch.saturating_add(1);
            (bytes, checkpoint, epoch)
        };
        let done = db
            .flush()
            .map_err(sled_error(&self.dir))
            .and_then(|_| match checkpoint {
                true => self.rewrite(&mut written, &bytes),
                false => self.append(&mut written, &bytes),
            });
        if done.is_err() {
            written.must_checkpoint = true;
            return done;
        }
        written.must_checkpoint = false;
        let mut state = lock(state);
        state.durable_epoch = state.durable_epoch.max(epoch);
        Ok(())
    }

    fn append(&self, written: &mut Written, bytes: &[u8]) -> Result<(), StoreError> {
        if bytes.is_empty() {
            return Ok(());
        }
        written
            .file
            .write_all_at(bytes, written.len)
            .and_then(|()| written.file.sync_data())
            .map_err(io_error(
                &self.dir,
                "write the journal of the newest results",
            ))?;
        written.len += bytes.len() as u64;
        Ok(())
    }

    fn rewrite(&self, written: &mut Written, bytes: &[u8]) -> Result<(), StoreError> {
        let temporary = self.dir.join(TEMPORARY);
        let mut file = File::create(&temporary)
            .and_then(|mut file| file.write_all(bytes).map(|()| file))
            .and_then(|file| file.sync_all().map(|()| file))
            .and_then(|file| std::fs::rename(&temporary, self.dir.join(FILE)).map(|()| file))
            .and_then(|file| sync_dir(&self.dir).map(|()| file))
            .map_err(io_error(
                &self.dir,
                "rewrite the journal of the newest results",
            ))?;
        // The handle follows the file through the rename.
        std::mem::swap(&mut written.file, &mut file);
        written.len = bytes.len() as u64;
        Ok(())
    }
}

impl SledStore {
    /// Puts the journal's frames into memory (at open, before anything
    /// else reads the singles). A later frame of the same key replaces an
    /// earlier one, as the append that wrote it did. Skipped: frames a
    /// `results` entry covers (packed before the stop, the file not
    /// rewritten since) and frames of a check id sled does not know (which
    /// the flush's ordering rules out; skipped rather than trusted).
    pub(super) fn replay(&self, state: &mut State, replay: &Replay) -> Result<(), StoreError> {
        let known: HashSet<u32> = state.ids.values().copied().collect();
        let mut covered: HashMap<u32, Option<u64>> = HashMap::new();
        let (mut kept, mut packed, mut unknown) = (0u64, 0u64, 0u64);
        for frame in replay.frames() {
            if !known.contains(&frame.id) {
                unknown += 1;
                continue;
            }
            let until = match covered.get(&frame.id) {
                Some(until) => *until,
                None => *covered
                    .entry(frame.id)
                    .or_insert(self.packed_until(frame.id)?),
            };
            if until.is_some_and(|until| frame.millis <= until) {
                packed += 1;
                continue;
            }
            state
                .singles
                .insert(frame.id, frame.millis, frame.record, 0);
            kept += 1;
        }
        if unknown > 0 {
            tracing::warn!(unknown, path = %self.path.display(), "the journal held results of check ids the store does not know; they were skipped");
        }
        tracing::debug!(
            kept,
            packed,
            singles = state.singles.count(),
            "replayed the journal of the newest results"
        );
        Ok(())
    }
}

/// How many bytes of `bytes` are good frames, and what ended them early.
fn good_frames(bytes: &[u8]) -> (usize, Option<Damage>) {
    let mut good = 0;
    loop {
        match journal::read(&bytes[good..]) {
            Ok(Some((_, used))) => good += used,
            Ok(None) => return (good, None),
            Err(damage) => return (good, Some(damage)),
        }
    }
}

/// The thread that flushes the journal every `flush_every`, stopped and
/// joined when dropped.
pub(super) struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    pub(super) fn spawn(
        every: Duration,
        journal: Arc<Journal>,
        state: Arc<Mutex<State>>,
        db: Db,
    ) -> Result<Flusher, StoreError> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stopping = Arc::clone(&stop);
        let spawn_error = io_error(&journal.dir, "start the journal's flusher");
        let thread = std::thread::Builder::new()
            .name("vigie-journal".to_string())
            .spawn(move || loop {
                let (stopped, wake) = &*stopping;
                let guard = lock(stopped);
                let (guard, _) = wake
                    .wait_timeout_while(guard, every, |stopped| !*stopped)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if *guard {
                    return;
                }
                drop(guard);
                if let Err(err) = journal.flush(&state, &db, Flush::Background) {
                    tracing::error!(error = %err, "could not write the journal of the newest results; retrying at the next flush");
                    journal.remember(err);
                }
            })
            .map_err(spawn_error)?;
        Ok(Flusher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *lock(stopped) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A panic in the thread was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

/// Locks `mutex` whatever a panicking holder left: every guarded value
/// here is consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn io_error(dir: &Path, action: &str) -> impl Fn(std::io::Error) -> StoreError {
    let sled = StoreError::io_at(dir, action);
    move |cause| sled(::sled::Error::Io(cause))
}

fn sled_error(dir: &Path) -> impl Fn(::sled::Error) -> StoreError {
    StoreError::io_at(dir, "flush to disk")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use time::Duration as TimeDuration;

    use super::*;
    use crate::store::backend::Store;
    use crate::store::contract::{up, T0};
    use crate::store::sled::tests::{
        checkpoint, ids, journal_frames, minute, minutes, open_packed, singles,
    };
    use crate::store::sled::Packing;

    const PACKING: Packing = Packing { size: 4, keep: 2 };

    fn file_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join(FILE)).unwrap().len()
    }

    /// A store whose only flushes are the test's (and the close).
    fn open_unflushed(dir: &Path) -> SledStore {
        crate::store::sled::tests::when_unlocked(|| {
            SledStore::open_packing(dir, Duration::ZERO, PACKING)
        })
        .unwrap()
    }

    #[test]
    fn every_single_comes_back_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_packed(dir.path(), PACKING);
        for outcome in minutes(0..15) {
            store.append(&outcome).unwrap();
            store.append(&up("api", outcome.started_at)).unwrap();
        }
        store.flush().unwrap();
        let held = singles(&store);
        assert!(held > 0);
        drop(store);

        let store = open_packed(dir.path(), PACKING);
        assert_eq!(singles(&store), held);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..15));
        assert_eq!(store.len().unwrap(), 30);
        assert_eq!(store.latest("api").unwrap(), Some(up("api", minute(14))));
    }

    #[test]
    fn the_background_flush_writes_what_appends_buffered() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_packed(dir.path(), PACKING);
        let empty = file_len(dir.path());
        store.append(&up("site", T0)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while file_len(dir.path()) == empty {
            assert!(Instant::now() < deadline, "nothing written in 5 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(journal_frames(dir.path()).len(), 1);
    }

    #[test]
    fn a_torn_last_frame_is_cut_off_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        for outcome in minutes(0..3) {
            store.append(&outcome).unwrap();
        }
        drop(store);
        let whole = file_len(dir.path());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        file.set_len(whole - 5).unwrap();
        drop(file);

        let store = open_unflushed(dir.path());
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..2));
        let two = whole - journal::frame_len(journal_frames(dir.path())[0].1.len()) as u64;
        assert_eq!(file_len(dir.path()), two, "cut at the torn frame");
        // Appends go on after the cut.
        store.append(&up("site", minute(5))).unwrap();
        drop(store);
        let store = open_unflushed(dir.path());
        let mut expected = minutes(0..2);
        expected.push(up("site", minute(5)));
        assert_eq!(store.history("site", T0).unwrap(), expected);
    }

    #[test]
    fn a_frame_that_fails_its_checksum_ends_the_replay() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        for outcome in minutes(0..3) {
            store.append(&outcome).unwrap();
        }
        drop(store);
        let mut bytes = std::fs::read(dir.path().join(FILE)).unwrap();
        let frame = journal::frame_len(journal_frames(dir.path())[0].1.len());
        // A byte of the second frame's record.
        bytes[MAGIC.len() + frame + 20] ^= 0x01;
        std::fs::write(dir.path().join(FILE), &bytes).unwrap();

        let store = open_unflushed(dir.path());
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..1));
        assert_eq!(file_len(dir.path()), (MAGIC.len() + frame) as u64);
    }

    #[test]
    fn a_checkpoint_keeps_exactly_the_unpacked_singles() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        for outcome in minutes(0..11) {
            store.append(&outcome).unwrap();
        }
        store.flush().unwrap();
        let id = ids(&store)["site"];
        assert_eq!(
            journal_frames(dir.path()).len(),
            11,
            "packed singles stay in the file until a checkpoint"
        );
        assert_eq!(singles(&store), 3, "two blocks of four packed");
        checkpoint(&store);
        let kept: Vec<(u32, u64)> = journal_frames(dir.path())
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        let millis = |n| crate::store::format::keys::key_millis(&up("site", minute(n))).unwrap();
        assert_eq!(kept, [(id, millis(8)), (id, millis(9)), (id, millis(10))]);
        drop(store);
        let store = open_unflushed(dir.path());
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..11));
    }

    #[test]
    fn singles_a_block_covers_are_skipped_on_replay() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        for outcome in minutes(0..11) {
            store.append(&outcome).unwrap();
        }
        store.flush().unwrap();
        // The file holds all eleven; eight are in blocks.
        assert_eq!(journal_frames(dir.path()).len(), 11);
        drop(store);
        let store = open_unflushed(dir.path());
        assert_eq!(singles(&store), 3);
        assert_eq!(store.len().unwrap(), 11);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..11));
    }

    #[test]
    fn the_file_is_rewritten_once_it_outgrows_the_singles() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        let at = |n: i64| T0 + TimeDuration::seconds(n);
        let mut n = 0;
        // Past the floor: about 100 bytes a frame.
        while file_len(dir.path()) < CHECKPOINT_FLOOR / 2 {
            for _ in 0..500 {
                store.append(&up("site", at(n))).unwrap();
                n += 1;
            }
            store.flush().unwrap();
        }
        let mut rewritten = false;
        for _ in 0..40 {
            for _ in 0..500 {
                store.append(&up("site", at(n))).unwrap();
                n += 1;
            }
            store.flush().unwrap();
            if file_len(dir.path()) < CHECKPOINT_FLOOR / 4 {
                rewritten = true;
                break;
            }
        }
        assert!(rewritten, "the file was never rewritten");
        assert!(!dir.path().join(TEMPORARY).exists());
        drop(store);
        let store = open_unflushed(dir.path());
        assert_eq!(store.len().unwrap(), n as u64);
        assert_eq!(store.history("site", T0).unwrap().len(), n as usize);
    }

    #[test]
    fn a_sweep_leaves_nothing_in_the_file_that_it_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        // A check that stopped: its last singles never get packed.
        for outcome in minutes(0..3) {
            store.append(&outcome).unwrap();
        }
        store.flush().unwrap();
        assert_eq!(store.sweep(minute(2)).unwrap(), 2);
        assert_eq!(journal_frames(dir.path()).len(), 1);
        drop(store);
        let store = open_unflushed(dir.path());
        assert_eq!(store.history("site", T0).unwrap(), minutes(2..3));
    }
}
