//! What a turn is given: the ports it uses (`TurnDeps`) and the one request it runs
//! (`TurnRequest`), resolved by the caller before the turn begins. Plain data and the
//! workspace scan; nothing here runs a turn.

use std::path::PathBuf;
use std::sync::Arc;

use agentplane_core::{AgentSpec, ChatMessage, EventPayload, ThreadId};

use crate::governance::Governance;
use crate::models::{Providers, TaskSize};
use crate::permissions::PermissionSettings;
use crate::ports::{Ensemble, EventStore};

/// The ports a turn uses.
#[derive(Clone)]
pub struct TurnDeps {
    pub store: Arc<dyn EventStore>,
    /// The model providers, their routing and health: every model call goes through
    /// [`Providers::chat`]. One model server: [`Providers::single`].
    pub providers: Arc<Providers>,
    pub governance: Arc<Governance>,
    /// Scans the workspace before and after each turn with tools for its
    /// `workspace_changed` event; `None`: no such event.
    pub workspace: Option<Arc<dyn crate::ports::WorkspaceScanner>>,
}

impl TurnDeps {
    /// The workspace's files now, when a scanner is wired in.
    pub(crate) async fn scan_workspace(
        &self,
        workspace: &std::path::Path,
    ) -> Option<crate::ports::WorkspaceSnapshot> {
        match &self.workspace {
            Some(scanner) => Some(scanner.scan(workspace).await),
            None => None,
        }
    }

    /// The `workspace_changed` event since `before`, if anything changed.
    pub(crate) async fn workspace_changes(
        &self,
        workspace: &std::path::Path,
        before: Option<&crate::ports::WorkspaceSnapshot>,
    ) -> Option<EventPayload> {
        let before = before?;
        let after = self.scan_workspace(workspace).await?;
        crate::ports::workspace::changes(before, &after)
    }
}

/// Everything one turn needs, already resolved by the caller.
pub struct TurnRequest {
    pub agent: AgentSpec,
    /// The client the turn runs for (policies, budgets and rate limits select on it).
    pub client: String,
    /// The model id to call, as resolved against the server.
    pub model: String,
    pub input: String,
    /// Messages before the input: the thread's summary and recent turns.
    pub history: Vec<ChatMessage>,
    /// `None`: nobody can answer permission requests, so they are declined at once.
    pub permissions: Option<PermissionSettings>,
    /// The canonical workspace root.
    pub workspace: PathBuf,
    /// The agent's ensembles, not yet opened.
    pub ensembles: Vec<Arc<dyn Ensemble>>,
    /// The caller's task-size hint for routing; `None`: estimated from the user text
    /// of the conversation ([`TaskSize::estimate`]).
    pub size: Option<TaskSize>,
    /// The agent version the turn runs, recorded in `turn_started` (ADR 0016).
    pub agent_version: Option<String>,
    /// Set for a shadow run: the thread whose turn this copies. Side-effecting tools
    /// (and calls that would need a person) are recorded as not executed.
    pub shadow_of: Option<ThreadId>,
    /// Whether the model's server returns native tool calls, as probed at discovery
    /// (`None`: unknown). `false` makes `auto` constrain the answer from the start.
    pub native_tools: Option<bool>,
    /// Events recorded right after `turn_started`: what content policies found in the
    /// input (which the plan already redacted).
    pub notes: Vec<EventPayload>,
    /// The roles of the caller who started the turn (`context: roles` conditions);
    /// empty for a turn resumed from an approval or run internally.
    pub roles: Vec<String>,
}
