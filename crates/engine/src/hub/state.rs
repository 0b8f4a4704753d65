//! The hub's state: the `Hub` itself, its settings (`HubConfig`) and the one port it
//! asks for tools (`Toolbox`). Every other file of the hub adds methods to `Hub` and
//! reads it from here; the field types live in files that add none (`live.rs`,
//! `version_settings.rs`, `workspace_roots.rs`), so nothing here
//! names a file that uses it back. Built by `builder.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use agentplane_core::{AgentSpec, ThreadId};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::live::Live;
use super::workspace_roots::WorkspaceRoots;
use crate::context::ContextBudget;
use crate::permissions::{self, PermissionBroker};
use crate::ports::Ensemble;
use crate::services::identity::Identity;
use crate::services::mcp_gateway::McpGateway;
use crate::turn::TurnDeps;

/// Builds an agent's tool ensembles for one turn of a thread. Implemented by the
/// composition root, which knows the adapters; the hub only asks. The thread lets an
/// ensemble keep a connection (an MCP server) for that thread's later turns; the client
/// lets data-scope policies that name clients grant secrets.
pub trait Toolbox: Send + Sync {
    fn ensembles(
        &self,
        agent: &AgentSpec,
        thread: &ThreadId,
        client: &str,
    ) -> Vec<Arc<dyn Ensemble>>;
}

/// Settings of the hub.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// The model agents use unless they name their own.
    pub default_model: String,
    /// How long a turn waits for a permission decision before declining.
    pub permission_timeout: Duration,
    pub context: ContextBudget,
    /// Characters of the summary a compaction asks for.
    pub summary_max_chars: usize,
    /// Who OpenAI-compatible gateway calls are, for policies and costs.
    pub gateway: crate::gateway::GatewayConfig,
    /// Who MCP gateway tool calls are, and their prices.
    pub mcp_gateway: crate::services::mcp_gateway::McpGatewayConfig,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            default_model: String::new(),
            permission_timeout: permissions::DEFAULT_TIMEOUT,
            context: ContextBudget::default(),
            summary_max_chars: 4_000,
            gateway: crate::gateway::GatewayConfig::default(),
            mcp_gateway: crate::services::mcp_gateway::McpGatewayConfig::default(),
        }
    }
}

/// The hub. Create one per process with [`Hub::builder`] (tests: [`Hub::new`]).
pub struct Hub {
    pub(super) deps: TurnDeps,
    pub(super) agents: Arc<BTreeMap<String, AgentSpec>>,
    pub(super) toolbox: Arc<dyn Toolbox>,
    pub(super) config: HubConfig,
    pub(super) broker: Arc<PermissionBroker>,
    /// Running turns, live feeds, early cancels (`live.rs`).
    pub(super) live: Live,
    pub(super) tasks: TaskTracker,
    /// Cleared at shutdown; shared with the services that start work of their own.
    pub(super) accepting: Arc<AtomicBool>,
    /// Cancelled at shutdown: ends background work (the approval expiry sweep).
    pub(super) stopping: CancellationToken,
    /// Agent versions: where a thread's turn routes, and the shadow's catalogue.
    pub(super) versions: Arc<crate::services::versions::Versions>,
    /// Agents of kind `acp`, by name: their turns run on the external agent
    /// (`plan.rs` picks the driver) instead of the model-and-tools loop.
    pub(super) external: BTreeMap<String, Arc<dyn crate::ports::ExternalAgent>>,
    /// The database shared with other replicas, through which cancels reach them.
    pub(super) replicas: Option<Arc<dyn crate::ports::ReplicaStore>>,
    /// Who callers are, and the role check every method makes first.
    pub(super) identity: Arc<Identity>,
    /// Where outside callers' workspaces may be (`workspaces.rs`); `None`: unconfined.
    pub(super) workspace_roots: Option<WorkspaceRoots>,
    /// The MCP gateway, whose calls waiting on an approval the hub resumes.
    pub(super) mcp_gateway: Arc<McpGateway>,
}

impl Hub {
    /// The ports the hub runs on.
    pub(crate) fn deps(&self) -> &TurnDeps {
        &self.deps
    }

    /// The versions service this hub routes threads with.
    pub fn versions(&self) -> &Arc<crate::services::versions::Versions> {
        &self.versions
    }

    /// The identity service this hub checks roles with.
    pub fn identity(&self) -> &Arc<Identity> {
        &self.identity
    }
}
