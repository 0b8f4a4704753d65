//! The hub: threads and turns as a service, shared by every interface.
//!
//! It owns what outlives one call: the live feed of each thread's events, the registry
//! of running turns (to cancel them), the permission broker, model resolution and the
//! task tracker used by graceful shutdown. Tenancy lives here too: every method takes
//! the caller's client id, and another client's thread or turn is `NotFound`, never
//! `Forbidden`, so ids cannot be probed. Handlers stay thin: they extract, call one
//! method, and map the result.

mod admission;
mod approvals;
mod audit;
mod builder;
mod costs;
mod external;
mod feeds;
mod history;
mod identity;
mod live;
mod mcp_gateway;
mod plan;
mod replicas;
mod setup;
mod shadows;
mod stream;
mod tasks;
mod threads;
mod turns;
mod versions;
mod workspaces;

use crate::identity::{Access, AsCaller};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentplane_core::{
    AgentLimits, AgentSpec, Event, NetworkAccess, PermissionDecision, PermissionId, StopReason,
    ThreadId, TurnId,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::{self, ContextBudget};
use crate::models::{ProviderReport, RouteKey, TaskSize};
use crate::permissions::{self, PermissionBroker};
use crate::ports::{Ensemble, NewThread, PermissionRecord, ThreadRecord, TurnRecord, TurnStatus};
use crate::turn::{TurnDeps, TurnObserver, TurnRequest, run_turn, start_turn};

pub use crate::error::HubError;
use crate::models::ModelStatus;
pub use approvals::ApprovalAnswer;
pub use audit::{
    AuditReport, ExportedEvent, ExportedRecord, ThreadAudit, export_chains, export_records,
    verify_chains,
};
pub use builder::HubBuilder;
pub use costs::{CostGroup, CostLine, CostReport, CostRequest, CostSum, report_costs};
pub use feeds::DisconnectGuard;
use feeds::*;
pub use history::{Compaction, History, HistoryTurn};
pub use identity::{CreateKey, MAX_KEY_DESCRIPTION_CHARS};
pub use mcp_gateway::{GatewayCall, GatewayTask};
pub use setup::Bootstrap;
pub use stream::{EventStream, SharedEvent};
pub use threads::{MAX_THREAD_PAGE, ThreadPage};
pub use versions::{AgentVersion, AgentVersions, CreateVersion, VersionSettings};
pub use workspaces::WorkspaceRoots;

/// Longest accepted turn input, in characters (what the API documents).
pub const MAX_INPUT_CHARS: usize = 65_536;
/// Longest accepted thread title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

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
    pub mcp_gateway: crate::mcp_gateway::McpGatewayConfig,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            default_model: String::new(),
            permission_timeout: permissions::DEFAULT_TIMEOUT,
            context: ContextBudget::default(),
            summary_max_chars: 4_000,
            gateway: crate::gateway::GatewayConfig::default(),
            mcp_gateway: crate::mcp_gateway::McpGatewayConfig::default(),
        }
    }
}

/// A thread to create.
#[derive(Debug, Clone)]
pub struct CreateThread {
    pub agent: String,
    /// An absolute, existing directory: the workspace of the thread's turns.
    pub cwd: String,
    pub title: Option<String>,
}

/// A turn started in the background, with the stream of its events.
pub struct StartedTurn {
    pub thread: ThreadId,
    pub turn: TurnId,
    pub events: EventStream,
    /// Declines the turn's pending permissions if dropped before the turn ends: a
    /// client that goes away cannot approve anything (fail-closed).
    pub guard: DisconnectGuard,
}

/// The route of a model call of `agent` for a task of `size`.
fn route_of(agent: &AgentSpec, size: TaskSize) -> RouteKey<'_> {
    RouteKey {
        agent: &agent.name,
        tags: &agent.tags,
        size,
    }
}

/// The hub. Create one per process with [`Hub::builder`] (tests: [`Hub::new`]).
pub struct Hub {
    deps: TurnDeps,
    agents: BTreeMap<String, AgentSpec>,
    toolbox: Arc<dyn Toolbox>,
    config: HubConfig,
    broker: Arc<PermissionBroker>,
    /// Running turns, live feeds, early cancels (`live.rs`).
    live: live::Live,
    tasks: TaskTracker,
    accepting: AtomicBool,
    /// Cancelled at shutdown: ends background work (the approval expiry sweep).
    stopping: CancellationToken,
    /// Agent versions: their store, the baselines' numbers, who may change them.
    versions: VersionSettings,
    /// Agents of kind `acp`, by name: their turns run on the external agent
    /// (`plan.rs` picks the driver) instead of the model-and-tools loop.
    external: BTreeMap<String, Arc<dyn crate::ports::ExternalAgent>>,
    /// The database shared with other replicas, through which cancels reach them.
    replicas: Option<Arc<dyn crate::ports::ReplicaStore>>,
    /// How callers prove who they are: API keys, OIDC tokens (`identity.rs`).
    credentials: identity::Credentials,
    /// Where outside callers' workspaces may be (`workspaces.rs`); `None`: unconfined.
    workspace_roots: Option<WorkspaceRoots>,
    /// The servers the MCP gateway offers (`mcp_gateway.rs`); `None`: none.
    mcp_gateway: Option<Arc<dyn crate::ports::McpUpstreams>>,
    /// The audit chain read back (`audit.rs`); `None` (a hub for tests): no chain.
    audit: Option<Arc<dyn crate::ports::AuditStore>>,
    /// The gateway's tools' compiled input schemas.
    mcp_schemas: crate::mcp_gateway::SchemaCache,
    /// Gateway calls' records waiting for their batch (`call_records.rs`).
    call_records: Arc<crate::call_records::CallRecords>,
}

impl Hub {
    /// A hub over the given ports and nothing else: no versions, no external agents,
    /// no keys (tests, small tools). The composition root uses [`Hub::builder`].
    pub fn new(
        deps: TurnDeps,
        agents: BTreeMap<String, AgentSpec>,
        toolbox: Arc<dyn Toolbox>,
        config: HubConfig,
    ) -> Arc<Self> {
        Self::builder(deps, agents, toolbox, config).build()
    }

    /// A builder of a hub over the given ports, to which every optional part is given
    /// before the hub exists (ADR 0043).
    pub fn builder(
        deps: TurnDeps,
        agents: BTreeMap<String, AgentSpec>,
        toolbox: Arc<dyn Toolbox>,
        config: HubConfig,
    ) -> HubBuilder {
        HubBuilder::new(deps, agents, toolbox, config)
    }

    /// Every agent, by name, for `caller` (every access role may list them).
    pub fn agents(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<&BTreeMap<String, AgentSpec>, HubError> {
        self.require(caller, Access::List, "listing agents")?;
        Ok(&self.agents)
    }

    /// The policies in force and the latest reload's result, for `caller` (every
    /// access role may list them).
    pub fn policies(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<&Arc<crate::governance::ActivePolicies>, HubError> {
        self.require(caller, Access::List, "listing policies")?;
        Ok(&self.deps.governance.policies)
    }

    /// The ports the hub runs on.
    pub(crate) fn deps(&self) -> &TurnDeps {
        &self.deps
    }

    /// The model an agent asks for: its own, else the configured default.
    pub fn wanted_model<'a>(&'a self, agent: &'a AgentSpec) -> &'a str {
        agent.model.as_deref().unwrap_or(&self.config.default_model)
    }

    /// The model an agent would use right now (on the first provider of its default
    /// route that answers).
    pub async fn model_status(&self, agent: &AgentSpec) -> ModelStatus {
        // An external agent's "model" is the agent process itself.
        if let Some(status) = self.external_status(&agent.name).await {
            return status;
        }
        self.deps
            .providers
            .status(&route_of(agent, TaskSize::Small), self.wanted_model(agent))
            .await
    }

    /// What the model an agent would use can do, as its server says (ADR 0032);
    /// unknown for an external agent and when no provider answers.
    pub async fn model_capabilities(&self, agent: &AgentSpec) -> crate::ports::Capabilities {
        if self.external_status(&agent.name).await.is_some() {
            return crate::ports::Capabilities::default();
        }
        self.deps
            .providers
            .capabilities(&route_of(agent, TaskSize::Small), self.wanted_model(agent))
            .await
    }

    /// The providers an agent's turns go to (its route for a small task, the usual
    /// case), in failover order, each with its health.
    pub fn provider_chain(&self, agent: &AgentSpec) -> Vec<ProviderReport> {
        self.deps
            .providers
            .chain_report(&route_of(agent, TaskSize::Small))
    }

    /// The model a turn of `agent` of this size starts with, resolved on its route.
    async fn resolve_model(&self, agent: &AgentSpec, size: TaskSize) -> Result<String, HubError> {
        Ok(self
            .deps
            .providers
            .resolve(&route_of(agent, size), self.wanted_model(agent))
            .await?)
    }

    /// Admits one OpenAI-compatible gateway call of `client` (see `crate::gateway`):
    /// validation, policies, rate limits and a budget reservation, before anything is
    /// sent to the client or the model.
    pub async fn gateway(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: agentplane_core::ChatRequest,
    ) -> Result<crate::gateway::AdmittedCall, HubError> {
        let caller = self.require(
            caller,
            Access::Operate,
            "calling a model through the gateway",
        )?;
        let client = caller.client();
        self.accepting()?;
        crate::gateway::admit(
            &self.deps,
            &self.config.gateway,
            &self.call_records,
            (client, caller.roles().names()),
            request,
        )
        .await
    }

    /// The models the model server offers, for the gateway's model list, and the name
    /// of the provider that owns them (the first configured: which one of the chain
    /// answered is not reported back). Needs the role that may call the gateway.
    pub async fn gateway_models(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<(Vec<crate::ports::ModelInfo>, String), HubError> {
        self.require(caller, Access::Operate, "listing the gateway's models")?;
        let models = crate::gateway::models(&self.deps, &self.config.gateway).await?;
        let owner = self
            .deps
            .providers
            .names()
            .next()
            .unwrap_or("agentplane")
            .to_owned();
        Ok((models, owner))
    }

    /// How many turns are running.
    pub fn running_turns(&self) -> usize {
        self.live.running_count()
    }

    /// An agent by name, or an error listing the known ones.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, HubError> {
        self.agents.get(name).ok_or_else(|| {
            HubError::InvalidArgument(format!(
                "unknown agent `{name}`; the agents are: {}",
                self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// Stops accepting turns, lets running ones finish within `grace`, then cancels the
    /// rest (recorded as `cancelled`) and waits for them to be written.
    pub async fn shutdown(&self, grace: Duration) {
        self.accepting.store(false, Ordering::SeqCst);
        self.stopping.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            let tokens = self.live.all_cancel_tokens();
            tracing::warn!(
                turns = tokens.len(),
                "shutdown grace period over; cancelling running turns"
            );
            for token in tokens {
                token.cancel();
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
        }
        // Closing the feeds ends live streams once they have delivered what is stored.
        self.live.close_feeds();
    }

    // ----- internals -----------------------------------------------------------------

    fn accepting(&self) -> Result<(), HubError> {
        if self.accepting.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(HubError::ShuttingDown)
        }
    }
}
