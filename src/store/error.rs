//! What can go wrong with the store, in the operator's terms: every
//! message names the store's path and says what to do.

use std::path::{Path, PathBuf};

use time::OffsetDateTime;

/// Why the store could not do what was asked, in the operator's terms.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the store at {} is in use by another process (is `vigie run` running? use its API, or stop it)",
        path.display()
    )]
    Locked { path: PathBuf },
    #[error(
        "cannot open the store at {}: {cause} (check that the directory exists and that vigie may write to it)",
        path.display()
    )]
    Open { path: PathBuf, cause: ::sled::Error },
    #[error(
        "the store at {} has schema version {found}, but this vigie reads only version {supported}: \
         a newer vigie wrote it; run that version, or point state_dir at another directory",
        path.display()
    )]
    SchemaTooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error(
        "the store at {} is damaged: {what}: {detail} (restore it with `vigie restore`, or move it aside to start afresh)",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        what: String,
        detail: String,
    },
    #[error(
        "the store at {} could not {action}: {cause} (is the disk full, read-only or failing?)",
        path.display()
    )]
    Io {
        path: PathBuf,
        action: String,
        cause: ::sled::Error,
    },
    #[error(
        "cannot store the result of {name} started at {}: results before 1970 have no key",
        rfc3339(started_at)
    )]
    BeforeEpoch {
        name: String,
        started_at: OffsetDateTime,
    },
    #[error(
        "the store at {} has allocated every check id (4294967295 names): restore into a fresh state_dir to renumber",
        path.display()
    )]
    IdsExhausted { path: PathBuf },
}

impl StoreError {
    /// A function that reports a sled failure while doing `action` on the
    /// store at `path`, for `map_err`.
    pub(crate) fn io_at(path: &Path, action: &str) -> impl Fn(::sled::Error) -> StoreError {
        let (path, action) = (path.to_path_buf(), action.to_string());
        move |cause| StoreError::Io {
            path: path.clone(),
            action: action.clone(),
            cause,
        }
    }

    /// Whether the disk refused the store (permission, no space, a
    /// read-only or vanished directory), as opposed to the store being
    /// unreadable. Only such a refusal makes vigie run on a temporary store
    /// and wait for the disk; everything else about opening is damage.
    pub fn is_disk_refusal(&self) -> bool {
        let cause = match self {
            StoreError::Open { cause, .. } | StoreError::Io { cause, .. } => cause,
            _ => return false,
        };
        let ::sled::Error::Io(io) = cause else {
            return false;
        };
        use std::io::ErrorKind::*;
        matches!(
            io.kind(),
            PermissionDenied | ReadOnlyFilesystem | StorageFull | QuotaExceeded | NotFound
        ) || matches!(
            io.raw_os_error(),
            Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOSPC | libc::EDQUOT)
        )
    }

    /// What went wrong, without the store's path or the check's name: fit
    /// for a third party (the heartbeat's `/fail` body). The OS error is
    /// kept, it is what says "disk full" or "read-only".
    pub fn brief(&self) -> String {
        match self {
            StoreError::Locked { .. } => "the store is in use by another process".to_string(),
            StoreError::Open { cause, .. } => format!("cannot open the store: {cause}"),
            StoreError::SchemaTooNew {
                found, supported, ..
            } => {
                format!("the store has schema version {found}, this vigie reads {supported}")
            }
            StoreError::Corrupt { what, .. } => format!("the store is damaged ({what})"),
            StoreError::Io { action, cause, .. } => {
                format!("the store could not {action}: {cause}")
            }
            StoreError::BeforeEpoch { .. } => "a result dated before 1970 has no key".to_string(),
            StoreError::IdsExhausted { .. } => "the store has allocated every check id".to_string(),
        }
    }
}

/// A time as operators read it in messages.
pub(in crate::store) fn rfc3339(at: &OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}
