//! How the services are put together: every part it will ever have is given before it exists
//! (ADR 0043), so no method has to ask whether a part was set yet and nothing changes
//! under a running turn. The composition root (`runtime`) is the builder's one real
//! caller; tests build small hubs with [`Hub::new`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use agentplane_core::AgentSpec;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::live::Live;
use super::state::{Hub, HubConfig, Toolbox};
use super::workspace_roots::WorkspaceRoots;
use crate::permissions::PermissionBroker;
use crate::ports::{
    AuditStore, ExternalAgent, KeyStore, McpUpstreams, ReplicaStore, TokenVerifier,
};
use crate::services::identity::{Bootstrap, Identity};
use crate::services::mcp_gateway::McpGateway;
use crate::services::model_gateway::ModelGateway;
use crate::services::reports::{ReportPorts, Reports};
use crate::services::tool_pins::ToolPins;
use crate::services::version_settings::VersionSettings;
use crate::services::versions::Versions;
use crate::turn::TurnDeps;

/// Every service of one process, built together by [`HubBuilder::build`] and shared
/// by every interface.
#[derive(Clone)]
pub struct Services {
    /// Threads, turns, live feeds, approvals, shadow runs.
    pub hub: Arc<Hub>,
    pub identity: Arc<Identity>,
    pub reports: Arc<Reports>,
    pub model_gateway: Arc<ModelGateway>,
    pub versions: Arc<Versions>,
    pub mcp_gateway: Arc<McpGateway>,
    /// The pinned definitions of upstream MCP tools.
    pub tool_pins: Arc<ToolPins>,
}

/// The parts of a hub, given one by one; [`HubBuilder::build`] makes it.
#[must_use = "a builder does nothing until `build`"]
pub struct HubBuilder {
    deps: TurnDeps,
    agents: BTreeMap<String, AgentSpec>,
    toolbox: Arc<dyn Toolbox>,
    config: HubConfig,
    versions: VersionSettings,
    external: BTreeMap<String, Arc<dyn ExternalAgent>>,
    keys: Option<Arc<dyn KeyStore>>,
    tokens: Option<Arc<dyn TokenVerifier>>,
    setup: Option<Bootstrap>,
    replicas: Option<Arc<dyn ReplicaStore>>,
    workspace_roots: Option<WorkspaceRoots>,
    mcp_gateway: Option<Arc<dyn McpUpstreams>>,
    audit: Option<Arc<dyn AuditStore>>,
    responses: Option<Arc<dyn crate::ports::ResponseStore>>,
    tool_pins: Option<Arc<dyn crate::ports::ToolPinStore>>,
}

impl HubBuilder {
    /// A hub over the given ports; every other part is optional.
    pub fn new(
        deps: TurnDeps,
        agents: BTreeMap<String, AgentSpec>,
        toolbox: Arc<dyn Toolbox>,
        config: HubConfig,
    ) -> Self {
        Self {
            deps,
            agents,
            toolbox,
            config,
            versions: VersionSettings::default(),
            external: BTreeMap::new(),
            keys: None,
            tokens: None,
            setup: None,
            replicas: None,
            workspace_roots: None,
            mcp_gateway: None,
            audit: None,
            responses: None,
            tool_pins: None,
        }
    }

    /// Agent versions: their store, the baselines' numbers, who may change them
    /// (ADR 0016). Without: every agent runs its configured definition.
    pub fn versions(mut self, versions: VersionSettings) -> Self {
        self.versions = versions;
        self
    }

    /// Agents driven over ACP, by name (ADR 0018).
    pub fn external(mut self, external: BTreeMap<String, Arc<dyn ExternalAgent>>) -> Self {
        self.external = external;
        self
    }

    /// Where the gateway keeps Responses-API answers for `previous_response_id`.
    /// Without (a hub built for tests), none are kept.
    pub fn responses(mut self, store: Arc<dyn crate::ports::ResponseStore>) -> Self {
        self.responses = Some(store);
        self
    }

    /// Where upstream MCP tools' definitions are pinned. Without (a hub built for
    /// tests), the pins service has nothing to show.
    pub fn tool_pins(mut self, store: Arc<dyn crate::ports::ToolPinStore>) -> Self {
        self.tool_pins = Some(store);
        self
    }

    /// Where API keys are kept. Without (a hub built for tests), no key exists.
    pub fn keys(mut self, store: Arc<dyn KeyStore>) -> Self {
        self.keys = Some(store);
        self
    }

    /// Verifies OIDC bearer tokens; credentials are then required, as with keys.
    pub fn token_verifier(mut self, verifier: Arc<dyn TokenVerifier>) -> Self {
        self.tokens = Some(verifier);
        self
    }

    /// The one-time setup token of a server without keys or token: a caller who is
    /// only claimed needs it to create the first key. Without, such a caller creates
    /// none (a server with a token, OIDC or keys needs no setup token).
    pub fn setup_token(mut self, bootstrap: Bootstrap) -> Self {
        self.setup = Some(bootstrap);
        self
    }

    /// The database shared with other replicas, through which cancels reach them;
    /// [`Hub::follow_replicas`] then follows their events.
    pub fn replicas(mut self, replicas: Arc<dyn ReplicaStore>) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// Where callers from outside the process may have workspaces (ADR 0031, 0040).
    /// Without, nothing is confined (a process that serves no one from outside).
    pub fn workspace_roots(mut self, roots: WorkspaceRoots) -> Self {
        self.workspace_roots = Some(roots);
        self
    }

    /// The MCP servers the MCP gateway offers (`[mcp.gateway] servers`); without it
    /// the gateway offers nothing.
    pub fn mcp_gateway(mut self, upstreams: Arc<dyn McpUpstreams>) -> Self {
        self.mcp_gateway = Some(upstreams);
        self
    }

    /// The audit chain read back (ADR 0048), for `GET /v1/threads/{id}/audit`.
    /// Without (a hub built for tests), a thread's audit is `NotFound`.
    pub fn audit(mut self, store: Arc<dyn AuditStore>) -> Self {
        self.audit = Some(store);
        self
    }

    /// Every service, over the parts given.
    pub fn build(self) -> Services {
        let tasks = TaskTracker::new();
        let accepting = Arc::new(AtomicBool::new(true));
        let identity = Arc::new(Identity::new(self.keys, self.tokens, self.setup));
        let store = &self.deps.store;
        let reports = Arc::new(Reports::new(
            identity.clone(),
            ReportPorts {
                threads: store.clone(),
                calls: store.clone(),
                audit: self.audit,
            },
        ));
        let records = crate::call_records::CallRecords::new(store.clone(), tasks.clone());
        let model_gateway = Arc::new(ModelGateway::new(
            identity.clone(),
            self.deps.clone(),
            self.config.gateway.clone(),
            records,
            accepting.clone(),
            self.responses
                .map(|store| crate::gateway::KeptResponses::new(store, tasks.clone())),
        ));
        let agents = Arc::new(self.agents);
        let versions = Arc::new(Versions::new(
            identity.clone(),
            agents.clone(),
            self.versions,
        ));
        let tool_pins = Arc::new(ToolPins::new(
            identity.clone(),
            self.tool_pins,
            self.mcp_gateway.clone(),
        ));
        let mcp_gateway = Arc::new(McpGateway::new(
            self.deps.clone(),
            identity.clone(),
            self.mcp_gateway,
            self.config.mcp_gateway.clone(),
            tasks.clone(),
        ));
        let hub = Arc::new(Hub {
            deps: self.deps,
            agents,
            toolbox: self.toolbox,
            config: self.config,
            broker: Arc::new(PermissionBroker::default()),
            live: Live::default(),
            tasks,
            accepting,
            stopping: CancellationToken::new(),
            versions: versions.clone(),
            external: self.external,
            replicas: self.replicas,
            identity: identity.clone(),
            workspace_roots: self.workspace_roots,
            mcp_gateway: mcp_gateway.clone(),
        });
        Services {
            hub,
            identity,
            reports,
            model_gateway,
            versions,
            mcp_gateway,
            tool_pins,
        }
    }
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
        Self::builder(deps, agents, toolbox, config).build().hub
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
}
