//! Path confinement: turns a path the model asked for into a path inside the workspace,
//! or refuses it as a `sandbox_violation`, and opens files without following a
//! symlink at the last step.
//!
//! The rules, in order:
//! 1. Only relative paths: `/x`, `\x`, `\\server\share` and `C:\x` are refused, and so
//!    is a NUL byte anywhere.
//! 2. `..` is resolved lexically; one that would climb above the workspace is refused.
//!    The path handed to the kernel never contains `..`, so `link/..` means the
//!    workspace, never the parent of wherever `link` points.
//! 3. The deepest part of the path that exists is canonicalized (every symlink in it
//!    followed) and must lie inside the canonical workspace: a symlinked file or
//!    directory that points outside is refused, wherever it sits in the path.
//! 4. The missing rest must truly not exist: a dangling symlink is refused, since
//!    creating through it would land wherever it points.
//! 5. A write never goes through a symlink, even one pointing inside the workspace.
//!    Missing parent directories are created only after all of the above.
//!
//! # The window that remains (TOCTOU)
//! The check and the use are separate system calls. Something that can write in the
//! workspace at the same time (a program the shell ensemble started, another client
//! sharing the directory) can swap a checked directory for a symlink between the check
//! and the open, and the open would then follow it out. We narrow what std allows:
//! the final component is opened with `O_NOFOLLOW` (a symlink swapped in there makes
//! the open fail, reported as a violation) and `O_NONBLOCK` (a FIFO cannot hang the
//! call), and a file's type is checked on the open descriptor, not the path. On Linux
//! (5.6 and later) a file is opened with `openat2` from the workspace's descriptor,
//! refusing every symlink on the way (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): the
//! checked path is canonical, so a directory swapped for a symlink anywhere along it
//! fails the open instead of leading out. Elsewhere, and where a seccomp filter hides
//! `openat2`, swaps of *intermediate* directories are not caught. Directory walks in
//! `fs` (listing, the search's descent) keep the window for the names they list; each
//! file the search reads is opened the guarded way.
//!
//! # Hard links
//! A hard link inside the workspace to a file outside it is indistinguishable from an
//! ordinary file by its path, so a regular file with more than one link is refused
//! (checked on the open descriptor, before a write truncates anything): reading it
//! could disclose, and writing it could change, a file elsewhere. `search_text` skips
//! such files. The cost: hard-linked trees (a pnpm store) cannot be read with `fs`.
//!
//! What must not live here: anything that reads or writes file contents, or knows
//! about tools; this module only decides where a path leads and opens it.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::ToolError;

/// What the caller is about to do with a path; writes get the stricter rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read an existing file; the path must exist.
    Read,
    /// Create or replace a file; missing parent directories are created after the
    /// check, and the final component must not be a symlink.
    Write,
    /// List an existing directory; the path must exist.
    List,
}

/// The event type of every refusal from this module.
pub const SANDBOX_VIOLATION: &str = "sandbox_violation";

/// How the message of a missing path begins.
const NO_SUCH_FILE: &str = "no such file or directory: ";

/// Whether `error` (from this module) says the path does not exist, as opposed to a
/// refusal or another failure: ACP answers that one with its own code.
pub fn is_not_found(error: &ToolError) -> bool {
    error.kind == ToolErrorKind::ExecutionFailed && error.message.starts_with(NO_SUCH_FILE)
}

/// Resolves `requested` (relative to `workspace`) to a path inside the canonical
/// workspace, or refuses it.
///
/// The returned path is canonical up to its deepest existing ancestor, with the
/// missing rest (only for [`Access::Write`]) appended. Breaches of confinement are
/// violations (`SandboxViolation`, event type `sandbox_violation`); a path that is
/// merely missing or unreadable is an `ExecutionFailed`. See the module docs for the
/// rules and for the race that remains between this check and the use of the path.
pub fn resolve_in_workspace(
    workspace: &Path,
    requested: &str,
    intent: Access,
) -> Result<PathBuf, ToolError> {
    let relative = lexical_relative(requested)?;
    let root = fs::canonicalize(workspace).map_err(|e| {
        ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("the workspace is not accessible: {e}"),
        )
    })?;
    // The workspace was canonical when the turn began (ADR 0040): one that resolves
    // elsewhere now had a folder on its path swapped for a symlink. Never followed.
    if root != workspace {
        return Err(breach(
            requested,
            "the workspace itself was replaced by a symlink since the turn began",
        ));
    }
    let joined = root.join(&relative);

    if intent == Access::Write
        && fs::symlink_metadata(&joined).is_ok_and(|meta| meta.file_type().is_symlink())
    {
        return Err(breach(
            requested,
            "it is a symlink, and writes never go through a symlink",
        ));
    }

    let (ancestor, missing) = deepest_existing(&joined, requested)?;
    if !ancestor.starts_with(&root) {
        return Err(breach(requested, "it resolves outside the workspace"));
    }
    let resolved = missing
        .iter()
        .rev()
        .fold(ancestor, |path, name| path.join(name));

    match intent {
        Access::Read | Access::List if !missing.is_empty() => Err(ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("{NO_SUCH_FILE}{requested}"),
        )),
        Access::Write if !missing.is_empty() => {
            if let Some(parent) = resolved.parent() {
                fs::create_dir_all(parent).map_err(|e| io_failure(requested, &e))?;
            }
            Ok(resolved)
        }
        _ => Ok(resolved),
    }
}

/// Opens an existing regular file for reading, refusing a symlink at the final
/// component (`O_NOFOLLOW`) and anything that is not a regular file (checked on the
/// descriptor, after a non-blocking open so a FIFO cannot hang), or a file with other
/// hard links. `path` comes from [`resolve_in_workspace`] for `workspace`; on Linux it
/// is opened beneath the workspace's descriptor, so a symlink swapped in anywhere
/// along it since the check is refused. `requested` is only used in messages.
pub fn open_regular_file(
    workspace: &Path,
    path: &Path,
    requested: &str,
) -> Result<File, ToolError> {
    let file = match beneath::open(workspace, path, beneath::Mode::Read)
        .map_err(|e| open_failure(requested, &e))?
    {
        Some(file) => file,
        None => {
            let mut options = OpenOptions::new();
            options.read(true);
            no_follow(&mut options);
            options
                .open(path)
                .map_err(|e| open_failure(requested, &e))?
        }
    };
    ensure_regular(&file, requested)?;
    Ok(file)
}

/// Creates or truncates a regular file for writing, with the same final-component
/// guarantees as [`open_regular_file`].
pub fn create_regular_file(
    workspace: &Path,
    path: &Path,
    requested: &str,
) -> Result<File, ToolError> {
    // Truncated only once the descriptor is known to be a regular file with one link.
    let file = match beneath::open(workspace, path, beneath::Mode::Write)
        .map_err(|e| open_failure(requested, &e))?
    {
        Some(file) => file,
        None => {
            let mut options = OpenOptions::new();
            options.write(true).create(true);
            no_follow(&mut options);
            options
                .open(path)
                .map_err(|e| open_failure(requested, &e))?
        }
    };
    ensure_regular(&file, requested)?;
    file.set_len(0).map_err(|e| io_failure(requested, &e))?;
    Ok(file)
}

/// A directory of the workspace opened for listing, with no symlink followed on the
/// workspace's path or below it, so what it names cannot be swapped after the open
/// (a walk by name listed whatever a rename put there). `Ok(None)` where `openat2` is
/// missing: the caller lists by path.
pub fn open_directory(workspace: &Path, dir: &Path) -> io::Result<Option<File>> {
    beneath::open(workspace, dir, beneath::Mode::Directory)
}

/// The subdirectory `name` of a directory [`open_directory`] opened, the same way.
#[cfg(target_os = "linux")]
pub fn open_subdirectory(parent: &File, name: &std::ffi::OsStr) -> io::Result<Option<File>> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(name.as_bytes()) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    beneath::open_at(parent, &name, beneath::Mode::Directory)
}

#[cfg(not(target_os = "linux"))]
pub fn open_subdirectory(_parent: &File, _name: &std::ffi::OsStr) -> io::Result<Option<File>> {
    Ok(None)
}

/// The entries of a directory opened by [`open_directory`] (through its descriptor).
pub fn read_directory(dir: &File) -> io::Result<fs::ReadDir> {
    use std::os::fd::AsRawFd;
    fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

/// The normalized relative path, or a refusal. Pure string work: no file system.
fn lexical_relative(requested: &str) -> Result<PathBuf, ToolError> {
    if requested.is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "the path is empty; use \".\" for the workspace itself",
        ));
    }
    if requested.contains('\0') {
        return Err(breach(requested, "it contains a NUL byte"));
    }
    let bytes = requested.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if requested.starts_with(['/', '\\']) || drive || Path::new(requested).is_absolute() {
        return Err(breach(
            requested,
            "absolute paths are refused (a file of the workspace is named relative to it)",
        ));
    }

    let mut normal = PathBuf::new();
    for component in Path::new(requested).components() {
        match component {
            Component::Normal(name) => normal.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(breach(requested, "it climbs out of the workspace"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(breach(requested, "absolute paths are refused"));
            }
        }
    }
    Ok(normal)
}

/// Splits `joined` into its deepest existing ancestor (canonicalized) and the names
/// of the missing components below it, innermost first.
fn deepest_existing(joined: &Path, requested: &str) -> Result<(PathBuf, Vec<OsString>), ToolError> {
    let mut current = joined.to_path_buf();
    let mut missing = Vec::new();
    loop {
        match fs::canonicalize(&current) {
            Ok(canonical) => return Ok((canonical, missing)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(&current).is_ok() {
                    return Err(breach(requested, "it goes through a dangling symlink"));
                }
                match (current.file_name(), current.parent()) {
                    (Some(name), Some(parent)) => {
                        missing.push(name.to_os_string());
                        current = parent.to_path_buf();
                    }
                    // Only reachable if the workspace itself vanished mid-call.
                    _ => return Err(io_failure(requested, &e)),
                }
            }
            Err(e) => return Err(io_failure(requested, &e)),
        }
    }
}

#[cfg(unix)]
fn no_follow(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
}

#[cfg(not(unix))]
fn no_follow(_options: &mut OpenOptions) {}

fn ensure_regular(file: &File, requested: &str) -> Result<(), ToolError> {
    let meta = file.metadata().map_err(|e| io_failure(requested, &e))?;
    if meta.is_file() && links(&meta) > 1 {
        Err(breach(
            requested,
            "it has other hard links, which may lie outside the workspace",
        ))
    } else if meta.is_file() {
        Ok(())
    } else if meta.is_dir() {
        Err(ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("{requested} is a directory"),
        ))
    } else {
        Err(ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("{requested} is not a regular file"),
        ))
    }
}

#[cfg(unix)]
fn links(meta: &fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
fn links(_meta: &fs::Metadata) -> u64 {
    1
}

fn open_failure(requested: &str, error: &io::Error) -> ToolError {
    #[cfg(unix)]
    if matches!(error.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) {
        // The check saw no symlink on the way, so one was swapped in since.
        return breach(requested, "it became a symlink after it was checked");
    }
    io_failure(requested, error)
}

fn io_failure(requested: &str, error: &io::Error) -> ToolError {
    if error.kind() == io::ErrorKind::NotFound {
        // Gone between the check and the open: still a missing file.
        return ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("{NO_SUCH_FILE}{requested}"),
        );
    }
    ToolError::new(
        ToolErrorKind::ExecutionFailed,
        format!("{requested}: {error}"),
    )
}

fn breach(requested: &str, reason: &str) -> ToolError {
    ToolError::violation(
        ToolErrorKind::SandboxViolation,
        SANDBOX_VIOLATION,
        format!(
            "path {requested:?} refused: {reason}. Tools reach only files inside the \
             workspace: what lies outside it cannot be read or written through any path"
        ),
    )
}

/// Opening a checked path so that no symlink swapped in after the check is followed,
/// anywhere along it: Linux's `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
/// from the workspace's descriptor. The checked path is canonical, so any symlink met
/// on the way is new and the open fails (`ELOOP`/`EXDEV`, a violation). Where the call
/// does not exist (other systems, kernels before 5.6, a seccomp filter) the caller
/// falls back to the plain open, with the window the module docs describe.
#[cfg(target_os = "linux")]
pub(crate) use beneath::open_workspace;

mod beneath {
    use std::fs::File;
    use std::io;
    use std::path::Path;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Mode {
        Read,
        /// A directory, to list (`read_dir` through `/proc/self/fd/N`).
        Directory,
        /// Write, creating the file if missing; never truncating (the caller does,
        /// once the descriptor has been checked).
        Write,
    }

    /// `Ok(None)` when `openat2` is not available here.
    #[cfg(target_os = "linux")]
    pub(super) fn open(workspace: &Path, path: &Path, mode: Mode) -> io::Result<Option<File>> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;

        // The workspace is canonical (ADR 0040): opened with no symlink followed on
        // its own path either, so a folder swapped for one since is refused (`ELOOP`).
        let root = workspace;
        let Ok(relative) = path.strip_prefix(root) else {
            // Not below the canonical workspace: the check would have refused it.
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        };
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let Ok(name) = CString::new(relative.as_os_str().as_bytes()) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let dir = open_workspace(root)?;
        open_at(&dir, &name, mode)
    }

    /// `name` (relative, no symlink on it) opened below the directory `dir`.
    #[cfg(target_os = "linux")]
    pub(super) fn open_at(
        dir: &File,
        name: &std::ffi::CStr,
        mode: Mode,
    ) -> io::Result<Option<File>> {
        use std::os::fd::{AsRawFd, FromRawFd};

        let flags = match mode {
            Mode::Read => libc::O_RDONLY,
            Mode::Directory => libc::O_RDONLY | libc::O_DIRECTORY,
            Mode::Write => libc::O_WRONLY | libc::O_CREAT,
        } | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_CLOEXEC;
        // SAFETY: `open_how` is a plain C struct; all-zero is its documented default.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags as u64;
        how.mode = if mode == Mode::Write { 0o666 } else { 0 };
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: every pointer is valid for the call: `name` is a NUL-terminated
        // string and `how` an `open_how` of the size passed; `dir` outlives the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) => Ok(None),
                _ => Err(error),
            };
        }
        let Ok(fd) = i32::try_from(fd) else {
            return Err(io::Error::other(
                "openat2 returned an impossible descriptor",
            ));
        };
        // SAFETY: `fd` was just returned by the kernel, is open, and is owned by
        // nothing else.
        Ok(Some(unsafe { File::from_raw_fd(fd) }))
    }

    /// The canonical workspace opened with no symlink followed anywhere on its path
    /// (`openat2` from `/`, `RESOLVE_NO_SYMLINKS`): `ELOOP` when a folder on it was
    /// swapped for a symlink. Without `openat2`, the path must still canonicalise to
    /// itself (`EXDEV` otherwise), with the window the module docs describe.
    #[cfg(target_os = "linux")]
    pub(crate) fn open_workspace(workspace: &Path) -> io::Result<File> {
        use std::ffi::CString;
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;

        let Ok(name) = CString::new(workspace.as_os_str().as_bytes()) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `open_how` is a plain C struct; all-zero is its documented default.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: `name` is a NUL-terminated string and `how` an `open_how` of the
        // size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) => {
                    if std::fs::canonicalize(workspace)? != workspace {
                        return Err(io::Error::from_raw_os_error(libc::EXDEV));
                    }
                    File::open(workspace)
                }
                _ => Err(error),
            };
        }
        let Ok(fd) = i32::try_from(fd) else {
            return Err(io::Error::other(
                "openat2 returned an impossible descriptor",
            ));
        };
        // SAFETY: `fd` was just returned by the kernel, is open, and is owned by
        // nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(_workspace: &Path, _path: &Path, _mode: Mode) -> io::Result<Option<File>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_rules_need_no_file_system() {
        assert_eq!(
            lexical_relative("a/./b/../c").unwrap(),
            PathBuf::from("a/c")
        );
        assert_eq!(lexical_relative(".").unwrap(), PathBuf::new());
        assert_eq!(lexical_relative("a/..").unwrap(), PathBuf::new());
        for hostile in [
            "..",
            "../..",
            "a/../../b",
            "/etc/passwd",
            "\\\\server\\share",
            "\\windows",
            "C:\\Windows",
            "c:relative",
            "a\0b",
        ] {
            let err = lexical_relative(hostile).unwrap_err();
            assert_eq!(err.kind, ToolErrorKind::SandboxViolation, "{hostile:?}");
            assert!(err.security.is_some(), "{hostile:?}");
        }
        let empty = lexical_relative("").unwrap_err();
        assert_eq!(empty.kind, ToolErrorKind::InvalidArguments);
        assert!(empty.security.is_none());
    }

    /// The workspace itself swapped for a symlink after the turn began (ADR 0040):
    /// every resolve and every open refuses it as a violation, never following it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_workspace_swapped_for_a_symlink_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let workspace = base.join("ws");
        let outside = base.join("outside");
        fs::create_dir(&workspace).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(workspace.join("f.txt"), "inside").unwrap();
        fs::write(outside.join("f.txt"), "outside").unwrap();
        let path = resolve_in_workspace(&workspace, "f.txt", Access::Read).unwrap();
        fs::rename(&workspace, base.join("ws.orig")).unwrap();
        std::os::unix::fs::symlink(&outside, &workspace).unwrap();
        for intent in [Access::Read, Access::Write, Access::List] {
            let err = resolve_in_workspace(&workspace, "f.txt", intent).unwrap_err();
            assert_eq!(err.kind, ToolErrorKind::SandboxViolation, "{intent:?}");
            assert!(err.security.is_some());
        }
        // Checked before the swap, opened after: the open refuses it too.
        match open_regular_file(&workspace, &path, "f.txt") {
            Err(err) => assert_eq!(err.kind, ToolErrorKind::SandboxViolation),
            Ok(_) => panic!("the swapped workspace was followed"),
        }
        match create_regular_file(&workspace, &path, "f.txt") {
            Err(err) => assert_eq!(err.kind, ToolErrorKind::SandboxViolation),
            Ok(_) => panic!("the swapped workspace was written through"),
        }
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside"
        );
    }
}
