//! How an `acp` agent is started ([`AcpAgentConfig`], its profile resolved against the
//! configured secrets) and where its program is ([`locate_program`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentplane_engine::ports::Ensemble;

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
