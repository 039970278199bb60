//! Where a secret given by name (`*_credential = "NAME"`) is read from.
//!
//! Under systemd the unit loads the files of `credentials_dir` with
//! `LoadCredential=`, and the service's processes find copies in
//! `$CREDENTIALS_DIRECTORY`, readable by the service's user only. Outside
//! the service (`vigie restore` with the daemon stopped, `vigie history`
//! from a root shell) there is no such directory, and the same names are
//! read from `credentials_dir` itself. One config then works both ways,
//! where a `*_file` key pointing into `/run/credentials/...` works only
//! while the service runs.
//!
//! This file only says which path a name stands for; that the file exists
//! and is private is checked where every secret file is (`resolve/cx.rs`).

use std::path::{Path, PathBuf};

/// The default `credentials_dir`: what the Debian package creates, mode
/// 0700, owned by root.
pub const DEFAULT_CREDENTIALS_DIR: &str = "/etc/vigie/credentials";

/// The ID the packaged unit gives its `LoadCredential=` of the whole of
/// `credentials_dir`: systemd names each file of a loaded directory
/// `ID_FILENAME`, so `smtp-password` arrives as `vigie_smtp-password`.
pub const UNIT_CREDENTIAL_ID: &str = "vigie";

/// The directories a credential name is looked up in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialDirs {
    /// `$CREDENTIALS_DIRECTORY`, which systemd sets for the service's
    /// processes (`ExecStartPre=`, `ExecStart=`, `ExecReload=`) when the
    /// unit loads credentials. When set, it is the only place looked at:
    /// the service's user cannot read `credentials_dir`.
    pub systemd: Option<PathBuf>,
    /// `credentials_dir` as resolved (relative paths against the config
    /// file's directory).
    pub dir: PathBuf,
}

impl CredentialDirs {
    /// `dir`, and `$CREDENTIALS_DIRECTORY` from this process's environment
    /// (an empty value counts as unset).
    pub fn from_env(dir: PathBuf) -> Self {
        let systemd = std::env::var_os("CREDENTIALS_DIRECTORY")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        Self { systemd, dir }
    }

    /// The paths `name` may be at, in the order they are tried: under
    /// systemd `$CREDENTIALS_DIRECTORY/NAME` (a credential loaded under its
    /// own name, e.g. by a drop-in's `LoadCredentialEncrypted=`), then
    /// `$CREDENTIALS_DIRECTORY/vigie_NAME` (the packaged unit's load of the
    /// whole directory); otherwise `credentials_dir/NAME`.
    pub fn candidates(&self, name: &str) -> Vec<PathBuf> {
        match &self.systemd {
            Some(dir) => vec![
                dir.join(name),
                dir.join(format!("{UNIT_CREDENTIAL_ID}_{name}")),
            ],
            None => vec![self.dir.join(name)],
        }
    }

    /// Where `name` is: the first candidate that exists, else `None`.
    pub fn find(&self, name: &str) -> Option<PathBuf> {
        self.candidates(name).into_iter().find(|p| exists(p))
    }

    /// What to do about a credential that is in none of its candidates.
    pub fn missing_help(&self, name: &str) -> String {
        let looked = self
            .candidates(name)
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" nor ");
        match &self.systemd {
            Some(_) => format!(
                "credential {name:?} is not loaded: neither {looked} exists; put the secret in {}/{name} (mode 0600) and restart the service, whose unit loads that directory with `LoadCredential={UNIT_CREDENTIAL_ID}:{}`",
                self.dir.display(),
                self.dir.display()
            ),
            None => format!(
                "credential {name:?}: {looked} does not exist; write the secret there (`install -m 0600 /dev/stdin {looked}`), or set `credentials_dir` to the directory that holds it"
            ),
        }
    }
}

/// A credential name: what systemd accepts as a credential ID and a file
/// name, so it cannot leave the directory (`..`, `/`).
pub fn name_problem(name: &str) -> Option<String> {
    let valid = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    (!valid).then(|| {
        format!("{name:?} is not a credential name: letters, digits, '.', '_' and '-', not starting with '.' (it names a file in the credentials directory)")
    })
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_systemd_a_name_is_a_file_of_credentials_dir() {
        let dirs = CredentialDirs {
            systemd: None,
            dir: PathBuf::from("/etc/vigie/credentials"),
        };
        assert_eq!(
            dirs.candidates("smtp-password"),
            [PathBuf::from("/etc/vigie/credentials/smtp-password")]
        );
    }

    #[test]
    fn under_systemd_a_name_is_looked_up_as_loaded_alone_then_by_the_unit() {
        let dirs = CredentialDirs {
            systemd: Some(PathBuf::from("/run/credentials/vigie.service")),
            dir: PathBuf::from("/etc/vigie/credentials"),
        };
        assert_eq!(
            dirs.candidates("s3-secret"),
            [
                PathBuf::from("/run/credentials/vigie.service/s3-secret"),
                PathBuf::from("/run/credentials/vigie.service/vigie_s3-secret"),
            ]
        );
    }

    #[test]
    fn the_first_existing_candidate_is_used() {
        let run = tempfile::tempdir().unwrap();
        let dirs = CredentialDirs {
            systemd: Some(run.path().to_path_buf()),
            dir: PathBuf::from("/nonexistent"),
        };
        assert_eq!(dirs.find("token"), None);
        std::fs::write(run.path().join("vigie_token"), "t").unwrap();
        assert_eq!(dirs.find("token"), Some(run.path().join("vigie_token")));
        std::fs::write(run.path().join("token"), "t").unwrap();
        assert_eq!(dirs.find("token"), Some(run.path().join("token")));
    }

    #[test]
    fn names_that_could_leave_the_directory_are_refused() {
        assert_eq!(name_problem("smtp-password"), None);
        assert_eq!(name_problem("s3.key_id"), None);
        for bad in ["", "..", ".hidden", "a/b", "../etc/shadow", "sp ace"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }
}
