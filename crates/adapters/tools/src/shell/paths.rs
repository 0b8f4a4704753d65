//! The argument screen for paths: an argument naming a place outside the workspace and
//! the sandbox's roots is refused before anything runs, as a `sandbox_violation`.
//!
//! This is not the confinement — the kernel is (`agentplane_process::sandbox`): an argument can
//! hide a path in ways no screen sees (a glued short option, a file that lists paths, a
//! symbolic link). The screen exists so that the plain attempts (`cat
//! /proc/1/environ`, `sort -o /elsewhere`, `find -fprint /elsewhere`, `grep -r x
//! ../other-workspace`) are refused with a record of who tried, not only with an
//! `EACCES` the model reads.
//!
//! What must not live here: reading the file system (paths are judged lexically).

use std::path::{Component, Path, PathBuf};

use agentplane_process::sandbox::Sandbox;

/// Roots that are readable for the programs' own needs but never a fit argument:
/// `/proc` and `/sys` describe other processes and the machine.
const NOT_FOR_ARGUMENTS: &[&str] = &["/proc", "/sys"];

/// The first argument that names a path outside `workspace` and the sandbox's roots,
/// with that path.
pub(super) fn outside(args: &[String], workspace: &Path, sandbox: &Sandbox) -> Option<String> {
    let mut roots: Vec<PathBuf> = sandbox
        .read_only()
        .into_iter()
        .chain(sandbox.read_write(workspace))
        .filter(|root| !NOT_FOR_ARGUMENTS.iter().any(|n| root.starts_with(n)))
        .collect();
    roots.push(workspace.to_path_buf());
    args.iter()
        .flat_map(|arg| candidates(arg))
        .find(|candidate| {
            let path = normalize(&workspace.join(candidate));
            !roots.iter().any(|root| path.starts_with(root))
        })
        .map(str::to_owned)
}

/// The parts of one argument that may be a path: the whole argument, what follows the
/// first `=` (`--output=/x`), and a glued short option's value (`-o/x`). Only those
/// that leave the directory lexically (absolute, `~`, or with a `..`) are returned.
fn candidates(arg: &str) -> Vec<&str> {
    let mut parts = vec![arg];
    if let Some((_, value)) = arg.split_once('=') {
        parts.push(value);
    }
    if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") {
        parts.push(&arg[2..]);
    }
    parts
        .into_iter()
        .filter(|part| {
            part.starts_with('/')
                || part.starts_with('~')
                || Path::new(part)
                    .components()
                    .any(|c| c == Component::ParentDir)
        })
        .collect()
}

/// Resolves `.` and `..` without touching the file system; `~` is taken as outside.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) if part.to_string_lossy().starts_with('~') => {
                return PathBuf::from("/~");
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Option<String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        outside(&args, Path::new("/srv/ws/a"), &Sandbox::default())
    }

    #[test]
    fn paths_leaving_the_workspace_are_found_in_every_spelling() {
        assert_eq!(check(&["src/main.rs", "-n", "./x", "a/../b"]), None);
        assert_eq!(check(&["/usr/include/stdio.h"]), None);
        assert_eq!(check(&["-o", "/dev/null"]), None);
        for args in [
            &["/etc/shadow"][..],
            &["/proc/1/environ"],
            &["-o", "/srv/ws/b/x"],
            &["-o/srv/ws/b/x"],
            &["--output=/tmp/x"],
            &["../b/secret"],
            &["x/../../../etc"],
            &["~/.ssh/id_rsa"],
            &["-fprint", "/srv/data/x"],
        ] {
            assert!(check(args).is_some(), "{args:?}");
        }
    }
}
