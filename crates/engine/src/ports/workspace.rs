//! `WorkspaceScanner`: what files a workspace holds, so a turn can record what changed
//! in it (`workspace_changed`), including what an external agent did on its own. The
//! adapter walks the files; the comparison is here, so every scanner reports changes
//! the same way. Content is never kept: a path, a size, a hash.

use std::collections::BTreeMap;
use std::path::Path;

use agentplane_core::{EventPayload, FileChange};
use async_trait::async_trait;

/// Entries listed in one `workspace_changed` event, over all three lists; the rest
/// are counted in `limit`.
pub const MAX_LISTED_CHANGES: usize = 1_000;

/// One file as a scan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub size: u64,
    /// SHA-256 of the content, hex; `None` when the file is over the hashing limit.
    pub sha256: Option<String>,
    /// Modification time in nanoseconds, compared when a hash is missing.
    pub modified_ns: i128,
}

/// The files of a workspace, by path relative to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceSnapshot {
    pub files: BTreeMap<String, FileState>,
    /// Which limit stopped the scan early, if one did (the listing is then partial).
    pub limit: Option<String>,
}

/// Walks a workspace.
#[async_trait]
pub trait WorkspaceScanner: Send + Sync {
    /// The workspace's files now, within the scanner's limits. Never fails: what
    /// cannot be read is left out (and said in `limit` when it matters).
    async fn scan(&self, workspace: &Path) -> WorkspaceSnapshot;
}

/// The `workspace_changed` event between two scans; `None` when nothing changed.
pub fn changes(before: &WorkspaceSnapshot, after: &WorkspaceSnapshot) -> Option<EventPayload> {
    let entry = |path: &str, state: &FileState| FileChange {
        path: path.to_owned(),
        size: state.size,
        sha256: state.sha256.clone(),
    };
    let (mut created, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for (path, now) in &after.files {
        match before.files.get(path) {
            None => created.push(entry(path, now)),
            Some(then) if differs(then, now) => modified.push(entry(path, now)),
            Some(_) => {}
        }
    }
    for (path, then) in &before.files {
        if !after.files.contains_key(path) {
            deleted.push(entry(path, then));
        }
    }
    let total = created.len() + modified.len() + deleted.len();
    let mut limit = after.limit.clone().or_else(|| before.limit.clone());
    if total == 0 && limit.is_none() {
        return None;
    }
    if total > MAX_LISTED_CHANGES {
        let mut room = MAX_LISTED_CHANGES;
        for list in [&mut created, &mut modified, &mut deleted] {
            list.truncate(room);
            room -= list.len();
        }
        limit = Some(format!(
            "{total} changes, the first {MAX_LISTED_CHANGES} listed{}",
            limit.map(|l| format!("; {l}")).unwrap_or_default()
        ));
    }
    Some(EventPayload::WorkspaceChanged {
        created,
        modified,
        deleted,
        complete: limit.is_none(),
        limit,
    })
}

fn differs(then: &FileState, now: &FileState) -> bool {
    if then.size != now.size {
        return true;
    }
    match (&then.sha256, &now.sha256) {
        (Some(a), Some(b)) => a != b,
        _ => then.modified_ns != now.modified_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(files: &[(&str, u64, &str)]) -> WorkspaceSnapshot {
        WorkspaceSnapshot {
            files: files
                .iter()
                .map(|(p, size, hash)| {
                    let state = FileState {
                        size: *size,
                        sha256: Some((*hash).to_owned()),
                        modified_ns: 0,
                    };
                    ((*p).to_owned(), state)
                })
                .collect(),
            limit: None,
        }
    }

    #[test]
    fn created_modified_and_deleted_files_are_told_apart() {
        let before = snap(&[("a", 1, "x"), ("b", 1, "y"), ("c", 1, "z")]);
        let after = snap(&[("a", 1, "x"), ("b", 1, "Y"), ("d", 2, "w")]);
        let Some(EventPayload::WorkspaceChanged {
            created,
            modified,
            deleted,
            complete,
            ..
        }) = changes(&before, &after)
        else {
            panic!("a change")
        };
        assert_eq!(created[0].path, "d");
        assert_eq!(modified[0].path, "b");
        assert_eq!(deleted[0].path, "c");
        assert!(complete);
        assert_eq!(changes(&before, &before), None);
    }
}
