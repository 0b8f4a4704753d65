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
mod costs;
mod external;
mod feeds;
mod history;
mod identity;
mod replicas;
mod stream;
mod threads;
mod versions;
mod workspaces;

use crate::identity::{Access, AsCaller};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::{
    AgentLimits, AgentSpec, Event, NetworkAccess, PermissionDecision, PermissionId, StopReason,
    ThreadId, TurnId,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::{self, ContextBudget, PastTurn};
use crate::models::{ProviderReport, RouteKey, TaskSize};
use crate::permissions::{self, PermissionBroker};
use crate::ports::{Ensemble, NewThread, PermissionRecord, ThreadRecord, TurnRecord, TurnStatus};
use crate::turn::{
    BegunTurn, PermissionSettings, TurnDeps, TurnObserver, TurnOutcome, TurnRequest, begin_turn,
    run_turn,
};

pub use crate::error::HubError;
use crate::models::ModelStatus;
pub use approvals::ApprovalAnswer;
pub use costs::{CostGroup, CostLine, CostReport, CostRequest, CostSum, report_costs};
pub use feeds::DisconnectGuard;
use feeds::*;
pub use history::{Compaction, History, HistoryTurn};
pub use identity::{CreateKey, MAX_KEY_DESCRIPTION_CHARS};
pub use stream::EventStream;
pub use threads::{MAX_THREAD_PAGE, ThreadPage};
use versions::ShadowCopy;
pub use versions::{AgentVersion, AgentVersions, CreateVersion, VersionSettings};
pub use workspaces::WorkspaceRoots;

/// Longest accepted turn input, in characters (what the API documents).
pub const MAX_INPUT_CHARS: usize = 65_536;
/// Longest accepted thread title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Live events buffered per thread before a slow subscriber falls back to the store.
const FEED_CAPACITY: usize = 1024;

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
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            default_model: String::new(),
            permission_timeout: permissions::DEFAULT_TIMEOUT,
            context: ContextBudget::default(),
            summary_max_chars: 4_000,
            gateway: crate::gateway::GatewayConfig::default(),
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

struct RunningTurn {
    thread: ThreadId,
    client: String,
    cancel: CancellationToken,
}

/// The route of a model call of `agent` for a task of `size`.
fn route_of(agent: &AgentSpec, size: TaskSize) -> RouteKey<'_> {
    RouteKey {
        agent: &agent.name,
        tags: &agent.tags,
        size,
    }
}

/// The hub. Create one per process with [`Hub::new`].
pub struct Hub {
    deps: TurnDeps,
    agents: BTreeMap<String, AgentSpec>,
    toolbox: Arc<dyn Toolbox>,
    config: HubConfig,
    broker: Arc<PermissionBroker>,
    feeds: Mutex<HashMap<ThreadId, Feed>>,
    running: Mutex<HashMap<TurnId, RunningTurn>>,
    tasks: TaskTracker,
    accepting: AtomicBool,
    /// Cancelled at shutdown: ends background work (the approval expiry sweep).
    stopping: CancellationToken,
    /// Agent versions: their store, the baselines' numbers, who may change them.
    versions: VersionSettings,
    /// Agents of kind `acp`, by name: their turns run on the external agent
    /// (`external.rs`) instead of the model-and-tools loop.
    external: BTreeMap<String, Arc<dyn crate::ports::ExternalAgent>>,
    /// The database shared with other replicas, once `follow_replicas` is called.
    replicas: std::sync::OnceLock<Arc<dyn crate::ports::ReplicaStore>>,
    /// Cancels announced for turns not running here (yet): a turn registered soon
    /// after (a resumed approval) is cancelled at once (`replicas.rs`).
    early_cancels: Mutex<HashMap<TurnId, std::time::Instant>>,
    /// API keys, once the composition root gives their store (`identity.rs`).
    keys: std::sync::OnceLock<Arc<dyn crate::ports::KeyStore>>,
    /// Set once a key is known to exist: keys are never deleted, so it stays set.
    keys_seen: AtomicBool,
    /// When the store last said no key exists (`identity.rs`).
    no_keys_at: Mutex<Option<std::time::Instant>>,
    /// Verifies OIDC bearer tokens, when `[auth.oidc]` is configured.
    tokens: std::sync::OnceLock<Arc<dyn crate::ports::TokenVerifier>>,
    /// Where outside callers' workspaces may be, once `serve` says (`workspaces.rs`).
    workspace_roots: std::sync::OnceLock<WorkspaceRoots>,
}

impl Hub {
    /// A hub over the given ports, without stored agent versions (every agent runs its
    /// configured definition).
    pub fn new(
        deps: TurnDeps,
        agents: BTreeMap<String, AgentSpec>,
        toolbox: Arc<dyn Toolbox>,
        config: HubConfig,
    ) -> Arc<Self> {
        Self::with_parts(
            deps,
            agents,
            toolbox,
            config,
            VersionSettings::default(),
            BTreeMap::new(),
        )
    }

    /// A hub over the given ports with agent versions (ADR 0016) and external agents
    /// (the agents named in `external` are driven over ACP, ADR 0018).
    pub fn with_parts(
        deps: TurnDeps,
        agents: BTreeMap<String, AgentSpec>,
        toolbox: Arc<dyn Toolbox>,
        config: HubConfig,
        versions: VersionSettings,
        external: BTreeMap<String, Arc<dyn crate::ports::ExternalAgent>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            versions,
            deps,
            agents,
            toolbox,
            config,
            broker: Arc::new(PermissionBroker::default()),
            feeds: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            accepting: AtomicBool::new(true),
            stopping: CancellationToken::new(),
            external,
            replicas: std::sync::OnceLock::new(),
            early_cancels: Mutex::new(HashMap::new()),
            keys: std::sync::OnceLock::new(),
            keys_seen: AtomicBool::new(false),
            no_keys_at: Mutex::new(None),
            tokens: std::sync::OnceLock::new(),
            workspace_roots: std::sync::OnceLock::new(),
        })
    }

    /// Every agent, by name.
    pub fn agents(&self) -> &BTreeMap<String, AgentSpec> {
        &self.agents
    }

    /// The ports the hub runs on.
    pub fn deps(&self) -> &TurnDeps {
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
            self.tasks.clone(),
            client,
            request,
        )
        .await
    }

    /// The models the model server offers, for the gateway's model list.
    pub async fn gateway_models(&self) -> Result<Vec<crate::ports::ModelInfo>, HubError> {
        crate::gateway::models(&self.deps, &self.config.gateway).await
    }

    /// How many turns are running.
    pub fn running_turns(&self) -> usize {
        self.running.lock().map(|r| r.len()).unwrap_or(0)
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

    // ----- turns ---------------------------------------------------------------------

    /// Starts a turn in the background and returns the stream of its events.
    /// `Conflict` while another turn of the thread runs.
    pub async fn start_turn(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
    ) -> Result<StartedTurn, HubError> {
        let caller = self.require(caller, Access::Operate, "starting a turn")?;
        let client = caller.client();
        self.start_turn_sized(client, thread, input, None).await
    }

    /// [`Hub::start_turn`] with the caller's task-size hint for provider routing
    /// (`None`: estimated from the conversation's user text).
    pub async fn start_turn_sized(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
        size: Option<TaskSize>,
    ) -> Result<StartedTurn, HubError> {
        let caller = self.require(caller, Access::Operate, "starting a turn")?;
        let client = caller.client();
        let (live, lease) = self.subscribe_feed(thread);
        let (begun, request, copy) = self.prepare(client, thread, input, false, size).await?;
        let turn = begun.turn().clone();
        let cancel = self.register(&begun, client);
        let hub = self.clone();
        let run_cancel = cancel.clone();
        self.tasks.spawn(async move {
            let agent = request.agent.name.clone();
            let observer = FeedObserver {
                hub: &hub,
                agent: &agent,
            };
            let turn = begun.turn().clone();
            if let Err(e) = hub.drive(begun, request, &observer, run_cancel).await {
                tracing::error!(%turn, error = %e, "a turn could not be recorded");
            }
            hub.unregister(&turn);
            hub.shadow_turn(copy);
        });
        Ok(StartedTurn {
            thread: thread.clone(),
            turn: turn.clone(),
            events: EventStream::new(
                self.clone(),
                thread.clone(),
                stream::Scope::Turn { turn: turn.clone() },
                live,
                lease,
            ),
            guard: DisconnectGuard {
                hub: self.clone(),
                turn,
            },
        })
    }

    /// Runs a turn in the caller's task with the caller's observer (the CLI), while
    /// still publishing its events to subscribers. Nobody can answer permission
    /// requests of such a turn, so they are declined at once (fail-closed).
    pub async fn run_turn_here(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, HubError> {
        let caller = self.require(caller, Access::Operate, "starting a turn")?;
        let client = caller.client();
        // No shadow copy: the caller (the CLI's one-shot `run`) exits right after, and
        // a shadow turn cut off by the exit would only be left `interrupted`.
        let (begun, mut request, _copy) = self.prepare(client, thread, input, false, None).await?;
        request.permissions = None;
        let turn = begun.turn().clone();
        // The turn stops on either the caller's token or the registered one (a cancel
        // through the hub, from this replica or another: an execution's turn).
        let registered = self.register(&begun, client);
        let stop = registered.clone();
        let forward = cancel.clone();
        let watcher = tokio::spawn(async move {
            forward.cancelled().await;
            registered.cancel();
        });
        let agent = request.agent.name.clone();
        let observer = TeeObserver {
            hub: self,
            agent: &agent,
            inner: observer,
        };
        let outcome = self.drive(begun, request, &observer, stop).await;
        watcher.abort();
        self.unregister(&turn);
        Ok(outcome?)
    }

    /// Events of a thread after `after`, then live ones, each exactly once.
    pub async fn subscribe(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        after: u64,
    ) -> Result<EventStream, HubError> {
        let caller = self.require(caller, Access::Read, "following a thread")?;
        let client = caller.client();
        self.thread(client, thread).await?;
        let (live, lease) = self.subscribe_feed(thread);
        Ok(EventStream::new(
            self.clone(),
            thread.clone(),
            stream::Scope::Thread { after },
            live,
            lease,
        ))
    }

    /// Cancels a running turn of this client.
    pub async fn cancel_turn(
        &self,
        caller: &(impl AsCaller + ?Sized),
        turn: &TurnId,
    ) -> Result<(), HubError> {
        let caller = self.require(caller, Access::Operate, "cancelling a turn")?;
        let client = caller.client();
        let token = self.running.lock().ok().and_then(|running| {
            running
                .get(turn)
                .filter(|r| r.client == client)
                .map(|r| r.cancel.clone())
        });
        if let Some(token) = token {
            token.cancel();
            return Ok(());
        }
        match self.cancel_suspended(client, turn).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            // Decided and resumed meanwhile, here or elsewhere: it runs; cancel it below.
            Err(HubError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        // Not running here: tell "finished" apart from "no such turn" for its owner only.
        let record = self.deps.store.turn(turn).await?;
        match record {
            // Another replica on the same database runs it: the request reaches it
            // through the store (ADR 0027), and the answer is the owner's.
            Some(record)
                if record.status == TurnStatus::Running
                    && self.thread(client, &record.thread_id).await.is_ok() =>
            {
                self.cancel_elsewhere(turn).await
            }
            Some(record) if self.thread(client, &record.thread_id).await.is_ok() => {
                Err(HubError::Conflict(format!("turn {turn} is not running")))
            }
            _ => Err(HubError::NotFound(format!("turn {turn}"))),
        }
    }

    /// A person's decision on a permission. A malformed decision declines it
    /// (fail-closed) and is reported as `InvalidArgument`.
    pub async fn resolve_permission(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &PermissionId,
        decision: &str,
    ) -> Result<PermissionRecord, HubError> {
        let caller = self.require(caller, Access::Operate, "answering a permission")?;
        let client = caller.client();
        let record = self
            .deps
            .store
            .permission(id)
            .await?
            .ok_or_else(|| HubError::NotFound(format!("permission {id}")))?;
        self.thread(client, &record.thread_id)
            .await
            .map_err(|_| HubError::NotFound(format!("permission {id}")))?;
        let (decision, reason, malformed) = match permissions::parse_decision(decision) {
            Ok(decision) => (
                decision,
                format!("{} by client {client}", decision.as_str()),
                None,
            ),
            Err(message) => (
                PermissionDecision::Declined,
                "declined: the decision was malformed".to_owned(),
                Some(message),
            ),
        };
        let (record, event) = permissions::settle(
            self.deps.store.as_ref(),
            &self.broker,
            id,
            decision,
            &reason,
        )
        .await?;
        let Some(event) = event else {
            return Err(HubError::Conflict(format!(
                "permission {id} was already resolved"
            )));
        };
        self.publish(&event);
        match malformed {
            Some(message) => Err(HubError::InvalidArgument(message)),
            None => Ok(record),
        }
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
            let tokens: Vec<_> = self
                .running
                .lock()
                .map(|r| r.values().map(|t| t.cancel.clone()).collect())
                .unwrap_or_default();
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
        if let Ok(mut feeds) = self.feeds.lock() {
            feeds.clear();
        }
    }

    // ----- internals -----------------------------------------------------------------

    fn accepting(&self) -> Result<(), HubError> {
        if self.accepting.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(HubError::ShuttingDown)
        }
    }

    /// Checks and builds everything a turn needs, then begins it in the store.
    async fn prepare(
        self: &Arc<Self>,
        client: &str,
        thread: &ThreadId,
        input: String,
        internal: bool,
        hint: Option<TaskSize>,
    ) -> Result<(BegunTurn, TurnRequest, Option<ShadowCopy>), HubError> {
        self.accepting()?;
        if input.trim().is_empty() {
            return Err(HubError::InvalidArgument(
                "input must not be empty".to_owned(),
            ));
        }
        if input.chars().count() > MAX_INPUT_CHARS {
            return Err(HubError::InvalidArgument(format!(
                "input is longer than {MAX_INPUT_CHARS} characters"
            )));
        }
        let record = self.thread(client, thread).await?;
        let (agent, agent_version) = self.route(&record).await?;
        // Checked again at every turn, before anything runs in it (ADR 0040).
        let workspace = self
            .usable_workspace(thread, &agent.name, &input, &record.cwd)
            .await?;
        if !internal {
            self.admit_turn(client, thread, &agent, &input, &record.cwd)
                .await?;
        }
        let past = self.past_turns(thread).await?;
        let context = context::build(
            record.summary.as_deref(),
            &past,
            &input,
            self.config.context,
        );
        // The same estimate the turn loop makes from the messages it sends.
        let size = hint.unwrap_or_else(|| {
            let mut messages = context.history.clone();
            messages.push(agentplane_core::ChatMessage::user(context.input.clone()));
            TaskSize::estimate(&messages)
        });
        // An external agent's "model" is the agent process itself: nothing to resolve.
        let model = match self.external.get(&agent.name) {
            Some(external) => external.label(),
            None => self.resolve_model(&agent, size).await?,
        };
        // `auto` constrains from the first call when the server cannot make native calls,
        // or the model was seen writing its calls as text in an earlier turn.
        let native_tools = match agent.tool_calls {
            // Only an agent with a result to constrain to can use what the probe says.
            agentplane_core::ToolCallMode::Auto
                if agent.output_schema.is_some() && !self.external.contains_key(&agent.name) =>
            {
                if self.deps.providers.text_calls_seen(&model) {
                    Some(false)
                } else {
                    self.model_capabilities(&agent).await.native_tools
                }
            }
            _ => None,
        };
        let begun = begin_turn(&self.deps, thread, &input, internal).await?;
        let copy = (!internal).then(|| ShadowCopy {
            thread: record.clone(),
            version: agent_version.clone(),
            input: input.clone(),
        });
        let request = TurnRequest {
            ensembles: self.toolbox.ensembles(&agent, thread, client),
            agent,
            client: client.to_owned(),
            model,
            input: context.input,
            history: context.history,
            permissions: Some(PermissionSettings {
                broker: self.broker.clone(),
                timeout: self.config.permission_timeout,
            }),
            workspace,
            size: hint,
            agent_version: Some(agent_version),
            shadow_of: None,
            native_tools,
        };
        Ok((begun, request, copy))
    }

    /// The thread's finished, non-internal turns as context.
    async fn past_turns(&self, thread: &ThreadId) -> Result<Vec<PastTurn>, HubError> {
        Ok(self
            .deps
            .store
            .list_turns(thread)
            .await?
            .into_iter()
            .filter(|t| !t.internal && matches!(t.status, TurnStatus::Ended(r) if r.is_success()))
            .map(|t| PastTurn {
                answer: t
                    .result
                    .as_ref()
                    .map(context::answer_text)
                    .unwrap_or_default(),
                input: t.input,
            })
            .collect())
    }

    fn register(&self, begun: &BegunTurn, client: &str) -> CancellationToken {
        let cancel = CancellationToken::new();
        if let Ok(mut running) = self.running.lock() {
            running.insert(
                begun.turn().clone(),
                RunningTurn {
                    thread: begun.thread().clone(),
                    client: client.to_owned(),
                    cancel: cancel.clone(),
                },
            );
        }
        if self.cancelled_early(begun.turn()) {
            cancel.cancel();
        }
        cancel
    }

    fn unregister(&self, turn: &TurnId) {
        let thread = self
            .running
            .lock()
            .ok()
            .and_then(|mut running| running.remove(turn))
            .map(|r| r.thread);
        if let Some(thread) = thread {
            self.release_feed(&thread);
        }
    }

    fn is_running(&self, turn: &TurnId) -> bool {
        self.running
            .lock()
            .map(|r| r.contains_key(turn))
            .unwrap_or(false)
    }

    /// Declines the pending permissions of a turn whose client went away.
    async fn client_gone(&self, turn: &TurnId) {
        for id in self.broker.pending_of(turn) {
            match permissions::settle(
                self.deps.store.as_ref(),
                &self.broker,
                &id,
                PermissionDecision::Declined,
                "declined: the client disconnected",
            )
            .await
            {
                Ok((_, Some(event))) => self.publish(&event),
                Ok((_, None)) => {}
                Err(e) => tracing::warn!(%id, error = %e, "could not decline a permission"),
            }
        }
    }
}
