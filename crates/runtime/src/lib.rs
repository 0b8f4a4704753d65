//! The composition root: turns a `Config` into working adapters and hands them to the
//! engine. The CLI and (later) the HTTP server start here, so both run agents the same
//! way. Only this crate knows which adapter implements which port; the engine never does.

pub mod agents;
pub mod config;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{AgentSpec, ErrorCode, ThreadId};
use agentplane_engine::hub::{CreateThread, Hub, HubConfig, HubError, Toolbox};
use agentplane_engine::ports::{Ensemble, EventStore, ModelError, StoreError};
use agentplane_engine::{TurnDeps, TurnObserver, TurnOutcome};
use agentplane_providers::{OpenAiCompatible, OpenAiConfig};
use agentplane_store::SqliteStore;
use agentplane_tools::{FsEnsemble, ShellEnsemble, WebEnsemble, WebLimits};
use tokio_util::sync::CancellationToken;

pub use agentplane_engine::hub::ModelStatus;
pub use config::{Config, ConfigError};

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
}

impl RuntimeError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Config(_) => ErrorCode::InvalidArgument,
            Self::Model(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Hub(e) => e.code(),
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
    store: Arc<SqliteStore>,
    hub: Arc<Hub>,
}

/// The builtin ensembles, as the hub's toolbox.
struct BuiltinToolbox;

impl Toolbox for BuiltinToolbox {
    fn ensembles(&self, agent: &AgentSpec, _thread: &ThreadId) -> Vec<Arc<dyn Ensemble>> {
        ensembles_for(agent)
    }
}

impl Runtime {
    /// Opens the store (ending turns a previous process left running as
    /// `interrupted`) and builds the model client and the hub. Contacts no model server.
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
        let hub = Hub::new(
            TurnDeps {
                store: store.clone(),
                model,
            },
            agents::catalogue(&config),
            Arc::new(BuiltinToolbox),
            HubConfig {
                default_model: config.llm.model.clone(),
                permission_timeout: config.server.permission_timeout,
                context: config.context,
                ..HubConfig::default()
            },
        );
        Ok(Self { config, store, hub })
    }

    /// The configuration this runtime was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every agent, by name.
    pub fn agents(&self) -> &BTreeMap<String, AgentSpec> {
        self.hub.agents()
    }

    /// The event store.
    pub fn store(&self) -> &Arc<SqliteStore> {
        &self.store
    }

    /// The hub: threads, turns, streams, permissions.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// An agent by name, or an error listing the known ones.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, RuntimeError> {
        Ok(self.hub.agent(name)?)
    }

    /// Asks the server which model an agent would use.
    pub async fn model_status(&self, agent: &AgentSpec) -> ModelStatus {
        self.hub.model_status(agent).await
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
            .hub
            .run_turn_here(LOCAL_CLIENT, &thread.id, task.input, observer, cancel)
            .await?)
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

/// A thread title from the first line of the task, at most 80 characters.
fn title_of(input: &str) -> String {
    let line = input.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    title
}
