//! The setup token's file: `<data directory>/setup-token`, mode 0600, holding the
//! one-time token that alone creates the first key over HTTP on a server without keys
//! or token (the hub's `setup.rs` checks it; docs/identity.md).
//!
//! `serve` writes a fresh one on each start while no key exists, and removes a stale
//! one when keys, a token or OIDC make it needless. The file is written under a
//! temporary name opened with `O_CREAT | O_EXCL` and mode 0600 (never another mode,
//! never through a symlink planted there), then renamed over the old one, so nobody
//! ever reads half a token or a file with wider permissions. `agentplane keys create`
//! reads it ([`read`]). Nothing here logs or prints the token.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use agentplane_core::identity::SetupToken;
use agentplane_engine::ports::{KeyStore, StoreError};
use agentplane_engine::services::identity::Bootstrap;

use crate::config::Config;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "setup-token";

/// Where the setup token of the configured store is kept: beside the SQLite file (with
/// PostgreSQL, beside where it would be, like executions' folders).
pub fn path(config: &Config) -> PathBuf {
    config
        .store
        .path
        .parent()
        .unwrap_or_else(|| Path::new(""))
        .join(FILE_NAME)
}

/// The token a running `serve` wrote for this configuration, if its file is there.
/// `Err` says why it could not be read (never the token).
pub fn read(config: &Config) -> Result<Option<SetupToken>, String> {
    let path = path(config);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(SetupToken::presented(text.trim()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// For a server about to serve: a fresh setup token written to its file, when no key,
/// no token and no OIDC provider exists; else `None`, and a stale file removed.
pub(crate) async fn prepare(
    config: &Config,
    keys: &dyn KeyStore,
) -> Result<Option<(PathBuf, Bootstrap)>, StoreError> {
    let path = path(config);
    let has_token = config
        .server
        .auth_token
        .as_deref()
        .is_some_and(|t| !t.is_empty());
    if has_token || config.oidc.is_some() || keys.any_keys().await? {
        remove(&path);
        return Ok(None);
    }
    let token = SetupToken::generate().map_err(StoreError::Backend)?;
    write(&path, &token).map_err(|e| {
        StoreError::Backend(format!(
            "cannot write the setup token to {}: {e}",
            path.display()
        ))
    })?;
    let kept = path.clone();
    Ok(Some((path, Bootstrap::new(token, move || remove(&kept)))))
}

/// Writes `token` to `path`: a 0600 file made anew, then renamed into place.
fn write(path: &Path, token: &SetupToken) -> std::io::Result<()> {
    let mut contents = token.expose().as_bytes().to_vec();
    contents.push(b'\n');
    write_private(path, &contents)
}

/// Writes `contents` to `path` as a 0600 file made anew under a temporary name
/// (`O_CREAT | O_EXCL`, so never through a planted link), synced, then renamed into
/// place: a reader sees the old file or the whole new one. Makes the directory (0700)
/// when it is missing.
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // With PostgreSQL nothing else makes the data directory (SQLite's file would).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fresh = path.with_file_name(format!("{name}.{}.new", std::process::id()));
    // A leftover of a process that died between the two steps (same pid, reused).
    let _ = std::fs::remove_file(&fresh);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .and_then(|mut file| {
            file.write_all(contents)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&fresh, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    written
}

/// Removes the file, if it is there; a failure is logged (its path, never its content).
fn remove(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!(path = %path.display(), "setup token file removed"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e,
            "the setup token file could not be removed; delete it by hand"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_file_is_0600_replaced_whole_and_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let first = SetupToken::generate().expect("random");
        write(&path, &first).expect("write");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = SetupToken::generate().expect("random");
        // A link planted where the file goes is replaced, its target left alone.
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").expect("target");
        std::fs::remove_file(&path).expect("rm");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        write(&path, &second).expect("rewrite");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(second.matches(&SetupToken::presented(text.trim())));
        assert!(!first.matches(&SetupToken::presented(text.trim())));
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
        remove(&path);
        assert!(!path.exists());
        remove(&path);
    }
}
