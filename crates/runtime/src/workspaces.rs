//! The workspaces of callers from outside the process (`serve`): the roots they must
//! lie in and the directories no workspace may be, contain or lie below (ADR 0031,
//! 0040), computed once from the configuration before the hub is built.

use std::path::{Path, PathBuf};

use agentplane_engine::hub::WorkspaceRoots;

use crate::config::{Config, ConfigError};

/// Where callers from outside the process may have workspaces (ADR 0031): inside
/// `[server] workspace_roots`, else inside `default_root` (`serve` on loopback: the
/// directory it started in), never the data directory or one that contains it, and
/// never the configuration directory, the policies directory, a secret file's
/// folder, anything below them or anything that contains them (ADR 0040).
pub fn roots(config: &Config, default_root: Option<&Path>) -> Result<WorkspaceRoots, ConfigError> {
    let configured = config.server.workspace_roots.clone();
    let roots = match (configured, default_root) {
        (Some(roots), _) => Some(roots),
        (None, Some(root)) => Some(vec![root.to_path_buf()]),
        (None, None) => None,
    };
    let roots = roots
        .map(|roots| {
            roots
                .iter()
                .map(|root| {
                    std::fs::canonicalize(root).map_err(|e| {
                        ConfigError::new(
                            "server.workspace_roots",
                            format!("{} is not a directory: {e}", root.display()),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    // Where the database is (or, on PostgreSQL, executions' directories are), and
    // where the configuration, the policies and the secret files are (ADR 0040).
    let canonical = |dir: &Path| -> Option<PathBuf> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        std::fs::canonicalize(dir).ok()
    };
    let data = config.store.path.parent().and_then(canonical);
    let config_dir = config.file.as_ref().and_then(|f| f.parent());
    let secret_dirs = config
        .secrets
        .sources
        .values()
        .filter_map(|source| match source {
            crate::settings::secrets::SecretSource::File(file) => Some(match config_dir {
                Some(dir) if file.is_relative() => dir.join(file),
                _ => file.clone(),
            }),
            crate::settings::secrets::SecretSource::Env(_) => None,
        })
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect::<Vec<_>>();
    let sealed = config_dir
        .map(Path::to_path_buf)
        .into_iter()
        .chain(config.policies.dir.clone())
        .chain(secret_dirs)
        .filter_map(|dir: PathBuf| canonical(&dir))
        .collect();
    Ok(WorkspaceRoots {
        roots,
        data,
        sealed,
    })
}
