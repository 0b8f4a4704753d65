//! Where outside callers' workspaces may be (ADR 0031, 0040): the configured roots and
//! the directories no workspace may be, contain or lie below, and the pure check of a
//! canonical directory against them. The hub's checks at creation and at use are
//! `workspaces.rs`; nothing here touches the filesystem.

use std::path::{Path, PathBuf};

use crate::error::HubError;

/// The roots and the directories no workspace may be, contain or (for `sealed`) lie
/// below; all canonical.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceRoots {
    /// `None`: no roots configured, any directory but the forbidden ones.
    pub roots: Option<Vec<PathBuf>>,
    /// The data directory: never a workspace nor inside one; the executions' folders
    /// in it may be.
    pub data: Option<PathBuf>,
    /// The configuration directory, the policies directory and every `[secrets]`
    /// file's folder: never a workspace, inside one, or above one.
    pub sealed: Vec<PathBuf>,
}

impl WorkspaceRoots {
    /// How many roots confine workspaces (0: none configured).
    pub fn count(&self) -> usize {
        self.roots.as_ref().map_or(0, Vec::len)
    }

    /// Whether a canonical `cwd` is allowed; the error says why without a path.
    pub fn check(&self, cwd: &Path) -> Result<(), HubError> {
        if let Some(roots) = &self.roots
            && !roots.iter().any(|root| cwd.starts_with(root))
            && !self.below_data(cwd)
        {
            return Err(HubError::InvalidArgument(format!(
                "cwd must be inside one of the server's {} workspace root(s) \
                 ([server] workspace_roots)",
                roots.len()
            )));
        }
        self.check_forbidden(cwd)
    }

    /// The rule on the data, configuration, policies and secrets directories alone.
    pub(super) fn check_forbidden(&self, cwd: &Path) -> Result<(), HubError> {
        if self
            .data
            .iter()
            .chain(&self.sealed)
            .any(|dir| dir.starts_with(cwd))
        {
            return Err(HubError::InvalidArgument(
                "cwd must not be or contain the server's data, configuration, policies \
                 or secrets directory"
                    .into(),
            ));
        }
        if self
            .sealed
            .iter()
            .any(|dir| cwd.starts_with(dir) && !self.data_below(dir, cwd))
        {
            return Err(HubError::InvalidArgument(
                "cwd must not lie below the server's configuration, policies or secrets \
                 directory"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether `cwd` is strictly below the executions' folder in the data directory
    /// (where an execution without a `cwd` works).
    fn below_data(&self, cwd: &Path) -> bool {
        self.data.as_ref().is_some_and(|data| {
            let executions = data.join("executions");
            cwd.starts_with(&executions) && cwd != executions
        })
    }

    /// Whether `cwd` is an execution's folder in a data directory kept in the sealed
    /// `dir` (the database beside the configuration file).
    fn data_below(&self, dir: &Path, cwd: &Path) -> bool {
        self.below_data(cwd) && self.data.as_ref().is_some_and(|data| data.starts_with(dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_hold_and_the_data_directory_never_is_a_workspace() {
        let roots = WorkspaceRoots {
            roots: Some(vec![PathBuf::from("/srv/work")]),
            data: Some(PathBuf::from("/srv/work/data")),
            sealed: Vec::new(),
        };
        assert!(roots.check(Path::new("/srv/work/a")).is_ok());
        assert!(
            roots
                .check(Path::new("/srv/work/data/executions/x"))
                .is_ok()
        );
        assert!(roots.check(Path::new("/srv/work/data/other")).is_ok());
        assert!(roots.check(Path::new("/srv/work/data/executions")).is_ok());
        for refused in ["/srv/work", "/srv/work/data", "/srv/workshop", "/etc", "/"] {
            let e = roots.check(Path::new(refused)).expect_err(refused);
            assert!(!e.to_string().contains("/srv"), "{e}");
        }
        let open = WorkspaceRoots {
            roots: None,
            data: Some(PathBuf::from("/var/lib/ap")),
            sealed: Vec::new(),
        };
        assert!(open.check(Path::new("/home/u")).is_ok());
        assert!(open.check(Path::new("/var")).is_err());
    }

    #[test]
    fn nothing_below_the_configuration_policies_or_secrets_is_a_workspace() {
        let roots = WorkspaceRoots {
            roots: None,
            data: Some(PathBuf::from("/etc/ap/data")),
            sealed: vec![
                PathBuf::from("/etc/ap"),
                PathBuf::from("/srv/policies"),
                PathBuf::from("/run/keys"),
            ],
        };
        for refused in [
            "/etc/ap",
            "/etc/ap/ws",
            "/etc/ap/data",
            "/srv/policies",
            "/srv/policies/a/b",
            "/run/keys",
            "/run/keys/x",
            "/srv",
            "/",
        ] {
            let e = roots.check(Path::new(refused)).expect_err(refused);
            assert!(!e.to_string().contains('/'), "{e}");
        }
        // Executions' folders beside the database, kept in the configuration directory.
        assert!(roots.check(Path::new("/etc/ap/data/executions/x")).is_ok());
        assert!(roots.check(Path::new("/etc/ap/data/other")).is_err());
        let beside = WorkspaceRoots {
            data: Some(PathBuf::from("/etc/ap")),
            ..roots.clone()
        };
        assert!(beside.check(Path::new("/etc/ap/executions/x")).is_ok());
        for refused in ["/etc/ap/executions", "/etc/ap/sub", "/etc/ap"] {
            beside.check(Path::new(refused)).expect_err(refused);
        }
        assert!(roots.check(Path::new("/srv/work")).is_ok());
        assert!(roots.check(Path::new("/etc/apx")).is_ok());
    }
}
