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
mod config;
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::ThreadId;
use agentplane_engine::ports::external::{
    Availability, ExternalAgent, ExternalEnd, ExternalError, ExternalPrompt, ToTurn,
};
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use config::{AcpAgentConfig, locate_program};
pub use lines::MAX_LINE_BYTES;
pub use profiles::{AcpProfile, builtin_profile, builtin_profiles};

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
