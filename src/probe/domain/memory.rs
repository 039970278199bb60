//! What vigie remembers of the registries it asked: per domain, when it
//! last asked, the last answer and the last failure; per RDAP server, how
//! long it asked vigie to wait (HTTP 429). Kept in memory and in the state
//! directory (`rdap-answers.json`), so that a restart, a reload or a
//! `vigie check` beside the daemon reads the answer again instead of
//! asking the registry again.
//!
//! The file is written whole after each query (they are rare: one per
//! domain per `query_every`), to a temporary name then renamed over the
//! old one, so a crash leaves either copy, never half of one. It is read
//! once, at the first domain probe, and only if it is no larger than
//! [`FILE_CAP`]; a copy that cannot be read is logged and ignored, which
//! costs one query per domain. Entries not asked about for
//! [`FORGET_AFTER`] are dropped when the file is written (the checks they
//! were for are gone).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::document::Registration;

/// The file's name in the state directory.
pub const FILE_NAME: &str = "rdap-answers.json";
/// A larger file is not read (a few hundred bytes a domain).
const FILE_CAP: u64 = 16 << 20;
/// Longer than the longest `query_every`.
const FORGET_AFTER: time::Duration = time::Duration::days(31);

/// What was last learnt of one domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remembered {
    /// The last query, answered or not.
    #[serde(with = "time::serde::rfc3339")]
    pub queried_at: OffsetDateTime,
    /// The URL asked (redacted).
    pub url: String,
    /// The last answer the registry gave, however old.
    pub answer: Option<Answer>,
    /// Why the last query got no answer; `None` when it got one.
    pub error: Option<String>,
}

/// A registry's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    #[serde(with = "time::serde::rfc3339")]
    pub answered_at: OffsetDateTime,
    /// HTTP 404: the registry knows no such domain.
    pub not_found: bool,
    pub registration: Registration,
}

/// An RDAP server's request to wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    #[serde(with = "time::serde::rfc3339")]
    pub until: OffsetDateTime,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    #[serde(default)]
    domains: BTreeMap<String, Remembered>,
    #[serde(default)]
    servers: BTreeMap<String, Backoff>,
}

/// The remembered answers of every domain check (one per prober).
#[derive(Debug)]
pub struct Memory {
    path: Option<PathBuf>,
    /// `None` until the file was read.
    saved: Mutex<Option<Saved>>,
    /// One query at a time per domain: a second probe of it waits, then
    /// reads the first one's answer.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// One write of the file at a time.
    writing: tokio::sync::Mutex<()>,
}

impl Memory {
    /// Kept in `dir` when given (else in memory only).
    pub fn new(dir: Option<&Path>) -> Self {
        Self {
            path: dir.map(|d| d.join(FILE_NAME)),
            saved: Mutex::new(None),
            turns: Mutex::new(HashMap::new()),
            writing: tokio::sync::Mutex::new(()),
        }
    }

    /// The lock a query of `key` holds.
    pub fn turn(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        turns.entry(key.to_string()).or_default().clone()
    }

    /// What is remembered of `key`.
    pub fn get(&self, key: &str) -> Option<Remembered> {
        self.with(|saved| saved.domains.get(key).cloned())
    }

    /// Until when `server` (an origin) asked vigie to wait, if it still does.
    pub fn backoff(&self, server: &str, now: OffsetDateTime) -> Option<OffsetDateTime> {
        self.with(|saved| saved.servers.get(server).map(|b| b.until))
            .filter(|until| *until > now)
    }

    /// Records a query of `key`, and the wait its server asked for, then
    /// writes the file.
    pub async fn record(
        &self,
        key: &str,
        remembered: Remembered,
        backoff: Option<(String, OffsetDateTime)>,
        now: OffsetDateTime,
    ) {
        let text = self.with(|saved| {
            saved.domains.insert(key.to_string(), remembered);
            if let Some((server, until)) = backoff {
                saved.servers.insert(server, Backoff { until });
            }
            saved
                .domains
                .retain(|_, r| now - r.queried_at < FORGET_AFTER);
            saved.servers.retain(|_, b| b.until > now);
            serde_json::to_vec_pretty(&*saved)
        });
        let Some(path) = &self.path else {
            return;
        };
        match text {
            Ok(text) => {
                let _one = self.writing.lock().await;
                if let Err(err) = write_atomically(path, &text).await {
                    tracing::warn!(
                        "cannot keep the RDAP answers in {}: {err}; a restart will ask the registries again",
                        path.display()
                    );
                }
            }
            Err(err) => tracing::warn!("cannot write the RDAP answers: {err}"),
        }
    }

    /// Runs `f` on the remembered state, read from the file first if it
    /// has not been yet.
    fn with<T>(&self, f: impl FnOnce(&mut Saved) -> T) -> T {
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        let saved = saved.get_or_insert_with(|| self.read());
        f(saved)
    }

    fn read(&self) -> Saved {
        let Some(path) = &self.path else {
            return Saved::default();
        };
        let read = read_capped(path, FILE_CAP)
            .map_err(|err| err.to_string())
            .and_then(|bytes| match bytes {
                Some(bytes) => serde_json::from_slice::<Saved>(&bytes).map_err(|e| e.to_string()),
                None => Ok(Saved::default()),
            });
        read.unwrap_or_else(|err| {
            tracing::warn!("ignoring {}: {err}", path.display());
            Saved::default()
        })
    }
}

/// A file of at most `cap` bytes; `None` when there is none.
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::other(format!("larger than {cap} bytes")));
    }
    Ok(Some(bytes))
}

/// Writes `path` through a temporary file renamed over it. A state
/// directory that does not exist (`vigie check` before the daemon ever
/// ran) is not created: nothing is kept.
pub async fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let Some(dir) = path.parent() else {
        return Ok(());
    };
    if !tokio::fs::try_exists(dir).await.unwrap_or(false) {
        return Ok(());
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    tokio::fs::write(&temporary, bytes).await?;
    tokio::fs::rename(&temporary, path).await
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    const T0: OffsetDateTime = datetime!(2026-12-07 08:00 UTC);

    fn remembered(at: OffsetDateTime) -> Remembered {
        Remembered {
            queried_at: at,
            url: "https://rdap.example/domain/example.com".into(),
            answer: Some(Answer {
                answered_at: at,
                not_found: false,
                registration: Registration {
                    expires_at: Some(datetime!(2027-08-13 04:00 UTC)),
                    ..Registration::default()
                },
            }),
            error: None,
        }
    }

    #[tokio::test]
    async fn answers_and_waits_survive_a_new_memory_on_the_same_directory() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::new(Some(dir.path()));
        let wait = (
            "https://rdap.example".to_string(),
            T0 + time::Duration::HOUR,
        );
        memory
            .record("example.com", remembered(T0), Some(wait), T0)
            .await;
        let again = Memory::new(Some(dir.path()));
        assert_eq!(again.get("example.com"), Some(remembered(T0)));
        assert_eq!(
            again.backoff("https://rdap.example", T0),
            Some(T0 + time::Duration::HOUR)
        );
        assert_eq!(
            again.backoff("https://rdap.example", T0 + time::Duration::HOUR),
            None
        );
    }

    #[tokio::test]
    async fn old_entries_are_forgotten_and_a_bad_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::new(Some(dir.path()));
        memory.record("old.com", remembered(T0), None, T0).await;
        let later = T0 + time::Duration::days(40);
        memory
            .record("new.com", remembered(later), None, later)
            .await;
        let again = Memory::new(Some(dir.path()));
        assert_eq!(again.get("old.com"), None);
        assert!(again.get("new.com").is_some());
        std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        assert_eq!(Memory::new(Some(dir.path())).get("new.com"), None);
    }

    #[tokio::test]
    async fn a_missing_state_directory_keeps_answers_in_memory_only() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("never-made");
        let memory = Memory::new(Some(&gone));
        memory.record("example.com", remembered(T0), None, T0).await;
        assert!(memory.get("example.com").is_some());
        assert!(!gone.exists(), "not created by a probe");
    }
}
