//! agentplane as the ACP client of an external coding agent: one generic implementation
//! of the Agent Client Protocol over stdio, and per-agent profiles for their differences
//! (command, arguments, environment, authentication).
//!
//! `AcpAgent` implements the engine's `ExternalAgent` port. One agent process per
//! prompt, started through `agentplane_process::process` (the one place that starts
//! processes) and ended with its whole process tree. The protocol itself is the
//! official SDK's (`agent-client-protocol`); no SDK type leaves this crate.
//! What must not live here: event recording and policy decisions (the engine's driver
//! does both; we only ask it through the port's channel).

mod capabilities;
mod confinement;
#[doc(hidden)]
pub mod fuzzing;
mod lines;
pub mod profiles;
mod session;
mod terminals;
mod updates;
mod usage;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::ThreadId;
use agentplane_engine::ports::Ensemble;
use agentplane_engine::ports::external::{
    Availability, ExternalAgent, ExternalEnd, ExternalError, ExternalPrompt, ToTurn,
};
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use lines::MAX_LINE_BYTES;
pub use profiles::{AcpProfile, builtin_profile, builtin_profiles};

/// How an `acp` agent is started and spoken to: its profile, resolved against the
/// configured secrets.
#[derive(Clone)]
pub struct AcpAgentConfig {
    /// The profile's name (`codex`, `gemini`…), shown as `acp:<profile>`.
    pub profile: String,
    /// The program: a bare name looked up on `PATH`, or a path.
    pub command: String,
    pub args: Vec<String>,
    /// The profile's arguments for installed versions that predate `args` (see
    /// [`AcpProfile::legacy_args`]); `None` when `args` were configured.
    pub legacy_args: Option<Vec<String>>,
    /// Variables set for the agent: literal values and resolved secrets.
    pub env: BTreeMap<String, String>,
    /// Variables the agent needs that could not be resolved, with where they were
    /// looked for: the agent is unavailable while any is missing.
    pub missing_env: Vec<String>,
    /// The `authenticate` method to call after `initialize`, when the profile has one.
    pub auth_method: Option<String>,
    /// How long `initialize`, `authenticate` and `session/new` may each take.
    pub handshake_timeout: Duration,
    /// What runs the agent's `terminal/*` commands: an ensemble offering `run_command`
    /// (the runtime hands it our `shell` ensemble over the agent's `shell_allow`);
    /// `None`: no terminal capability is offered.
    pub terminal: Option<Arc<dyn Ensemble>>,
    /// Wall time of one terminal command.
    pub terminal_timeout: Duration,
    /// Bytes of a terminal's output kept.
    pub terminal_output_cap: usize,
    /// The kernel sandbox of the agent's process tree (the agent's `[sandbox]`:
    /// required, extra paths, limits); `None`: unconfined but for a Landlock domain
    /// of its own (`sandbox.enabled = false` under `[agents.NAME.acp]`).
    pub sandbox: Option<agentplane_process::Sandbox>,
    /// The agent's own state and cache directories, relative to `$HOME`, writable
    /// in its sandbox (the profile's, plus `[agents.NAME.acp] state_dirs`).
    pub state_dirs: Vec<String>,
}

impl std::fmt::Debug for AcpAgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `env` holds resolved secrets: only its names are shown.
        f.debug_struct("AcpAgentConfig")
            .field("profile", &self.profile)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("missing_env", &self.missing_env)
            .field("auth_method", &self.auth_method)
            .field(
                "terminal",
                &self.terminal.as_ref().map(|e| e.name().to_owned()),
            )
            .finish_non_exhaustive()
    }
}

/// An external agent spoken to over ACP.
pub struct AcpAgent {
    config: AcpAgentConfig,
    /// The arguments the installed program understands, found at its first prompt.
    args: tokio::sync::OnceCell<Vec<String>>,
    /// The agent's session of each thread, to resume it with `session/load` when the
    /// agent supports that (kept while agentplane runs).
    sessions: Arc<Mutex<HashMap<ThreadId, String>>>,
}

impl AcpAgent {
    /// An agent for `config`; nothing is started until a prompt.
    pub fn new(config: AcpAgentConfig) -> Self {
        Self {
            config,
            args: tokio::sync::OnceCell::new(),
            sessions: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &AcpAgentConfig {
        &self.config
    }
}

/// Finds the program: a path must be an executable file; a bare name is looked up on
/// the host's `PATH` (absolute entries only).
pub fn locate_program(command: &str) -> Option<std::path::PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        let ok = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        return ok.then(|| path.to_path_buf());
    }
    agentplane_process::process::find_program(command)
}

/// The profile's arguments when the installed program's `--help` mentions the first
/// of them, else its legacy ones (gemini: `--acp`, or `--experimental-acp` before
/// it existed). Configured arguments are used as they are.
async fn understood_args(config: &AcpAgentConfig) -> Vec<String> {
    let (Some(legacy), Some(flag)) = (&config.legacy_args, config.args.first()) else {
        return config.args.clone();
    };
    match help_text(&config.command, &config.env).await {
        Some(help)
            if help
                .replace("--experimental-acp", "")
                .contains(flag.as_str()) =>
        {
            config.args.clone()
        }
        Some(_) => legacy.clone(),
        // It could not say: the current arguments, and the agent's error if wrong.
        None => config.args.clone(),
    }
}

/// What `command --help` prints (stdout and stderr, at most 256 KiB), within 15 s.
async fn help_text(command: &str, env: &BTreeMap<String, String>) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let help = ["--help".to_owned()];
    let started =
        agentplane_process::process::start_server(&agentplane_process::process::ServerCommand {
            program: command,
            args: &help,
            env,
            cwd: None,
        })
        .ok()?;
    let mut process = started.process;
    let read = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let limit = 256 * 1024;
        let (mut stdout, mut stderr) = (started.stdout.take(limit), started.stderr.take(limit));
        let _ = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        out.extend(err);
        String::from_utf8_lossy(&out).into_owned()
    };
    let text = tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .ok();
    process.terminate(Duration::from_millis(200)).await;
    text
}

#[async_trait]
impl ExternalAgent for AcpAgent {
    fn label(&self) -> String {
        format!("acp:{}", self.config.profile)
    }

    async fn availability(&self) -> Availability {
        if locate_program(&self.config.command).is_none() {
            return Availability::Unavailable(format!(
                "program missing: `{}` was not found (install it, or set `command` under `[agents.NAME.acp]`)",
                self.config.command
            ));
        }
        if !self.config.missing_env.is_empty() {
            return Availability::Unavailable(format!(
                "key missing: {}",
                self.config.missing_env.join("; ")
            ));
        }
        Availability::Available
    }

    async fn prompt(
        &self,
        prompt: ExternalPrompt,
        to_turn: mpsc::Sender<ToTurn>,
        cancel: CancellationToken,
    ) -> Result<ExternalEnd, ExternalError> {
        if let Availability::Unavailable(why) = self.availability().await {
            return Err(ExternalError::Unavailable(format!(
                "the ACP agent `{}` cannot start: {why}",
                self.config.profile
            )));
        }
        let args = self
            .args
            .get_or_init(|| understood_args(&self.config))
            .await;
        let config = AcpAgentConfig {
            args: args.clone(),
            ..self.config.clone()
        };
        session::run(&config, &self.sessions, prompt, to_turn, cancel).await
    }
}
