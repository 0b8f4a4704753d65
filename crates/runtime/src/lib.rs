//! The composition root: turns a `Config` into working adapters and hands them to the
//! engine. The CLI and (later) the HTTP server start here, so both run agents the same
//! way. Only this crate knows which adapter implements which port; the engine never does.

pub mod agents;
pub mod audit_anchor;
pub mod config;
pub mod environment;
mod mcp_gateway;
mod mcp_servers;
pub mod model_server;
pub mod policy_dir;
pub mod policy_replay;
pub mod policy_tests;
pub mod providers;
pub mod redacting_store;
pub mod replicas;
pub mod secrets;
pub mod server_address;
pub mod settings;
pub mod setup_token;
pub mod shutdown;
pub mod traces;
mod workspaces;

pub use mcp_servers::{mcp_specs, probe_mcp_servers};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentplane_core::{AgentSpec, ErrorCode, ThreadId};
use agentplane_engine::executions::{ExecutionPorts, Executions, Workspaces};
use agentplane_engine::governance::{
    BudgetKeeper, Governance, MemoryLedger, RateLimiter, RateLimits,
};
use agentplane_engine::hub::Services;
use agentplane_engine::hub::{CreateThread, Hub, HubConfig, HubError, Toolbox};
use agentplane_engine::ports::{
    ApprovalQuery, Ensemble, EventStore, ModelError, StoreError, Telemetry, TelemetrySink,
};
use agentplane_engine::services::version_settings::VersionSettings;
use agentplane_engine::{TurnDeps, TurnObserver, TurnOutcome};
use agentplane_metrics::{MeteredStore, Metrics};
use agentplane_tools::mcp::McpServers;
use agentplane_tools::{FsEnsemble, ShellEnsemble, WebEnsemble, WebLimits};
use tokio_util::sync::CancellationToken;

pub use agentplane_engine::models::ModelStatus;
pub use agentplane_tools::mcp::ServerReport as McpServerReport;
/// A raw MCP session to a URL (`agentplane mcp gateway` beside a running server).
pub use agentplane_tools::mcp::relay as mcp_relay;
pub use config::{Config, ConfigError};
pub use replicas::Store;
pub use shutdown::Shutdown;

/// The owner recorded for threads started from the command line.
pub const LOCAL_CLIENT: &str = "local";

/// Why a task could not be run. Each variant maps to one user-facing code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Hub(#[from] HubError),
    /// The policies directory is missing or holds an invalid file.
    #[error("{0}")]
    Policies(String),
    /// `[audit]`'s anchor key cannot be used.
    #[error("[audit]: {0}")]
    Audit(String),
}

impl RuntimeError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Config(_) | Self::Policies(_) | Self::Audit(_) => ErrorCode::InvalidArgument,
            Self::Model(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Hub(e) => e.code(),
        }
    }
}

impl From<providers::BuildError> for RuntimeError {
    fn from(e: providers::BuildError) -> Self {
        match e {
            providers::BuildError::Config(e) => Self::Config(e),
            providers::BuildError::Model(e) => Self::Model(e),
        }
    }
}

/// A task to run as a new thread's first turn.
#[derive(Debug, Clone)]
pub struct Task {
    pub agent: String,
    pub workspace: PathBuf,
    pub input: String,
}

/// Adapters wired to the engine's hub, ready to run turns.
pub struct Runtime {
    config: Config,
    store: Arc<dyn Store>,
    /// Every service, built together (the hub among them).
    services: Services,
    mcp: McpServers,
    metrics: Arc<Metrics>,
    executions: Arc<Executions>,
    /// `[llm] ensure_available`: the model server we may start (the shutdown stops it).
    model_server: Option<Arc<model_server::ModelServerKeeper>>,
    /// The one ordered shutdown; it also owns this replica's heartbeat (and the
    /// recovery of dead ones once serving) and the policy directory's watcher.
    shutdown: Arc<Shutdown>,
    /// How many workspace roots confine outside callers.
    workspace_roots: usize,
    /// Where the setup token of a server without keys or token was written, if one was.
    setup_token: Option<PathBuf>,
    /// The ports the hub was built on.
    deps: TurnDeps,
    /// Every agent, by name.
    agents: BTreeMap<String, AgentSpec>,
}

/// The hub's toolbox: the builtin ensembles and the configured MCP servers.
struct AgentToolbox {
    mcp: McpServers,
    gate: secrets::McpSecretGate,
    /// The remote A2A agents, which an agent naming `a2a__NAME` calls as a tool.
    a2a: std::collections::BTreeMap<String, Arc<agentplane_a2a::client::Connection>>,
}

impl AgentToolbox {
    /// `a2a__NAME`: the remote A2A agent NAME as one tool.
    fn a2a_tool(&self, name: &str, thread: &ThreadId) -> Option<Arc<dyn Ensemble>> {
        let remote = name.strip_prefix(agentplane_a2a::client::TOOL_PREFIX)?;
        let connection = self.a2a.get(remote)?.clone();
        Some(Arc::new(agentplane_a2a::client::A2aTool::new(
            connection,
            thread.clone(),
        )))
    }
}

impl Toolbox for AgentToolbox {
    fn ensembles(
        &self,
        agent: &AgentSpec,
        thread: &ThreadId,
        client: &str,
    ) -> Vec<Arc<dyn Ensemble>> {
        agent
            .ensembles
            .iter()
            // Config loading refuses names that are neither builtin nor a configured
            // MCP server, so nothing is dropped here.
            .filter_map(|name| {
                builtin_ensemble(agent, name)
                    .or_else(|| self.a2a_tool(name, thread))
                    .or_else(|| self.gate.ensemble(&self.mcp, agent, client, name, thread))
            })
            .collect()
    }
}

impl Runtime {
    /// Opens the store as a new replica and builds the model client and the hub.
    /// Contacts no model server. On the SQLite file (one process at a time) the turns a
    /// previous process left running end as `interrupted` here; on a shared database a
    /// dead replica's turns are recovered by the survivors (ADR 0019).
    pub async fn start(config: Config) -> Result<Self, RuntimeError> {
        Self::start_confined(config, None).await
    }

    /// [`Runtime::start`] for a process that serves callers from outside (`serve`):
    /// their workspaces are confined (ADR 0031, 0040; `workspaces.rs`) to `[server]
    /// workspace_roots`, else to `default_root` (on loopback, the directory `serve`
    /// started in).
    pub async fn start_serving(
        config: Config,
        default_root: Option<&Path>,
    ) -> Result<Self, RuntimeError> {
        Self::start_confined(config, Some(default_root)).await
    }

    async fn start_confined(
        config: Config,
        serving: Option<Option<&Path>>,
    ) -> Result<Self, RuntimeError> {
        let roots = serving
            .map(|default_root| workspaces::roots(&config, default_root))
            .transpose()
            .map_err(RuntimeError::Config)?;
        if let Some(roots) = &roots {
            // The configuration, policies, secrets and data folders are not even
            // visible to a confined program (an empty mount over each in its
            // namespace; an execution's folder in the data directory is mounted back).
            agentplane_process::sandbox::mask_paths(
                roots.sealed.iter().chain(&roots.data).cloned(),
            );
        }
        let store = replicas::open_store(&config.store).await?;
        if !store.shared() {
            replicas::forget_others(store.as_ref()).await?;
            let interrupted = store.interrupt_running_turns().await?;
            if !interrupted.is_empty() {
                tracing::warn!(
                    count = interrupted.len(),
                    "turns left running by a previous process were marked interrupted"
                );
            }
        }
        store.heartbeat().await?;
        let secrets = secrets::Secrets::load(&config)?;
        agentplane_core::secret::install(secrets.redactor());
        // Server processes never inherit the variables secrets are read from.
        agentplane_process::process::withhold_env(config.secrets.sources.values().filter_map(
            |source| match source {
                settings::secrets::SecretSource::Env(name) => Some(name.clone()),
                settings::secrets::SecretSource::File(_) => None,
            },
        ));
        // Nothing starts here: each server is started by the first turn that needs it.
        let mcp = McpServers::new(secrets::resolve_mcp_specs(mcp_specs(&config), &secrets)?);
        let metrics = Arc::new(Metrics::new());
        metrics.count_dropped_spans(traces::dropped_spans);
        let counted = metrics.clone();
        mcp.pin_in(agentplane_tools::mcp::Pins::new(
            store.clone() as Arc<dyn agentplane_engine::ports::ToolPinStore>,
            Some(Arc::new(move |server: &str, tool: &str| {
                counted.count_tool_definition_change(server, tool);
            })),
        ));
        // The one telemetry handle: Prometheus is its sink; another sink (an exporter)
        // is one more entry here.
        let telemetry = Telemetry::new(vec![metrics.clone() as Arc<dyn TelemetrySink>]);
        let model_server = providers::model_server_keeper(&config).map(Arc::new);
        let providers = Arc::new(providers::build(
            &config,
            &secrets,
            telemetry.clone(),
            model_server.clone(),
        )?);
        let pending = store
            .list_approvals(&ApprovalQuery {
                pending_only: true,
                limit: usize::MAX,
                ..ApprovalQuery::default()
            })
            .await?;
        metrics.set_approval_queue(pending.len() as u64);
        let (active_policies, policy_watcher) = policy_dir::watch_recorded(
            &config.policies,
            Some(store.clone() as Arc<dyn agentplane_engine::ports::AuditStore>),
        )
        .map_err(RuntimeError::Policies)?;
        // The ledger records each policy set that takes effect: this one, and each
        // reload (`policy_dir.rs`).
        {
            let set = active_policies.current();
            store
                .record_policy_set(set.hash(), "startup", set.len() as u64)
                .await?;
        }
        let catalogue = agents::catalogue(&config);
        for agent in catalogue.values() {
            if !agent.sandbox.required {
                tracing::warn!(
                    agent = %agent.name,
                    in_force = %agent.sandbox.in_force,
                    "SANDBOX OPT-OUT: sandbox.required = false; this agent's processes run \
                     with only what the kernel offers"
                );
            }
        }
        agents::warn_unbounded(&config, &active_policies.current());
        let governance = Governance {
            policies: active_policies,
            prices: config.prices.clone(),
            retention: config.tool_args,
            approval_ttl: config.approval_ttl,
            agent_tags: catalogue
                .iter()
                .map(|(name, agent)| (name.clone(), agent.tags.clone()))
                // Gateway calls are spent under their own name, with their own tags.
                .chain([
                    (config.gateway.agent.clone(), config.gateway.tags.clone()),
                    (
                        config.mcp_gateway.config.agent.clone(),
                        config.mcp_gateway.config.tags.clone(),
                    ),
                ])
                .collect(),
            telemetry: telemetry.clone(),
            limiter: rate_limiter(&config)?,
            // Replicas on one database share its budget accounts; one process keeps
            // them in memory.
            budgets: BudgetKeeper::new(
                store
                    .budget_ledger()
                    .unwrap_or_else(|| Arc::new(MemoryLedger::default())),
            ),
        };
        let gate = secrets::McpSecretGate::new(&config, governance.policies.clone())?;
        let versions = VersionSettings {
            store: Some(store.clone() as Arc<dyn agentplane_engine::ports::VersionStore>),
            baselines: config
                .agents
                .iter()
                .filter_map(|(name, agent)| Some((name.clone(), agent.version.clone()?)))
                .collect(),
            admins: config.version_admins.clone(),
        };
        let remote = a2a_agents(&config, &secrets);
        let mut external = acp_agents(&config, &secrets);
        for (name, agent) in &remote {
            external.insert(
                name.clone(),
                Arc::new(agent.clone()) as Arc<dyn agentplane_engine::ports::ExternalAgent>,
            );
        }
        let deps = TurnDeps {
            // Redaction outside, so the metered timings are the database's.
            store: Arc::new(redacting_store::RedactingStore::new(
                Arc::new(MeteredStore::new(
                    store.clone() as Arc<dyn EventStore>,
                    metrics.clone(),
                )),
                secrets.redactor(),
            )),
            providers,
            governance: Arc::new(governance),
            workspace: Some(Arc::new(agentplane_tools::WorkspaceFiles)),
        };
        let agents = catalogue.clone();
        let mut hub = Hub::builder(
            deps.clone(),
            catalogue,
            Arc::new(AgentToolbox {
                mcp: mcp.clone(),
                gate,
                a2a: remote
                    .iter()
                    .map(|(name, agent)| (name.clone(), agent.connection()))
                    .collect(),
            }),
            HubConfig {
                default_model: config.llm.model.clone(),
                permission_timeout: config.server.permission_timeout,
                context: config.context,
                gateway: config.gateway.clone(),
                mcp_gateway: config.mcp_gateway.config.clone(),
                ..HubConfig::default()
            },
        )
        .versions(versions)
        .external(external)
        .keys(store.clone() as Arc<dyn agentplane_engine::ports::KeyStore>)
        .responses(store.clone() as Arc<dyn agentplane_engine::ports::ResponseStore>)
        .tool_pins(store.clone() as Arc<dyn agentplane_engine::ports::ToolPinStore>)
        .audit(store.clone() as Arc<dyn agentplane_engine::ports::AuditStore>);
        if let Some(oidc) = &config.oidc {
            let verifier = agentplane_oidc::OidcVerifier::new(oidc.clone())
                .map_err(|m| RuntimeError::Config(config::ConfigError::new("auth.oidc", m)))?;
            hub = hub.token_verifier(Arc::new(verifier));
        }
        if !config.mcp_gateway.servers.is_empty() {
            hub = hub.mcp_gateway(Arc::new(mcp_gateway::GatewayUpstreams {
                servers: config.mcp_gateway.servers.clone(),
                mcp: mcp.clone(),
                gate: secrets::McpSecretGate::new(&config, deps.governance.policies.clone())?,
                agent: config.mcp_gateway.config.agent.clone(),
                tags: config.mcp_gateway.config.tags.clone(),
            }));
        }
        let workspace_roots = roots.as_ref().map_or(0, |r| r.count());
        if let Some(roots) = roots {
            hub = hub.workspace_roots(roots);
        }
        // A server without keys or token: the first key needs a one-time setup token.
        let mut setup_token = None;
        if serving.is_some()
            && let Some((path, bootstrap)) =
                setup_token::prepare(&config, &*store as &dyn agentplane_engine::ports::KeyStore)
                    .await?
        {
            hub = hub.setup_token(bootstrap);
            setup_token = Some(path);
        }
        let feed = store.announcements();
        if feed.is_some() {
            hub = hub.replicas(store.clone() as Arc<dyn agentplane_engine::ports::ReplicaStore>);
        }
        let services = hub.build();
        let hub = services.hub.clone();
        if let Some(feed) = feed {
            hub.follow_replicas(feed);
        }
        let executions = executions_service(&config, &store, &hub, &secrets, &telemetry)?;
        let watch = replicas::ReplicaWatch::start(
            store.clone(),
            hub.clone(),
            executions.clone(),
            config.cluster,
        );
        // Last of what can fail: a task started earlier would outlive a failed start.
        let anchorer = match (
            &config.audit.anchor_interval,
            &config.audit.anchor_key,
            &config.audit.anchor_file,
        ) {
            (Some(every), Some(key), Some(file)) => Some(
                audit_anchor::Anchorer::start(
                    store.clone() as Arc<dyn agentplane_engine::ports::AuditStore>,
                    key.clone(),
                    file.clone(),
                    *every,
                )
                .map_err(|e| RuntimeError::Audit(e.to_string()))?,
            ),
            _ => None,
        };
        let shutdown = Arc::new(Shutdown {
            hub: hub.clone(),
            executions: executions.clone(),
            watch,
            store: store.clone(),
            policy_watcher: std::sync::Mutex::new(policy_watcher),
            anchorer: std::sync::Mutex::new(anchorer),
            mcp: mcp.clone(),
            model_server: model_server.clone(),
            grace: config.server.shutdown_grace,
            done: tokio::sync::OnceCell::new(),
        });
        Ok(Self {
            config,
            store,
            services,
            mcp,
            metrics,
            executions,
            model_server,
            shutdown,
            workspace_roots,
            setup_token,
            deps,
            agents,
        })
    }

    /// `[llm] ensure_available`: when the model server does not answer, starts it and
    /// waits for it (progress on stderr). Nothing to do without a command to start, or
    /// when it answers. The error says why it could not be made to answer.
    pub async fn ensure_model_server(&self) -> Result<(), agentplane_engine::ports::ModelError> {
        let Some(keeper) = &self.model_server else {
            return Ok(());
        };
        let model = providers::llm_client(&self.config)?;
        keeper.ensure(model.as_ref()).await.map(|_| ())
    }

    /// What a server runs beside its requests: on the SQLite file, recovers the
    /// executions a previous process left running, then starts the execution workers;
    /// on a shared database, recovers the replicas already dead, starts the workers
    /// and from then on recovers every replica that stops beating.
    pub async fn start_services(&self) -> Result<(), RuntimeError> {
        if !self.store.shared() {
            self.executions.start().await?;
            return Ok(());
        }
        replicas::recover_all(
            &self.store,
            &self.services.hub,
            &self.executions,
            self.config.cluster,
        )
        .await;
        self.executions.start_workers().await;
        self.shutdown.watch.recover_dead();
        Ok(())
    }

    /// The configured MCP servers (for `agentplane mcp list`).
    pub fn mcp_servers(&self) -> &McpServers {
        &self.mcp
    }

    /// Stops everything this runtime started, in order ([`Shutdown`]): the hub and
    /// the execution workers (running turns get `[server] shutdown_grace`), the replica
    /// watch and membership, the policy watcher, the MCP servers. Every command calls it
    /// before the process exits; it runs once.
    pub async fn shutdown(&self) {
        self.shutdown.run().await;
    }

    /// The same shutdown, for a server to run when it is asked to stop (before it
    /// drains its connections); the command's own [`Runtime::shutdown`] then returns
    /// at once.
    pub fn shutdown_handle(&self) -> Arc<Shutdown> {
        self.shutdown.clone()
    }

    /// Says where this process listens: no confined process may connect to or bind
    /// that port by any protocol, whatever its agent's network settings (issue 30:
    /// a build step once reached the server's own API).
    /// It also records the address for commands beside it (`server_address`).
    pub fn listening_on(&self, addr: std::net::SocketAddr) {
        agentplane_process::sandbox::forbid_ports([addr.port()]);
        server_address::announce(&self.config, addr);
    }

    /// The file holding the one-time setup token for the first key (a server without
    /// keys or token), while it is needed; `None` otherwise. For the startup summary.
    pub fn setup_token_file(&self) -> Option<&Path> {
        self.setup_token
            .as_deref()
            .filter(|_| self.services.identity.awaits_setup_token())
    }

    /// How many workspace roots confine outside callers (0: none, or not serving).
    pub fn workspace_root_count(&self) -> usize {
        self.workspace_roots
    }

    /// The process's metrics (`/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The configuration this runtime was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every agent, by name (what the hub was built with).
    pub fn agents(&self) -> &BTreeMap<String, AgentSpec> {
        &self.agents
    }

    /// The store: every port, whichever database it is.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The hub: threads, turns, streams, permissions.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.services.hub
    }

    /// Every service this runtime built, for the interfaces that serve them.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The ports the hub runs on (the redacting, metered store, the providers, the
    /// governance), for tests and benchmarks that work beside the hub.
    pub fn turn_deps(&self) -> &TurnDeps {
        &self.deps
    }

    /// Asynchronous executions; their workers run once [`Executions::start`] is called
    /// (by `serve`).
    pub fn executions(&self) -> &Arc<Executions> {
        &self.executions
    }

    /// An agent by name, or an error listing the known ones.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, RuntimeError> {
        Ok(self.services.hub.agent(name)?)
    }

    /// Asks the server which model an agent would use.
    pub async fn model_status(&self, agent: &AgentSpec) -> ModelStatus {
        self.services.hub.model_status(agent).await
    }

    /// Runs a task as the first turn of a new thread owned by the local user.
    pub async fn run_task(
        &self,
        task: Task,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, RuntimeError> {
        // The hub checks the agent and the directory (absolute, existing, canonical).
        let workspace = std::path::absolute(&task.workspace).unwrap_or(task.workspace);
        let thread = self
            .services
            .hub
            .create_thread(
                LOCAL_CLIENT,
                CreateThread {
                    agent: task.agent,
                    cwd: workspace.display().to_string(),
                    title: Some(title_of(&task.input)),
                },
            )
            .await?;
        Ok(self
            .services
            .hub
            .run_turn_here(LOCAL_CLIENT, &thread.id, task.input, observer, cancel)
            .await?)
    }
}

/// The rate-limit counters of `[rate_limits]`: shared in Redis, or this process's own.
fn rate_limiter(config: &Config) -> Result<Arc<dyn RateLimits>, RuntimeError> {
    let Some(redis) = &config.rate_limits.redis else {
        return Ok(Arc::new(RateLimiter::default()));
    };
    let limiter = agentplane_redis::RedisRateLimiter::new(redis)
        .map_err(|m| ConfigError::new("rate_limits.redis", m))?;
    tracing::info!(
        redis = limiter.shown_url(),
        on_unavailable = ?redis.on_unavailable,
        "rate limits are counted in Redis, shared by every replica using it"
    );
    Ok(Arc::new(limiter))
}

/// The execution service over the store, with webhooks signed by the configured secret.
fn executions_service(
    config: &Config,
    store: &Arc<dyn Store>,
    hub: &Arc<Hub>,
    secrets: &secrets::Secrets,
    telemetry: &Telemetry,
) -> Result<Arc<Executions>, RuntimeError> {
    let settings = &config.executions;
    let webhooks = match &settings.webhook_secret {
        None => None,
        Some(name) => {
            // Config loading checked the name; loading the secrets checked the value.
            let secret = secrets.get(name).ok_or_else(|| ConfigError {
                source_name: format!("secret `{name}`"),
                message: "has no value for `executions.webhook_secret`".to_owned(),
            })?;
            Some(Arc::new(agentplane_tools::WebhookClient::new(
                secret.as_bytes(),
                agentplane_tools::WebhookSettings {
                    allow_private: settings.allow_private_webhooks,
                    timeout: settings.webhook_timeout,
                },
            ))
                as Arc<dyn agentplane_engine::executions::WebhookSender>)
        }
    };
    let root = config
        .store
        .path
        .parent()
        .map(|dir| dir.join("executions"))
        .unwrap_or_else(|| PathBuf::from("executions"));
    Ok(Executions::new(
        hub.clone(),
        ExecutionPorts {
            store: store.clone() as Arc<dyn agentplane_engine::ports::ExecutionStore>,
            webhooks,
            workspaces: Arc::new(ExecutionDirs { root }),
            telemetry: telemetry.clone(),
        },
        settings.engine(),
    ))
}

/// Fresh working directories of executions that name no thread and no `cwd`:
/// `<the database's directory>/executions/<execution id>`.
struct ExecutionDirs {
    root: PathBuf,
}

impl Workspaces for ExecutionDirs {
    fn create(&self, execution: &agentplane_core::ExecutionId) -> Result<String, String> {
        let dir = self.root.join(execution.as_str());
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let dir = std::path::absolute(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(dir.display().to_string())
    }
}

/// The builtin ensembles an agent names, configured for it.
pub fn ensembles_for(agent: &AgentSpec) -> Vec<Arc<dyn Ensemble>> {
    agent
        .ensembles
        .iter()
        .filter_map(|name| builtin_ensemble(agent, name))
        .collect()
}

/// The builtin ensemble of that name, configured for the agent; `None` for other names.
fn builtin_ensemble(agent: &AgentSpec, name: &str) -> Option<Arc<dyn Ensemble>> {
    match name {
        "fs" => Some(Arc::new(FsEnsemble)),
        "shell" => Some(Arc::new(
            ShellEnsemble::with_sandbox(agent.shell_allow.clone(), agents::sandbox_of(agent))
                .allowing_private(agent.network.allow_private),
        )),
        "web" => Some(Arc::new(WebEnsemble::new(
            agent.network.clone(),
            WebLimits::default(),
        ))),
        _ => None,
    }
}

/// A thread title from the first line of the task, at most 80 characters.
fn title_of(input: &str) -> String {
    let line = input.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    title
}

/// The configured agents of kind `a2a`, each a remote agent over A2A with its
/// credential resolved against the secrets (settings/a2a_agents.rs).
fn a2a_agents(
    config: &Config,
    secrets: &secrets::Secrets,
) -> std::collections::BTreeMap<String, agentplane_a2a::client::A2aAgent> {
    config
        .agents
        .iter()
        .filter(|(_, agent)| agent.is_a2a())
        .filter_map(|(name, agent)| {
            let resolved = agents::a2a_config(name, agent, secrets)?;
            Some((
                name.clone(),
                agentplane_a2a::client::A2aAgent::new(resolved),
            ))
        })
        .collect()
}

/// The configured agents of kind `acp`, each an external agent over ACP with its
/// profile resolved against the secrets (settings/acp.rs).
fn acp_agents(
    config: &Config,
    secrets: &secrets::Secrets,
) -> std::collections::BTreeMap<String, Arc<dyn agentplane_engine::ports::ExternalAgent>> {
    config
        .agents
        .iter()
        .filter(|(_, agent)| agent.is_acp())
        .filter_map(|(name, agent)| {
            let resolved = agents::acp_config(agent, secrets)?;
            let external: Arc<dyn agentplane_engine::ports::ExternalAgent> =
                Arc::new(agentplane_acp_client::AcpAgent::new(resolved));
            Some((name.clone(), external))
        })
        .collect()
}
