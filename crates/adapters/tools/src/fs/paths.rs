//! Where a file tool may reach: the workspace as the turn was given it, the agent's data
//! scope, git's own files (never written), and the one path a write may change. Every
//! `fs` tool and the `shell` ensemble check paths here.
//!
//! What must not live here: opening files (that is `agentplane_process::confine`'s) or
//! any one tool's work.

use std::path::{Path, PathBuf};

use agentplane_core::ToolErrorKind;
use agentplane_core::policy::DataScope;
use agentplane_engine::ports::{ToolContext, ToolError};
use agentplane_process::confine::{self, Access, resolve_in_workspace};

/// The event type of a path, host or workspace outside the agent's data scope.
pub const DATA_SCOPE_DENIED: &str = "data_scope_denied";

/// Whether a canonical, absolute path is granted by one of `scopes`: a `paths`
/// pattern matches the path, or the path with a trailing `/` (so `/data/*` also grants
/// listing `/data` itself). A path that is not UTF-8 matches nothing.
pub fn path_in_scopes(scopes: &[DataScope], path: &Path) -> bool {
    let Some(text) = path.to_str() else {
        return false;
    };
    let dir = format!("{text}/");
    scopes.iter().any(|scope| {
        scope
            .paths
            .iter()
            .any(|glob| glob.matches(text) || glob.matches(&dir))
    })
}

/// Refuses `path` (canonical, absolute) when a data scope is in force and grants it
/// not: a `PolicyDenied` violation (a `security_event`). `requested` is what the model
/// asked for, for the message.
pub fn check_path_scope(ctx: &ToolContext, path: &Path, requested: &str) -> Result<(), ToolError> {
    match &ctx.scope {
        Some(scopes) if !path_in_scopes(scopes, path) => Err(ToolError::violation(
            ToolErrorKind::PolicyDenied,
            DATA_SCOPE_DENIED,
            format!(
                "{requested:?} ({}) is outside the agent's data scope",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether a walk may show or search `path`: always without a scope.
pub(super) fn entry_in_scope(ctx: &ToolContext, path: &Path) -> bool {
    ctx.scope
        .as_ref()
        .is_none_or(|scopes| path_in_scopes(scopes, path))
}

/// The workspace, canonical as the turn was given it (ADR 0040): one that resolves
/// elsewhere now (a folder on its path swapped for a symlink) is refused, never followed.
pub(crate) fn canonical_workspace(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    let canonical = std::fs::canonicalize(&ctx.workspace).map_err(|e| {
        ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("the workspace is not accessible: {e}"),
        )
    })?;
    if canonical != ctx.workspace {
        return Err(ToolError::violation(
            ToolErrorKind::SandboxViolation,
            agentplane_process::confine::SANDBOX_VIOLATION,
            "the workspace was replaced by a symlink since the turn began; nothing runs there",
        ));
    }
    Ok(canonical)
}

/// Whether a path has a `.git` component (any case): git's own files, where a
/// configuration the model wrote would make git run programs (`core.fsmonitor`,
/// aliases, hooks). Writing there is refused; git itself still writes them.
pub(super) fn inside_git_dir(path: &Path) -> bool {
    path.components().any(|part| {
        matches!(part, std::path::Component::Normal(name)
            if name.to_string_lossy().eq_ignore_ascii_case(".git"))
    })
}

pub(super) fn refuse_git_dir(shown: &str) -> ToolError {
    ToolError::violation(
        ToolErrorKind::SandboxViolation,
        confine::SANDBOX_VIOLATION,
        format!("{shown:?} is inside .git/: git's files are not writable by tools"),
    )
}

/// The path a write to `requested` may change, or a refusal: never inside `.git/`
/// (also through a symlink), always in the workspace and in the data scope, never
/// through a symlink at its final component. Missing parent directories are created.
pub(super) fn writable_path(ctx: &ToolContext, requested: &str) -> Result<PathBuf, ToolError> {
    if inside_git_dir(Path::new(requested)) {
        return Err(refuse_git_dir(requested));
    }
    if ctx.scope.is_some() {
        // `resolve_in_workspace` creates missing parent directories for a write, so the
        // path as written is checked first; the canonical one after.
        let lexical =
            Path::new(requested)
                .components()
                .fold(canonical_workspace(ctx)?, |mut path, part| {
                    match part {
                        std::path::Component::Normal(name) => path.push(name),
                        std::path::Component::ParentDir => {
                            path.pop();
                        }
                        _ => {}
                    }
                    path
                });
        check_path_scope(ctx, &lexical, requested)?;
    }
    let path = resolve_in_workspace(&ctx.workspace, requested, Access::Write)?;
    // Also through a symbolic link that lands in `.git/`.
    if inside_git_dir(
        path.strip_prefix(canonical_workspace(ctx)?)
            .unwrap_or(&path),
    ) {
        return Err(refuse_git_dir(requested));
    }
    check_path_scope(ctx, &path, requested)?;
    Ok(path)
}

/// The error of an operation on `requested` that the file system refused.
pub(super) fn failed(requested: &str, error: &std::io::Error) -> ToolError {
    ToolError::new(
        ToolErrorKind::ExecutionFailed,
        format!("{requested}: {error}"),
    )
}
