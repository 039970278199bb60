//! The delivery used without `[smtp]`: each message becomes a file in
//! `<state_dir>/maildir/`, in the Maildir format mail clients (mutt,
//! Dovecot, Python's `mailbox`) read as a mailbox, so a machine with no
//! mail server loses nothing and someone can still read the alerts.
//!
//! Maildir's one rule is what makes it safe without locks: write the file
//! under `tmp/`, make it durable, then rename it into `new/`; a reader
//! only ever sees complete messages. Names follow the modern convention
//! `SECONDS.M<micros>P<pid>Q<counter>.HOST`, unique per process by the
//! counter and across processes by the pid. Files are stored with Unix
//! line endings, as Maildir readers expect. This module writes; it never
//! reads, moves to `cur/` or deletes: that is the reader's business.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A Maildir to deliver into.
#[derive(Debug, Clone)]
pub struct Maildir {
    root: PathBuf,
    /// This host's name with `/` and `:` escaped as the convention wants
    /// (`:` separates the flags readers add).
    host: String,
}

/// A step that failed, with the file it was about.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct MaildirError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

impl Maildir {
    pub fn new(root: PathBuf) -> Self {
        let host = super::message::hostname()
            .replace('/', "\\057")
            .replace(':', "\\072");
        Maildir { root, host }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes one message (CRLF or LF line endings) and returns the path
    /// of its file under `new/`. Blocking: call from `spawn_blocking`.
    /// When it returns, the message survives a power loss.
    pub fn deliver(&self, message: &[u8]) -> Result<PathBuf, MaildirError> {
        self.create_dirs()?;
        let (tmp_path, mut file) = self.create_tmp()?;
        let fail = |action, source| MaildirError {
            action,
            path: tmp_path.clone(),
            source,
        };
        file.write_all(&unix_line_endings(message))
            .map_err(|e| fail("write", e))?;
        file.sync_all().map_err(|e| fail("sync", e))?;
        drop(file);
        let name = tmp_path.file_name().map(PathBuf::from).unwrap_or_default();
        let new_path = self.root.join("new").join(name);
        fs::rename(&tmp_path, &new_path).map_err(|e| fail("move into new/", e))?;
        // The rename is durable only once the directory is synced.
        let new_dir = self.root.join("new");
        File::open(&new_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|source| MaildirError {
                action: "sync",
                path: new_dir,
                source,
            })?;
        Ok(new_path)
    }

    fn create_dirs(&self) -> Result<(), MaildirError> {
        for sub in ["tmp", "new", "cur"] {
            let path = self.root.join(sub);
            // Alerts name internal hosts: readable by the service user only.
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)
                .map_err(|source| MaildirError {
                    action: "create directory",
                    path,
                    source,
                })?;
        }
        Ok(())
    }

    /// A fresh file under `tmp/`; a name already taken (a clock stepped
    /// back into a previous run's second with the same pid) is skipped.
    fn create_tmp(&self) -> Result<(PathBuf, File), MaildirError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut last_error = None;
        for _ in 0..16 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let name = format!(
                "{}.M{}P{}Q{}.{}",
                now.as_secs(),
                now.subsec_micros(),
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed),
                self.host
            );
            let path = self.root.join("tmp").join(name);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => return Ok((path, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some((path, e)),
                Err(source) => {
                    return Err(MaildirError {
                        action: "create",
                        path,
                        source,
                    })
                }
            }
        }
        let (path, source) = last_error
            .unwrap_or_else(|| (self.root.join("tmp"), io::Error::other("no free file name")));
        Err(MaildirError {
            action: "create",
            path,
            source,
        })
    }
}

/// CRLF -> LF: the wire form has CRLF, files on Unix have LF.
fn unix_line_endings(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    let mut bytes = message.iter().peekable();
    while let Some(&b) = bytes.next() {
        if b == b'\r' && bytes.peek() == Some(&&b'\n') {
            continue;
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_into_new_with_unique_names() {
        let dir = tempfile::tempdir().unwrap();
        let maildir = Maildir::new(dir.path().join("maildir"));
        let a = maildir.deliver(b"Subject: a\r\n\r\nbody\r\n").unwrap();
        let b = maildir.deliver(b"Subject: b\r\n\r\nbody\r\n").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.parent().unwrap(), dir.path().join("maildir/new"));
        assert_eq!(fs::read(&a).unwrap(), b"Subject: a\n\nbody\n");
        assert_eq!(
            fs::read_dir(dir.path().join("maildir/tmp"))
                .unwrap()
                .count(),
            0
        );
        assert!(dir.path().join("maildir/cur").is_dir());
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(!name.contains(':') && !name.contains('/'), "{name}");
    }

    #[test]
    fn unwritable_directory_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, "").unwrap();
        let err = Maildir::new(file.clone()).deliver(b"x").unwrap_err();
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn lone_carriage_returns_are_kept() {
        assert_eq!(unix_line_endings(b"a\r\nb\rc\n"), b"a\nb\rc\n");
    }
}
