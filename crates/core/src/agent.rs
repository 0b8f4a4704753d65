//! Agent definitions: what an agent is told, which tools it gets, what it must return,
//! and the limits it runs under. Built-in agents and configured ones share this type.

use serde::{Deserialize, Serialize};

/// Limits of one turn. Every value has a default, so a definition names only what differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLimits {
    /// Model calls per turn before the turn stops with `step_limit`.
    pub max_steps: u32,
    /// Wall time of one tool call.
    pub tool_timeout_ms: u64,
    /// Bytes of one tool result kept for the model and the log; the rest is cut.
    pub tool_output_cap_bytes: usize,
    /// Tokens one model call may answer with: sent as `max_tokens` with every call, so
    /// a looping model ends and a budget can reserve the call's worst case.
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u32,
    /// Corrective messages a turn sends a model that answered with text when the agent
    /// has an output schema, before the turn ends as `text_answer`.
    #[serde(default = "default_max_nudges")]
    pub max_nudges: u32,
    /// The most one turn of an external agent (ACP or A2A) may cost, in USD micros
    /// (`[agents.NAME] max_cost_usd`): its cost is known only once it reports it, so a
    /// budget reserves this worst case before the turn starts and settles at most this
    /// much. `None` for our own agents, whose model calls reserve their own worst case,
    /// and for an external agent that sets none (refused where a budget applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_micros: Option<u64>,
}

/// Corrective messages per turn when the agent sets none.
pub const DEFAULT_MAX_NUDGES: u32 = 2;

fn default_max_nudges() -> u32 {
    DEFAULT_MAX_NUDGES
}

/// How a turn gets tool calls out of the model (`tool_calls` of an agent; ADR 0032).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallMode {
    /// Recover calls written as text; constrain the answer's format where the server
    /// can, once native calls are unsupported or have failed in the turn.
    #[default]
    Auto,
    /// Only the server's native `tool_calls` (and Harmony markup) are calls.
    Native,
    /// Native calls, and calls written as text recovered when there are none.
    Recover,
    /// Every answer constrained by a JSON schema to one of the offered calls, where the
    /// server supports it (else as `recover`).
    Constrained,
}

impl ToolCallMode {
    /// The spelling used in configuration and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Recover => "recover",
            Self::Constrained => "constrained",
        }
    }

    /// The mode a configuration value names.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "auto" => Some(Self::Auto),
            "native" => Some(Self::Native),
            "recover" => Some(Self::Recover),
            "constrained" => Some(Self::Constrained),
            _ => None,
        }
    }
}

/// The output cap of a model call when the agent sets none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

fn default_max_output_tokens() -> u32 {
    DEFAULT_MAX_OUTPUT_TOKENS
}

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            max_steps: 24,
            tool_timeout_ms: 30_000,
            tool_output_cap_bytes: 64 * 1024,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            max_nudges: DEFAULT_MAX_NUDGES,
            max_cost_micros: None,
        }
    }
}

/// Network reach of an agent's `web` tools. Off unless the agent says otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkAccess {
    /// Whether `fetch_url` may be used at all.
    pub allowed: bool,
    /// Whether loopback, private and link-local addresses may be reached.
    pub allow_private: bool,
}

/// Kernel confinement of every process an agent's tools start (ADR 0023): which paths
/// beyond the workspace it may read or write, the resource limits, and whether running
/// unconfined on a kernel that lacks a feature is acceptable. Network reach follows
/// [`NetworkAccess::allowed`]. The kernel enforces it; see `docs/security.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSpec {
    /// Refuse to start a process when the kernel cannot confine it (Landlock ABI 4 or
    /// later, seccomp). `false` is the operator's explicit opt-out: processes then run
    /// with whatever the kernel offers, and a loud warning is logged at start.
    pub required: bool,
    /// Paths readable (and executable) besides the defaults: system directories and
    /// the directories on `PATH`.
    pub read_only: Vec<String>,
    /// Paths writable besides the workspace.
    pub read_write: Vec<String>,
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space per process, in MiB (`RLIMIT_AS`).
    pub address_space_mb: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes of the user the server runs as (`RLIMIT_NPROC`; the kernel does not
    /// apply it to root).
    pub processes: u64,
    /// What the kernel enforces for this agent, in words: filled in by the runtime
    /// once it has asked the kernel, shown by `GET /v1/agents` and `agentplane agents`.
    #[serde(skip_deserializing)]
    pub in_force: String,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        Self {
            required: true,
            read_only: Vec::new(),
            read_write: Vec::new(),
            cpu_secs: 300,
            address_space_mb: 16 * 1024,
            open_files: 1024,
            processes: 4096,
            in_force: String::new(),
        }
    }
}

/// A named agent definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub name: String,
    pub description: String,
    /// Labels policies select agents by (`targets.tags`).
    pub tags: Vec<String>,
    pub system_prompt: String,
    /// A model for this agent; `None` uses the configured default.
    pub model: Option<String>,
    /// Ensembles by name: `fs`, `shell`, `web` (and later MCP servers).
    pub ensembles: Vec<String>,
    /// Program names the `shell` ensemble may run for this agent.
    pub shell_allow: Vec<String>,
    pub network: NetworkAccess,
    /// How the processes its tools start are confined by the kernel.
    #[serde(default)]
    pub sandbox: SandboxSpec,
    /// Tools whose every call waits for a person's permission (fail-closed).
    pub requires_permission: Vec<String>,
    /// JSON Schema of `finish_task`'s arguments: the shape of the turn's result.
    /// `None` offers no `finish_task`: the model's text answer is the result (plain chat
    /// agents, and models without tool support when the agent has no tools either).
    pub output_schema: Option<serde_json::Value>,
    pub limits: AgentLimits,
    /// How tool calls are read from the model's answers.
    #[serde(default)]
    pub tool_calls: ToolCallMode,
    /// Sampling temperature sent with every model call; `None` leaves the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}
