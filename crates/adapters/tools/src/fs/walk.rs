//! The walk of `list_files` and `search_files`: every directory listed through a
//! descriptor opened below the workspace's, never by name, so a folder renamed or
//! swapped for a symlink while the walk runs cannot make it list another directory.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::ToolError;

use agentplane_process::confine;

/// Directory entries a walk looks at before it stops, shown or not.
pub const MAX_SCANNED_ENTRIES: usize = 50_000;

/// The type of a directory entry as the walk saw it, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

pub(super) struct WalkEnd {
    pub(super) budget_exhausted: bool,
}

/// A directory the walk has still to list: by its descriptor (opened below its
/// parent's, no symlink followed, so a rename cannot change which directory it is), or
/// by name where `openat2` is missing.
enum Listed {
    Open(std::rc::Rc<std::fs::File>),
    Below(std::rc::Rc<std::fs::File>, std::ffi::OsString),
    ByName,
}

impl Listed {
    /// The entries, and the directory's descriptor for its subdirectories.
    fn read(
        self,
        path: &Path,
    ) -> std::io::Result<(std::fs::ReadDir, Option<std::rc::Rc<std::fs::File>>)> {
        let dir = match self {
            Self::Open(dir) => dir,
            Self::Below(parent, name) => match confine::open_subdirectory(&parent, &name)? {
                Some(dir) => std::rc::Rc::new(dir),
                None => return Ok((std::fs::read_dir(path)?, None)),
            },
            Self::ByName => return Ok((std::fs::read_dir(path)?, None)),
        };
        Ok((confine::read_directory(&dir)?, Some(dir)))
    }
}

/// Visits the entries under `start` (itself not visited), which lies in the workspace
/// `root`: each directory's entries in name order, then its subdirectories depth first
/// when `recursive`. Every directory is listed through a descriptor opened below the
/// workspace's (no symlink followed anywhere), never by name. Symlinks are visited as
/// such and never followed; `.git` is not descended into. Stops when `visit` breaks,
/// after [`MAX_SCANNED_ENTRIES`], or with a `Timeout` at `deadline`.
pub(super) fn walk(
    root: &Path,
    start: &Path,
    recursive: bool,
    deadline: Instant,
    visit: &mut dyn FnMut(&Path, EntryKind) -> ControlFlow<()>,
) -> Result<WalkEnd, ToolError> {
    let first = match confine::open_directory(root, start) {
        Ok(Some(dir)) => Listed::Open(std::rc::Rc::new(dir)),
        Ok(None) => Listed::ByName,
        Err(e) => {
            return Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("cannot list the directory: {e}"),
            ));
        }
    };
    let mut pending = vec![(start.to_path_buf(), first)];
    let mut scanned = 0usize;
    while let Some((dir, listed)) = pending.pop() {
        let (reader, handle) = match listed.read(&dir) {
            Ok(read) => read,
            // An unreadable subdirectory is skipped; an unreadable start is an error.
            Err(_) if dir != start => continue,
            Err(e) => {
                return Err(ToolError::new(
                    ToolErrorKind::ExecutionFailed,
                    format!("cannot list the directory: {e}"),
                ));
            }
        };
        let mut entries = Vec::new();
        let mut budget_exhausted = false;
        for entry in reader {
            if Instant::now() >= deadline {
                return Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    "the walk did not finish within the time limit; narrow the path",
                ));
            }
            let Ok(entry) = entry else { continue };
            scanned += 1;
            if scanned > MAX_SCANNED_ENTRIES {
                budget_exhausted = true;
                break;
            }
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => EntryKind::Symlink,
                Ok(t) if t.is_dir() => EntryKind::Dir,
                Ok(t) if t.is_file() => EntryKind::File,
                _ => EntryKind::Other,
            };
            entries.push((entry.file_name(), kind));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));

        let mut subdirs = Vec::new();
        for (name, kind) in entries {
            let path = dir.join(&name);
            if visit(&path, kind).is_break() {
                return Ok(WalkEnd {
                    budget_exhausted: false,
                });
            }
            if recursive && kind == EntryKind::Dir && name != ".git" {
                let listed = match &handle {
                    Some(parent) => Listed::Below(parent.clone(), name),
                    None => Listed::ByName,
                };
                subdirs.push((path, listed));
            }
        }
        if budget_exhausted {
            return Ok(WalkEnd {
                budget_exhausted: true,
            });
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(WalkEnd {
        budget_exhausted: false,
    })
}
