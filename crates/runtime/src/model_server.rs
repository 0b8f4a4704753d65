//! `[llm] ensure_available` (seed 000 ADR-008; ADR 0033): the local model server started
//! when it does not answer, and stopped at shutdown if we started it.
//!
//! [`KeptModel`] wraps the `[llm]` client: a listing or a call that finds the server
//! unreachable asks the [`ModelServerKeeper`] to start `start_command` (or
//! `ollama serve` when the URL is Ollama's and `ollama` is on `PATH`), waits until the
//! server lists its models, with a progress line on stderr every few seconds, and tries
//! once more. Only "unreachable" starts anything: a model that is there but cannot do
//! something (no tools, not found) is another path and is never answered by starting a
//! process. The process is started through `agentplane_process::process` like every other
//! one, and its output goes to the log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_core::{ChatRequest, ChatResponse};
use agentplane_engine::ports::{Capabilities, ChatModel, ModelError, ModelInfo, TextSink};
use agentplane_process::process::{self, ServerCommand, ServerProcess};
use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Mutex;

/// How often readiness is checked while waiting.
const POLL: Duration = Duration::from_millis(250);
/// How often the wait says so on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long a started server gets to go on SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What to start, and how long to wait for it.
#[derive(Debug, Clone)]
pub struct KeeperConfig {
    /// The base URL the server must answer on (for messages).
    pub base_url: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// How long a started server has to list its models.
    pub timeout: Duration,
}

/// Starts the configured model server when it does not answer; stops it at shutdown.
pub struct ModelServerKeeper {
    config: KeeperConfig,
    /// The server we started, if any; the lock also makes concurrent callers wait for
    /// one start instead of starting several.
    started: Mutex<Option<ServerProcess>>,
}

impl ModelServerKeeper {
    pub fn new(config: KeeperConfig) -> Self {
        Self {
            config,
            started: Mutex::new(None),
        }
    }

    /// Makes sure the server answers: starts it when `probe` finds it unreachable and
    /// none we started is alive, then waits for it. `Ok(true)`: it was started (or
    /// waited for) now, so a failed call is worth repeating.
    pub async fn ensure(&self, model: &dyn ChatModel) -> Result<bool, ModelError> {
        let mut started = self.started.lock().await;
        if !unreachable(model).await {
            return Ok(false);
        }
        let alive = started.as_mut().is_some_and(|p| !p.has_exited());
        if !alive {
            *started = Some(self.spawn()?);
        }
        let waited = self.wait_ready(model, started.as_mut()).await;
        if waited.is_err()
            && let Some(mut process) = started.take()
        {
            process.terminate(STOP_GRACE).await;
        }
        waited.map(|()| true)
    }

    fn spawn(&self) -> Result<ServerProcess, ModelError> {
        let failed = |detail: String| ModelError::Unreachable {
            url: self.config.base_url.clone(),
            detail,
        };
        let (program, args) = self
            .config
            .command
            .split_first()
            .ok_or_else(|| failed("`[llm] start_command` is empty".to_owned()))?;
        let env = std::collections::BTreeMap::new();
        let started = process::start_server(&ServerCommand {
            program,
            args,
            env: &env,
            cwd: None,
        })
        .map_err(|e| {
            failed(format!(
                "`{program}` (`[llm] start_command`) did not start: {e}"
            ))
        })?;
        tracing::info!(
            command = %self.config.command.join(" "),
            pid = started.process.id(),
            url = %self.config.base_url,
            "the model server did not answer: started it"
        );
        eprintln!(
            "agentplane: the model server at {} did not answer; starting `{}`",
            self.config.base_url,
            self.config.command.join(" ")
        );
        // Its output goes to the log; reading it also keeps its pipes from filling.
        drop(started.stdin);
        tokio::spawn(log_lines(started.stdout));
        tokio::spawn(log_lines(started.stderr));
        Ok(started.process)
    }

    async fn wait_ready(
        &self,
        model: &dyn ChatModel,
        mut process: Option<&mut ServerProcess>,
    ) -> Result<(), ModelError> {
        let began = Instant::now();
        let mut said = Instant::now();
        loop {
            if model.list_models().await.is_ok() {
                let seconds = began.elapsed().as_secs_f32();
                tracing::info!(url = %self.config.base_url, seconds, "the model server answers");
                eprintln!("agentplane: the model server answers (after {seconds:.1} s)");
                return Ok(());
            }
            if let Some(process) = process.as_deref_mut()
                && process.has_exited()
            {
                return Err(ModelError::Unreachable {
                    url: self.config.base_url.clone(),
                    detail: format!(
                        "`{}` exited before the server answered (see the log)",
                        self.config.command.join(" ")
                    ),
                });
            }
            if began.elapsed() >= self.config.timeout {
                return Err(ModelError::Unreachable {
                    url: self.config.base_url.clone(),
                    detail: format!(
                        "`{}` was started but the server did not answer within {} s",
                        self.config.command.join(" "),
                        self.config.timeout.as_secs()
                    ),
                });
            }
            if said.elapsed() >= PROGRESS_EVERY {
                eprintln!(
                    "agentplane: waiting for the model server at {} ({} s)",
                    self.config.base_url,
                    began.elapsed().as_secs()
                );
                said = Instant::now();
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops the server if we started it: SIGTERM to its process tree, then SIGKILL.
    pub async fn stop(&self) {
        if let Some(mut process) = self.started.lock().await.take() {
            tracing::info!(pid = process.id(), "stopping the model server we started");
            process.terminate(STOP_GRACE).await;
        }
    }
}

/// Whether the server is down: its listing fails as unreachable.
async fn unreachable(model: &dyn ChatModel) -> bool {
    matches!(
        model.list_models().await,
        Err(ModelError::Unreachable { .. })
    )
}

async fn log_lines(stream: impl tokio::io::AsyncRead + Unpin) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "agentplane::model_server", "{line}");
    }
}

/// The `[llm]` client, with the server started when it is unreachable.
pub struct KeptModel {
    pub inner: Arc<dyn ChatModel>,
    pub keeper: Arc<ModelServerKeeper>,
}

impl KeptModel {
    /// Starts the server when `error` says it is unreachable; whether to try again.
    async fn retry_after(&self, error: &ModelError) -> bool {
        if !matches!(error, ModelError::Unreachable { .. }) {
            return false;
        }
        match self.keeper.ensure(self.inner.as_ref()).await {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(error = %e, "could not start the model server");
                false
            }
        }
    }
}

#[async_trait]
impl ChatModel for KeptModel {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        match self.inner.list_models().await {
            Err(e) if self.retry_after(&e).await => self.inner.list_models().await,
            answered => answered,
        }
    }

    async fn capabilities(&self, model: &str) -> Capabilities {
        self.inner.capabilities(model).await
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_text: &mut TextSink<'_>,
    ) -> Result<ChatResponse, ModelError> {
        match self.inner.chat(request, on_text).await {
            Err(e) if self.retry_after(&e).await => self.inner.chat(request, on_text).await,
            answered => answered,
        }
    }

    async fn embed(
        &self,
        request: &agentplane_engine::ports::EmbeddingRequest,
    ) -> Result<agentplane_engine::ports::Embeddings, ModelError> {
        match self.inner.embed(request).await {
            Err(e) if self.retry_after(&e).await => self.inner.embed(request).await,
            answered => answered,
        }
    }
}
