//! Workspace roots (ADR 0031, ADR 0040): where a thread's `cwd` may be (and so an MCP
//! call's `workspace`, an ACP agent's, an execution's), checked when the thread is
//! created and again at every use.
//!
//! A canonical `cwd` must lie inside one of the roots, and must never be, or contain,
//! the server's data directory, configuration directory, policies directory or a
//! folder holding a `[secrets]` file: from such a workspace the tools could read the
//! database or the configuration by a relative path. Nor may it lie below the
//! configuration directory, the policies directory or a secrets folder (the
//! `sealed` ones): the tools could rewrite a policy or print a secret. Descendants of
//! the data directory are fine (executions' working directories live beside the
//! database), even when the data directory itself lies in a sealed one. A refusal
//! names how many roots there are, never their paths.
//!
//! At creation, in-process callers (`run`, an execution's worker) are not confined to
//! the roots. At use ([`Hub::workspace_at_use`]) every turn re-canonicalises its
//! thread's `cwd`: a path that no longer canonicalises to itself (a folder on it was
//! swapped for a symlink) or now lies in a forbidden place is refused, whoever made
//! the thread.

use std::path::{Path, PathBuf};

use agentplane_core::{ErrorCode, EventPayload, ThreadId};

use super::{Hub, HubError};
use crate::identity::{Caller, Principal};

/// The event type of a workspace refused at use.
pub const WORKSPACE_MOVED: &str = "workspace_moved";

impl Hub {
    /// Checks a canonical `cwd` for `caller`: in-process callers are not confined to
    /// the roots, but nobody's workspace is a forbidden place.
    pub(crate) fn check_workspace(&self, caller: &Caller, cwd: &Path) -> Result<(), HubError> {
        match (self.workspace_roots.as_ref(), caller.principal()) {
            (Some(roots), principal) if *principal != Principal::Local => roots.check(cwd),
            (Some(roots), _) => roots.check_forbidden(cwd),
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

    /// A thread's stored (canonical) `cwd` checked again at use: it must still exist,
    /// still canonicalise to itself, and (when the server confines workspaces) still
    /// lie where a workspace may. `Err(Refusal::Gone)` for a folder that no longer
    /// exists; `Err(Refusal::Moved)` (a breach, recorded as `workspace_moved`) otherwise.
    pub(crate) fn workspace_at_use(&self, cwd: &str) -> Result<PathBuf, WorkspaceRefusal> {
        let stored = Path::new(cwd);
        let canonical = match std::fs::canonicalize(stored) {
            Ok(canonical) if canonical.is_dir() => canonical,
            _ if std::fs::symlink_metadata(stored).is_ok() => {
                return Err(WorkspaceRefusal::Moved(
                    "the thread's workspace is no longer the directory it was created on \
                     (a folder on its path was replaced)"
                        .into(),
                ));
            }
            _ => {
                return Err(WorkspaceRefusal::Gone(format!(
                    "the thread's working directory {cwd} no longer exists"
                )));
            }
        };
        if canonical != stored {
            return Err(WorkspaceRefusal::Moved(
                "the thread's workspace now resolves elsewhere than the directory it was \
                 created on (a folder on its path was replaced by a symlink)"
                    .into(),
            ));
        }
        if let Some(roots) = self.workspace_roots.as_ref() {
            roots
                .check(&canonical)
                .map_err(|e| WorkspaceRefusal::Moved(format!("the thread's workspace: {e}")))?;
        }
        Ok(canonical)
    }
}

impl Hub {
    /// The workspace a shadow copy may use: only one still usable (ADR 0040), else the
    /// copy is skipped (`Conflict`); the production turn recorded the refusal.
    pub(super) fn workspace_for_copy(&self, cwd: &str) -> Result<PathBuf, HubError> {
        self.workspace_at_use(cwd)
            .map_err(|_| HubError::Conflict("the thread's workspace is not usable".into()))
    }

    /// The workspace a turn of `thread` may use now (its canonical `cwd`), or the
    /// refusal: a moved one is recorded as a refused turn (`security_event`
    /// `workspace_moved`, then `error` `FORBIDDEN`) and answered `Forbidden`.
    pub(super) async fn usable_workspace(
        &self,
        thread: &ThreadId,
        agent: &str,
        input: &str,
        cwd: &str,
    ) -> Result<PathBuf, HubError> {
        match self.workspace_at_use(cwd) {
            Ok(workspace) => Ok(workspace),
            Err(WorkspaceRefusal::Gone(message)) => Err(HubError::InvalidArgument(message)),
            Err(WorkspaceRefusal::Moved(detail)) => {
                tracing::warn!(%thread, "{detail}");
                let why = [
                    EventPayload::SecurityEvent {
                        event_type: WORKSPACE_MOVED.to_owned(),
                        tool: None,
                        detail: detail.clone(),
                    },
                    EventPayload::Error {
                        code: ErrorCode::Forbidden,
                        message: detail.clone(),
                    },
                ];
                if let Err(e) = self.record_refusal(thread, agent, input, cwd, why).await {
                    tracing::warn!(%thread, error = %e, "a refused turn could not be recorded");
                }
                Err(HubError::Forbidden(detail))
            }
        }
    }
}

/// Why a thread's workspace cannot be used now.
#[derive(Debug)]
pub(crate) enum WorkspaceRefusal {
    /// The folder is gone: a plain error, not a breach.
    Gone(String),
    /// The folder was replaced, or lies where no workspace may: a breach.
    Moved(String),
}
