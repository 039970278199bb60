//! The local control socket, `[api] socket`: the CLI on the same machine
//! reaches the daemon here without the token, so that `vigie silence`
//! works during an incident on a default install (the token guards the TCP
//! listener for remote clients and browsers).
//!
//! Who may use it is decided by the peer's credentials (`SO_PEERCRED`),
//! looked up at each connection so that a change of group needs no
//! restart: root, the user vigie runs as, or a member of the group
//! `vigie` (primary or supplementary). The socket file is also made mode
//! 0660, so other users are mostly refused by the kernel already; anyone
//! who still connects is answered 403, saying who may.
//!
//! Where it is: `[api] socket` when set; else `$RUNTIME_DIRECTORY/api.sock`
//! under systemd (the unit's `RuntimeDirectory=`), with a symlink at
//! `<state_dir>/api.sock` so that the CLI, run from a shell without that
//! variable, finds it; else `<state_dir>/api.sock` itself.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use axum::Router;
use nix::unistd::{Group, Uid, User};
use tokio::net::unix::UCred;

use crate::config::Config;

/// The group whose members may use the socket besides root and vigie's
/// own user (the package creates it).
pub const GROUP: &str = "vigie";

/// The socket's file name, in the runtime directory or the state dir.
const FILE_NAME: &str = "api.sock";

/// Where the daemon listens, and where the CLI first asks.
pub fn socket_path(config: &Config) -> PathBuf {
    if let Some(path) = &config.api.socket {
        return path.clone();
    }
    match runtime_directory() {
        Some(dir) => dir.join(FILE_NAME),
        None => state_link(config),
    }
}

/// `<state_dir>/api.sock`: the socket itself, or a symlink to it.
fn state_link(config: &Config) -> PathBuf {
    config.state_dir.join(FILE_NAME)
}

/// systemd's `$RUNTIME_DIRECTORY` (its first entry when the unit names
/// several).
fn runtime_directory() -> Option<PathBuf> {
    let value = std::env::var_os("RUNTIME_DIRECTORY")?;
    let first = value.to_str()?.split(':').next()?.to_string();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

/// Binds the socket at `path`: a socket file left by a vigie that died is
/// replaced (a live one cannot be: the store's lock keeps a second daemon
/// on this state dir from getting here), anything else there is an error.
/// Mode 0660; with the default place under systemd, the symlink in the
/// state dir is made too.
pub fn bind(config: &Config, path: &Path) -> io::Result<tokio::net::UnixListener> {
    remove_stale(path)?;
    let listener = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    let link = state_link(config);
    if config.api.socket.is_none() && link != path {
        remove_stale(&link)?;
        std::os::unix::fs::symlink(path, &link)?;
    }
    Ok(listener)
}

/// Removes the socket (and the state dir's symlink to it) at stop.
pub fn unbind(config: &Config, path: &Path) {
    for file in [path.to_path_buf(), state_link(config)] {
        if remove_stale(&file).is_err() {
            tracing::debug!(path = %file.display(), "cannot remove the local socket");
        }
    }
}

/// Removes `path` when it is a socket or a symlink; nothing there is fine;
/// a regular file or a directory is left alone and refused.
fn remove_stale(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
        Ok(meta) if meta.file_type().is_socket() || meta.file_type().is_symlink() => {
            std::fs::remove_file(path)
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; move it away or set [api] socket",
                path.display()
            ),
        )),
    }
}

/// Who may use the socket: root, `own` (the daemon's user), members of
/// [`GROUP`].
#[derive(Debug, Clone, Copy)]
pub struct LocalAccess {
    own: Uid,
}

impl LocalAccess {
    pub fn for_this_process() -> LocalAccess {
        LocalAccess {
            own: Uid::effective(),
        }
    }

    /// `Err` says who asked and who may, for the 403.
    pub fn judge(&self, cred: Option<UCred>) -> Result<(), String> {
        let Some(cred) = cred else {
            return Err(
                "the local socket could not tell who is asking (no peer credentials)".into(),
            );
        };
        self.judge_ids(cred.uid(), cred.gid())
    }

    /// [`LocalAccess::judge`] of a peer's user and primary group ids.
    fn judge_ids(&self, uid: u32, gid: u32) -> Result<(), String> {
        let uid = Uid::from_raw(uid);
        if uid.is_root() || uid == self.own {
            return Ok(());
        }
        let user = User::from_uid(uid).ok().flatten();
        let group = Group::from_name(GROUP).ok().flatten();
        let member = match (&user, &group) {
            (Some(user), Some(group)) => {
                user.gid == group.gid || gid == group.gid.as_raw() || group.mem.contains(&user.name)
            }
            (None, Some(group)) => gid == group.gid.as_raw(),
            _ => false,
        };
        if member {
            return Ok(());
        }
        let who = match &user {
            Some(user) => format!("user {} (uid {uid})", user.name),
            None => format!("uid {uid}"),
        };
        let own = User::from_uid(self.own)
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {}", self.own), |u| u.name);
        Err(format!(
            "{who} may not control vigie through its local socket: run the command as root, as {own} (the daemon's user), or as a member of the group {GROUP} (`usermod -aG {GROUP} USER`, then log in again)"
        ))
    }
}

/// The router a refused peer gets: 403 with `why`, whatever it asks.
pub(super) fn refusal(why: String) -> Router {
    Router::new().fallback(move || {
        let why = why.clone();
        async move { super::reply::error(StatusCode::FORBIDDEN, &why) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_socket_is_replaced_and_a_regular_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        assert!(remove_stale(&path).is_ok(), "nothing there");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(listener);
        remove_stale(&path).unwrap();
        assert!(!path.exists());
        std::fs::write(&path, "not a socket").unwrap();
        let err = remove_stale(&path).unwrap_err();
        assert!(err.to_string().contains("is not a socket"), "{err}");
        assert!(path.exists(), "left alone");
    }

    #[tokio::test]
    async fn root_and_the_daemon_s_own_user_are_let_in() {
        let access = LocalAccess::for_this_process();
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        // The peer is this very process: its own user.
        assert_eq!(access.judge(Some(a.peer_cred().unwrap())), Ok(()));
        let refused = access.judge(None).unwrap_err();
        assert!(refused.contains("no peer credentials"), "{refused}");
        assert_eq!(access.judge_ids(0, 0), Ok(()), "root");
    }

    #[test]
    fn anyone_else_outside_the_group_is_told_who_may() {
        // A daemon running as uid 4242 asked by uid 4343: neither root nor
        // itself, and no group `vigie` names either on a test machine.
        let access = LocalAccess {
            own: Uid::from_raw(4242),
        };
        let refused = access.judge_ids(4343, 4343).unwrap_err();
        assert!(
            refused.starts_with("uid 4343 may not control vigie through its local socket")
                && refused.contains(
                    "as root, as uid 4242 (the daemon's user), or as a member of the group vigie"
                ),
            "{refused}"
        );
    }
}
