//! `[agents.NAME]`: agents defined in the configuration file, as written, and the
//! checks that turn a bad value into a load error naming the key. What an agent becomes
//! at run time (its `AgentSpec`, an ACP agent's client) is the runtime's `agents.rs`;
//! `kind = "acp"` agents' own keys are `acp.rs`'s, `kind = "a2a"` agents' `a2a_agents.rs`'s.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::a2a_agents::{self, A2aRemoteSettings};
use super::acp::{self, AcpOverrides};

/// Ensembles an agent may name besides MCP servers.
pub const KNOWN_ENSEMBLES: &[&str] = &["fs", "shell", "web"];

/// An agent defined in the configuration file (`[agents.NAME]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default)]
    pub description: String,
    /// Labels that policies select agents by.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Required for our own agents; an external agent (`kind = "acp"` or `"a2a"`) has
    /// its own.
    #[serde(default)]
    pub system_prompt: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub ensembles: Vec<String>,
    #[serde(default)]
    pub shell_allow: Vec<String>,
    #[serde(default)]
    pub network: NetworkConfig,
    /// `[agents.NAME.sandbox]`: kernel confinement of the processes its tools start.
    #[serde(default)]
    pub sandbox: agentplane_core::SandboxSpec,
    /// Tools whose every call waits for a person's permission.
    #[serde(default)]
    pub requires_permission: Vec<String>,
    /// JSON Schema of the result, as a TOML table; defaults to `{summary: string}`.
    #[serde(default)]
    pub output_schema: Option<toml::Value>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub tool_timeout_ms: Option<u64>,
    #[serde(default)]
    pub tool_output_cap_bytes: Option<usize>,
    /// Tokens one model call may answer with (sent as `max_tokens`; budgets reserve it).
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// The most one turn of an external agent (`kind = "acp"` or `"a2a"`) may cost, in
    /// dollars: what a budget reserves before the turn and the most it settles
    /// (the engine's `governance/ceiling.rs`). Required where a budget applies to it.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// How tool calls are read from the model: `auto` (default), `native`, `recover`
    /// or `constrained` (ADR 0032).
    #[serde(default)]
    pub tool_calls: Option<String>,
    /// Corrective messages to a model that answered with text instead of finishing
    /// (agents with an output schema); default 2.
    #[serde(default)]
    pub max_nudges: Option<u32>,
    /// Sampling temperature of its model calls, 0 to 2; the server's default when unset.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The version number of this definition (ADR 0016); `1.0.0` when left out.
    #[serde(default)]
    pub version: Option<String>,
    /// `llm` (default), `acp` or `a2a`; `profile` and `[acp]` are for `acp`
    /// (settings/acp.rs), `url` and `[a2a]` for `a2a` (settings/a2a_agents.rs).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub acp: Option<AcpOverrides>,
    /// A remote A2A agent's Agent Card URL.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub a2a: Option<A2aRemoteSettings>,
}

impl AgentConfig {
    /// Whether the agent is an external ACP one (`kind = "acp"`).
    pub fn is_acp(&self) -> bool {
        acp::is_acp(self.kind.as_deref())
    }

    /// Whether the agent is a remote A2A one (`kind = "a2a"`).
    pub fn is_a2a(&self) -> bool {
        a2a_agents::is_a2a(self.kind.as_deref())
    }

    /// Whether the agent runs elsewhere (ACP or A2A), not as our own model-and-tools loop.
    pub fn is_external(&self) -> bool {
        self.is_acp() || self.is_a2a()
    }
}

/// `[agents.NAME.network]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    #[serde(default)]
    pub allowed: bool,
    #[serde(default)]
    pub allow_private: bool,
}

/// Letters, digits, `-` and `_`: names that fit in tool names and URLs as they are.
/// The agents every configuration has (`agents.rs` of the runtime builds them).
pub const BUILT_IN_AGENTS: [&str; 2] = ["engineering", "research"];

pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The most a turn may cost (`max_cost_usd`, at most $1,000,000) in whole micro-dollars.
pub fn max_cost_micros(usd: f64) -> Result<u64, String> {
    if !usd.is_finite() || usd < 0.0 {
        return Err(format!(
            "must be a finite, non-negative number of dollars, got {usd}"
        ));
    }
    if usd > 1_000_000.0 {
        return Err(format!("must be at most 1000000 dollars, got {usd}"));
    }
    // In range [0, 1e12]: exact in f64 and in u64.
    Ok((usd * 1_000_000.0).round() as u64)
}

/// Checks an agent's values; on error, the key within the agent and the message.
/// `a2a_agents` are the names of the agents of kind `a2a`, which others may call as
/// the tool `a2a__NAME`.
pub fn check_agent(
    name: &str,
    agent: &AgentConfig,
    mcp_servers: &BTreeSet<&str>,
    a2a_agents: &BTreeSet<&str>,
) -> Result<(), (&'static str, String)> {
    if !is_plain_name(name) {
        return Err(("", "agent names use letters, digits, `-` and `_`".into()));
    }
    a2a_agents::check(
        agent.kind.as_deref(),
        agent.url.as_deref(),
        agent.a2a.as_ref(),
        &[
            ("profile", agent.profile.is_some()),
            ("acp", agent.acp.is_some()),
            ("ensembles", !agent.ensembles.is_empty()),
            ("shell_allow", !agent.shell_allow.is_empty()),
            ("output_schema", agent.output_schema.is_some()),
            ("model", agent.model.is_some()),
        ],
    )?;
    if !agent.is_a2a() {
        acp::check(
            agent.kind.as_deref(),
            agent.profile.as_deref(),
            agent.acp.as_ref(),
            &agent.ensembles,
        )?;
    }
    if agent.system_prompt.trim().is_empty() && !agent.is_external() {
        return Err(("system_prompt", "must not be empty".into()));
    }
    super::versions::baseline_version(agent.version.as_deref()).map_err(|m| ("version", m))?;
    for ensemble in &agent.ensembles {
        if let Some(checked) = a2a_agents::check_tool(ensemble, a2a_agents) {
            checked.map_err(|m| ("ensembles", m))?;
            continue;
        }
        if !KNOWN_ENSEMBLES.contains(&ensemble.as_str()) && !mcp_servers.contains(ensemble.as_str())
        {
            let known: Vec<&str> = KNOWN_ENSEMBLES
                .iter()
                .copied()
                .chain(mcp_servers.iter().copied())
                .collect();
            return Err((
                "ensembles",
                format!(
                    "unknown ensemble `{ensemble}`; known: {} (MCP servers are declared \
                     as [mcp.servers.NAME]; a remote A2A agent NAME is the tool `a2a__NAME`)",
                    known.join(", ")
                ),
            ));
        }
    }
    // An ACP agent's `shell_allow` is what it may run through our terminals.
    if !agent.shell_allow.is_empty()
        && !agent.ensembles.iter().any(|e| e == "shell")
        && !agent.is_acp()
    {
        return Err((
            "shell_allow",
            "is set but the `shell` ensemble is not".into(),
        ));
    }
    for program in &agent.shell_allow {
        if program.is_empty()
            || program.contains(['/', '\\'])
            || program.contains(char::is_whitespace)
        {
            return Err((
                "shell_allow",
                format!("`{program}` must be a bare program name"),
            ));
        }
    }
    for path in agent
        .sandbox
        .read_only
        .iter()
        .chain(&agent.sandbox.read_write)
    {
        if !std::path::Path::new(path).is_absolute() {
            return Err(("sandbox", format!("`{path}` must be an absolute path")));
        }
    }
    let limits = &agent.sandbox;
    if [
        limits.cpu_secs,
        limits.address_space_mb,
        limits.open_files,
        limits.processes,
    ]
    .contains(&0)
    {
        return Err((
            "sandbox",
            "cpu_secs, address_space_mb, open_files and processes must be at least 1".into(),
        ));
    }
    if agent
        .requires_permission
        .iter()
        .any(|t| t.trim().is_empty())
    {
        return Err(("requires_permission", "tool names must not be empty".into()));
    }
    if agent.max_steps == Some(0) {
        return Err(("max_steps", "must be at least 1".into()));
    }
    if agent.tool_timeout_ms == Some(0) {
        return Err(("tool_timeout_ms", "must be at least 1".into()));
    }
    if let Some(mode) = &agent.tool_calls
        && agentplane_core::ToolCallMode::parse(mode).is_none()
    {
        return Err((
            "tool_calls",
            format!("`{mode}` is not one of auto, native, recover, constrained"),
        ));
    }
    if agent.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(("temperature", "must be between 0 and 2".into()));
    }
    if let Some(usd) = agent.max_cost_usd {
        if !agent.is_external() {
            return Err((
                "max_cost_usd",
                "is for external agents (`kind = \"acp\"` or `\"a2a\"`); our own agents' \
                 model calls reserve their worst case from `max_output_tokens`"
                    .into(),
            ));
        }
        max_cost_micros(usd).map_err(|m| ("max_cost_usd", m))?;
    }
    if agent.max_output_tokens == Some(0) {
        return Err(("max_output_tokens", "must be at least 1".into()));
    }
    if agent.tool_output_cap_bytes.is_some_and(|cap| cap < 256) {
        return Err(("tool_output_cap_bytes", "must be at least 256".into()));
    }
    if let Some(schema) = &agent.output_schema {
        let json = serde_json::to_value(schema).map_err(|e| ("output_schema", e.to_string()))?;
        agentplane_engine::schema::Schema::compile(&json).map_err(|e| ("output_schema", e))?;
        if json.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err((
                "output_schema",
                "must be a schema with `type = \"object\"`".into(),
            ));
        }
    }
    Ok(())
}
