//! The composition root: turns a `Config` into working adapters and hands them to the
//! engine. The CLI and (later) the HTTP server start here, so both run agents the same
//! way. Only this crate knows which adapter implements which port; the engine never does.

pub mod agents;
pub mod config;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_core::{AgentSpec, ErrorCode, ThreadId};
use agentplane_engine::model_choice;
use agentplane_engine::ports::{
    ChatModel, Ensemble, EventStore, ModelError, NewThread, StoreError,
};
use agentplane_engine::{EngineError, TurnDeps, TurnObserver, TurnOutcome, TurnRequest, run_turn};
use agentplane_providers::{OpenAiCompatible, OpenAiConfig};
use agentplane_store::SqliteStore;
use agentplane_tools::{FsEnsemble, ShellEnsemble, WebEnsemble, WebLimits};
use tokio_util::sync::CancellationToken;

pub use config::{Config, ConfigError};

/// The owner recorded for threads started from the command line.
pub const LOCAL_CLIENT: &str = "local";

/// Why a task could not be run. Each variant maps to one user-facing code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("unknown agent `{name}`; the agents are: {known}")]
    UnknownAgent { name: String, known: String },
    #[error("workspace {path}: {reason}")]
    Workspace { path: String, reason: String },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl RuntimeError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Config(_) | Self::UnknownAgent { .. } | Self::Workspace { .. } => {
                ErrorCode::InvalidArgument
            }
            Self::Model(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Engine(e) => e.code(),
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

/// What an agent's model looks like on the server right now.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStatus {
    /// The configured model is there.
    Ready { model: String },
    /// The configured model is missing; another one will be used.
    Substitute { wanted: String, model: String },
    /// No usable model; the error says why and what to do.
    Unavailable { wanted: String, error: String },
}

/// Adapters wired to the engine, ready to run turns.
pub struct Runtime {
    config: Config,
    agents: BTreeMap<String, AgentSpec>,
    store: Arc<SqliteStore>,
    model: Arc<OpenAiCompatible>,
    /// Resolved model per wanted name, so a turn does not list the server's models
    /// every time. Entries expire so a newly pulled model is noticed.
    resolved: std::sync::Mutex<HashMap<String, (String, Instant)>>,
}

/// How long a model resolution is reused.
const RESOLUTION_TTL: Duration = Duration::from_secs(60);

impl Runtime {
    /// Opens the store (ending turns a previous process left running as
    /// `interrupted`) and builds the model client. Contacts no model server.
    pub async fn start(config: Config) -> Result<Self, RuntimeError> {
        let store = Arc::new(SqliteStore::open(&config.store.path).await?);
        let interrupted = store.interrupt_running_turns().await?;
        if !interrupted.is_empty() {
            tracing::warn!(
                count = interrupted.len(),
                "turns left running by a previous process were marked interrupted"
            );
        }
        let model = Arc::new(OpenAiCompatible::new(OpenAiConfig {
            base_url: config.llm.base_url.clone(),
            api_key: config.llm.api_key.clone(),
            request_timeout: config.llm.request_timeout,
            connect_timeout: config.llm.connect_timeout,
            max_retries: config.llm.max_retries,
            retry_base_delay: Duration::from_millis(250),
            stream: config.llm.stream,
        })?);
        Ok(Self {
            agents: agents::catalogue(&config),
            config,
            store,
            model,
            resolved: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The configuration this runtime was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every agent, by name.
    pub fn agents(&self) -> &BTreeMap<String, AgentSpec> {
        &self.agents
    }

    /// The event store.
    pub fn store(&self) -> &Arc<SqliteStore> {
        &self.store
    }

    /// An agent by name.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, RuntimeError> {
        self.agents
            .get(name)
            .ok_or_else(|| RuntimeError::UnknownAgent {
                name: name.to_owned(),
                known: self.agents.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The model an agent asks for: its own, else the configured default.
    pub fn wanted_model<'a>(&'a self, agent: &'a AgentSpec) -> &'a str {
        agent.model.as_deref().unwrap_or(&self.config.llm.model)
    }

    /// Asks the server which model an agent would use.
    pub async fn model_status(&self, agent: &AgentSpec) -> ModelStatus {
        let wanted = self.wanted_model(agent).to_owned();
        match self.resolve_model(&wanted).await {
            Ok(model) if model == wanted => ModelStatus::Ready { model },
            Ok(model) => ModelStatus::Substitute { wanted, model },
            Err(e) => ModelStatus::Unavailable {
                wanted,
                error: e.to_string(),
            },
        }
    }

    /// The configured model if the server has it, else the best available chat model.
    /// A server that cannot list its models gets the configured name as it is.
    pub async fn resolve_model(&self, wanted: &str) -> Result<String, ModelError> {
        if let Some(model) = self.cached_resolution(wanted) {
            return Ok(model);
        }
        let model = match self.model.list_models().await {
            Ok(offered) => model_choice::choose_model(wanted, &offered)?,
            Err(ModelError::Upstream {
                status: 404 | 405 | 501,
                ..
            }) => wanted.to_owned(),
            Err(e) => return Err(e),
        };
        if let Ok(mut cache) = self.resolved.lock() {
            cache.insert(wanted.to_owned(), (model.clone(), Instant::now()));
        }
        Ok(model)
    }

    fn cached_resolution(&self, wanted: &str) -> Option<String> {
        let cache = self.resolved.lock().ok()?;
        let (model, at) = cache.get(wanted)?;
        (at.elapsed() < RESOLUTION_TTL).then(|| model.clone())
    }

    /// Runs a task as the first turn of a new thread owned by the local user.
    pub async fn run_task(
        &self,
        task: Task,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, RuntimeError> {
        let agent = self.agent(&task.agent)?.clone();
        let workspace = canonical_workspace(&task.workspace)?;
        let model = tokio::select! {
            _ = cancel.cancelled() => None,
            resolved = self.resolve_model(self.wanted_model(&agent)) => Some(resolved?),
        };
        let thread = self
            .store
            .create_thread(NewThread {
                id: ThreadId::new(),
                client_id: LOCAL_CLIENT.to_owned(),
                agent: agent.name.clone(),
                cwd: workspace.display().to_string(),
                title: Some(title_of(&task.input)),
            })
            .await?;
        let deps = TurnDeps {
            store: self.store.clone(),
            model: self.model.clone(),
        };
        let request = TurnRequest {
            thread: thread.id,
            ensembles: ensembles_for(&agent),
            // Cancelled while resolving: the turn still starts and ends at once as
            // cancelled, so the attempt is on record like any other.
            model: model.unwrap_or_else(|| self.wanted_model(&agent).to_owned()),
            agent,
            input: task.input,
            workspace,
        };
        Ok(run_turn(&deps, request, observer, cancel).await?)
    }
}

/// The builtin ensembles an agent names, configured for it.
pub fn ensembles_for(agent: &AgentSpec) -> Vec<Arc<dyn Ensemble>> {
    agent
        .ensembles
        .iter()
        .filter_map(|name| -> Option<Arc<dyn Ensemble>> {
            match name.as_str() {
                "fs" => Some(Arc::new(FsEnsemble)),
                "shell" => Some(Arc::new(ShellEnsemble::new(agent.shell_allow.clone()))),
                "web" => Some(Arc::new(WebEnsemble::new(
                    agent.network.clone(),
                    WebLimits::default(),
                ))),
                // Config loading refuses unknown names, so nothing else reaches here.
                _ => None,
            }
        })
        .collect()
}

/// The workspace as an existing, canonical directory.
pub fn canonical_workspace(path: &Path) -> Result<PathBuf, RuntimeError> {
    let fail = |reason: String| RuntimeError::Workspace {
        path: path.display().to_string(),
        reason,
    };
    let canonical = path
        .canonicalize()
        .map_err(|e| fail(format!("cannot be used: {e}")))?;
    if !canonical.is_dir() {
        return Err(fail("is not a directory".to_owned()));
    }
    Ok(canonical)
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
