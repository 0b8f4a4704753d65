//! The kernel sandbox of an external agent's process tree (ADR 0034), the one our
//! tools' processes get (`agentplane_process::sandbox`), with what an agent needs:
//!
//! - read-write: the thread's workspace, the agent's own state and cache directories
//!   under `$HOME` (its profile's `state_dirs`, created when missing), a private
//!   temporary directory (`TMPDIR`, removed after the prompt), and the agent's
//!   `sandbox.read_write`;
//! - read and execute: the system directories and `PATH` (as for tools), the agent's
//!   installation (the package root of its program and of a script it is started
//!   with), and `sandbox.read_only`;
//! - nothing else: not the server's data directory or configuration, not other
//!   workspaces, not `$HOME` itself, not `/proc/<server>`; the environment is already
//!   without our secrets.
//! - the network stays open (TCP): the agent calls its model; the seccomp filter and
//!   rlimits apply as for tools.
//!
//! What must not live here: spawning (that is `agentplane_process::process`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use agentplane_engine::ports::external::ExternalError;
use agentplane_process::Sandbox;
use agentplane_process::sandbox::{Prepared, prepare};

use crate::config::AcpAgentConfig;

/// A prompt's confinement, ready for the spawn, and its private temporary directory.
pub(crate) struct Confinement {
    pub prepared: Prepared,
    /// Removed when the prompt is over.
    pub tmp: PrivateTmp,
}

/// A directory only this prompt's agent may use as `/tmp`.
pub(crate) struct PrivateTmp(PathBuf);

impl PrivateTmp {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds the confinement of `config`'s agent working in `workspace`. `Ok(None)` when
/// the agent's profile runs unconfined (`sandbox = false` on the agent).
pub(crate) fn confinement_for(
    config: &AcpAgentConfig,
    workspace: &Path,
) -> Result<Option<Confinement>, ExternalError> {
    let Some(base) = &config.sandbox else {
        return Ok(None);
    };
    let tmp = private_tmp().map_err(|e| {
        ExternalError::Unavailable(format!(
            "cannot create the agent's temporary directory: {e}"
        ))
    })?;
    let mut sandbox = Sandbox {
        spec: base.spec.clone(),
        network: true,
        // Bun (opencode) aborts without /proc/self/maps; the child's own directory
        // only, never the server's.
        own_proc: true,
    };
    let rw = &mut sandbox.spec.read_write;
    rw.push(tmp.path().display().to_string());
    // The agent's own `HOME` when its configuration sets one, else ours.
    let home = config
        .env
        .get("HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from));
    if let Some(home) = home {
        for dir in &config.state_dirs {
            let dir = home.join(dir);
            // Created now: Landlock grants rights beneath paths that exist.
            let _ = std::fs::create_dir_all(&dir);
            rw.push(dir.display().to_string());
        }
    }
    let ro = &mut sandbox.spec.read_only;
    let program = crate::config::locate_program(&config.command);
    for path in program.iter().chain(
        config
            .args
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file())
            .collect::<Vec<_>>()
            .iter(),
    ) {
        if let Some(root) = installation_of(path) {
            ro.push(root.display().to_string());
        }
    }
    let prepared = prepare(&sandbox, workspace)
        .map_err(|e| ExternalError::Unavailable(format!("the agent cannot be confined: {e}")))?;
    Ok(Some(Confinement { prepared, tmp }))
}

/// The directory holding a program's installation: for a file inside a
/// `node_modules` tree, the folder that holds the outermost `node_modules` (the
/// package and all its dependencies); for a file in a `bin` folder, that folder's
/// parent (a prefix: `lib/` beside `bin/`); else the file's own folder. Symlinks
/// (npm's `.bin`) are followed first.
fn installation_of(path: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    let outermost = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .and_then(Path::parent);
    let folder = real.parent()?;
    match outermost {
        Some(root) => Some(root.to_path_buf()),
        None if folder.file_name().is_some_and(|n| n == "bin") => {
            folder.parent().map(Path::to_path_buf)
        }
        None => Some(folder.to_path_buf()),
    }
}

fn private_tmp() -> std::io::Result<PrivateTmp> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "agentplane-acp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(PrivateTmp(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_installation_is_its_outermost_node_modules_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let bin = dir.path().join("node_modules/opencode-ai/bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::write(bin.join("opencode"), "#!/bin/sh\n").expect("file");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        assert_eq!(installation_of(&bin.join("opencode")), Some(root.clone()));
        std::fs::write(dir.path().join("agent.mjs"), "").expect("script");
        assert_eq!(installation_of(&dir.path().join("agent.mjs")), Some(root));
    }
}
