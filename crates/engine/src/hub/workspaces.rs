//! Workspace roots (ADR 0031): where a caller from outside the process may point a
//! thread's `cwd` (and so an MCP call's `workspace`, an ACP agent's, an execution's).
//!
//! A canonical `cwd` must lie inside one of the roots, and must never be, or contain,
//! the server's data directory or configuration directory: from such a workspace the
//! tools could read the database or the configuration by a relative path. Descendants
//! of those directories are fine (executions' working directories live beside the
//! database). A refusal names how many roots there are, never their paths. In-process
//! callers (`run`, an execution's worker) are not confined here: `run` is unchanged.

use std::path::{Path, PathBuf};

use super::{Hub, HubError};
use crate::identity::{Caller, Principal};

/// The roots and the directories no workspace may be or contain; all canonical.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceRoots {
    /// `None`: no roots configured, any directory but the forbidden ones.
    pub roots: Option<Vec<PathBuf>>,
    /// The data directory and the configuration directory.
    pub forbidden: Vec<PathBuf>,
}

impl WorkspaceRoots {
    /// Whether a canonical `cwd` is allowed; the error says why without a path.
    pub fn check(&self, cwd: &Path) -> Result<(), HubError> {
        if let Some(roots) = &self.roots
            && !roots.iter().any(|root| cwd.starts_with(root))
        {
            return Err(HubError::InvalidArgument(format!(
                "cwd must be inside one of the server's {} workspace root(s) \
                 ([server] workspace_roots)",
                roots.len()
            )));
        }
        if self.forbidden.iter().any(|dir| dir.starts_with(cwd)) {
            return Err(HubError::InvalidArgument(
                "cwd must not be or contain the server's data or configuration directory".into(),
            ));
        }
        Ok(())
    }
}

impl Hub {
    /// Confines the workspaces of callers from outside the process to `roots`. Set
    /// once, by `serve`.
    pub fn confine_workspaces(&self, roots: WorkspaceRoots) {
        let _ = self.workspace_roots.set(roots);
    }

    /// Checks a canonical `cwd` for `caller`: in-process callers are not confined.
    pub(crate) fn check_workspace(&self, caller: &Caller, cwd: &Path) -> Result<(), HubError> {
        match (self.workspace_roots.get(), caller.principal()) {
            (Some(roots), principal) if *principal != Principal::Local => roots.check(cwd),
            _ => Ok(()),
        }
    }

    /// Checks a `cwd` from outside: absolute, existing, a directory, and allowed for
    /// `caller` once canonical.
    pub fn check_cwd(&self, caller: &Caller, cwd: &str) -> Result<String, HubError> {
        let canonical = super::threads::canonical_cwd(cwd)?;
        self.check_workspace(caller, Path::new(&canonical))?;
        Ok(canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_hold_and_the_data_directory_never_is_a_workspace() {
        let roots = WorkspaceRoots {
            roots: Some(vec![PathBuf::from("/srv/work")]),
            forbidden: vec![PathBuf::from("/srv/work/data")],
        };
        assert!(roots.check(Path::new("/srv/work/a")).is_ok());
        assert!(
            roots
                .check(Path::new("/srv/work/data/executions/x"))
                .is_ok()
        );
        for refused in ["/srv/work", "/srv/work/data", "/srv/workshop", "/etc", "/"] {
            let e = roots.check(Path::new(refused)).expect_err(refused);
            assert!(!e.to_string().contains("/srv"), "{e}");
        }
        let open = WorkspaceRoots {
            roots: None,
            forbidden: vec![PathBuf::from("/var/lib/ap")],
        };
        assert!(open.check(Path::new("/home/u")).is_ok());
        assert!(open.check(Path::new("/var")).is_err());
    }
}
