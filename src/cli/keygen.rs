//! `vigie vantage keygen NODE --out DIR`: a vantage's signing key, written
//! where only vigie's user reads it, and the `peers` entry the other nodes
//! need to verify what it writes.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::signing::SigningKey;

/// What `keygen` made.
#[derive(Debug)]
pub struct Made {
    /// `DIR/NODE.key`, mode 0600.
    pub key_file: PathBuf,
    /// `{ name = "NODE", public_key = "ed25519:..." }`, exactly as `peers`
    /// takes it.
    pub peer_entry: String,
}

/// Writes `out/NODE.key`; never over an existing file (a node's key that
/// changes makes every peer refuse it until their config follows).
pub fn keygen(node: &str, out: &Path) -> Result<Made, String> {
    let valid = !node.is_empty()
        && node.len() <= 64
        && node
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if !valid {
        return Err(format!(
            "{node:?} is not a valid vantage name (1 to 64 of a-z, 0-9, '.', '_' and '-')"
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let (key, pem) = SigningKey::generate()?;
    let key_file = out.join(format!("{node}.key"));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key_file)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists: remove it first to replace {node}'s key (and update {node}'s entry in every peer's `peers`)",
                key_file.display()
            ),
            _ => format!("cannot create {}: {e}", key_file.display()),
        })?;
    file.write_all(pem.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", key_file.display()))?;
    Ok(Made {
        key_file,
        peer_entry: format!("{{ name = {node:?}, public_key = \"{}\" }}", key.public()),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_key_is_private_and_its_entry_reads_back() {
        let dir = std::env::temp_dir().join(format!("vigie-keygen-{}", std::process::id()));
        let made = keygen("fra", &dir).unwrap();
        let mode = std::fs::metadata(&made.key_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&made.key_file).unwrap();
        let key = SigningKey::from_pem(&text).unwrap();
        assert_eq!(
            made.peer_entry,
            format!("{{ name = \"fra\", public_key = \"{}\" }}", key.public())
        );
        assert!(keygen("fra", &dir).unwrap_err().contains("exists"));
        assert!(keygen("Fra", &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
