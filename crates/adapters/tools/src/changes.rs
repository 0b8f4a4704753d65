//! `WorkspaceFiles`: the engine's `WorkspaceScanner` on the real file system, for the
//! `workspace_changed` event after every turn. A bounded walk: symlinks are listed, not
//! followed (their target text is hashed); special files are skipped; content is
//! hashed (SHA-256) and dropped. Files are opened as `agentplane-process`'s
//! confinement opens them (beneath the workspace, no symlink, no FIFO).
//!
//! Limits (`docs/security.md`, "What changed, recorded"): at most [`MAX_FILES`] files, files over
//! [`MAX_HASHED_FILE_BYTES`] compared by size and modification time only, and at most
//! [`MAX_HASHED_BYTES`] hashed per scan (later files by size and time too). A scan
//! that stops at the file limit says so, and the event is marked incomplete.
//!
//! What must not live here: deciding what a change means (the engine compares).

use std::path::{Path, PathBuf};

use agentplane_engine::ports::{FileState, WorkspaceScanner, WorkspaceSnapshot};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

/// Files listed per scan.
pub const MAX_FILES: usize = 20_000;
/// Largest file whose content is hashed.
pub const MAX_HASHED_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Bytes hashed per scan, over all files.
pub const MAX_HASHED_BYTES: u64 = 64 * 1024 * 1024;

/// Scans workspaces on the local file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkspaceFiles;

#[async_trait]
impl WorkspaceScanner for WorkspaceFiles {
    async fn scan(&self, workspace: &Path) -> WorkspaceSnapshot {
        let root = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || scan(&root))
            .await
            .unwrap_or_else(|e| WorkspaceSnapshot {
                limit: Some(format!("the scan failed: {e}")),
                ..WorkspaceSnapshot::default()
            })
    }
}

fn scan(root: &Path) -> WorkspaceSnapshot {
    let mut snapshot = WorkspaceSnapshot::default();
    let mut hashed = 0u64;
    let mut pending: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let kind = meta.file_type();
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !kind.is_file() && !kind.is_symlink() {
                continue;
            }
            if snapshot.files.len() >= MAX_FILES {
                snapshot.limit = Some(format!("stopped at {MAX_FILES} files"));
                return snapshot;
            }
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            let relative = relative.to_string_lossy().into_owned();
            let sha256 = if kind.is_symlink() {
                std::fs::read_link(&path)
                    .ok()
                    .map(|target| hex(&Sha256::digest(target.as_os_str().as_encoded_bytes())))
            } else if meta.len() <= MAX_HASHED_FILE_BYTES && hashed + meta.len() <= MAX_HASHED_BYTES
            {
                hashed += meta.len();
                hash_file(root, &path, &relative)
            } else {
                None
            };
            let modified_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i128);
            snapshot.files.insert(
                relative,
                FileState {
                    size: meta.len(),
                    sha256,
                    modified_ns,
                },
            );
        }
    }
    snapshot
}

/// The file's SHA-256, opened the guarded way (beneath the workspace, no symlink, no
/// FIFO to hang on); a file with other hard links is not hashed (compared by time).
fn hash_file(root: &Path, path: &Path, relative: &str) -> Option<String> {
    use std::io::Read;
    let file = agentplane_process::confine::open_regular_file(root, path, relative).ok()?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut reader = file.take(MAX_HASHED_FILE_BYTES + 1);
    loop {
        let n = reader.read(&mut buffer).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Some(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_with_size_and_hash_and_symlinks_are_not_followed() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("src")).expect("src");
        std::fs::write(dir.path().join("src/a.txt"), "hello").expect("a");
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).expect("link");
        let snapshot = scan(dir.path());
        let a = &snapshot.files["src/a.txt"];
        assert_eq!(a.size, 5);
        assert_eq!(
            a.sha256.as_deref(),
            Some("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        );
        #[cfg(unix)]
        assert!(
            snapshot.files["link"].size < 100,
            "the link, not /etc/passwd"
        );
        assert_eq!(snapshot.limit, None);
    }
}
