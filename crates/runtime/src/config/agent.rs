//! The agent and MCP server sections of `agentplane.toml` (`[agents.NAME]`,
//! `[mcp_servers.NAME]`): their types as written, and the checks that turn a bad value
//! into a load error naming the key. The loader (`mod.rs`) reads them; what an agent
//! becomes at run time is `agents.rs`'s.

use super::*;

/// An agent defined in the configuration file (`[agents.NAME]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default)]
    pub description: String,
    /// Labels that policies select agents by.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Required for our own agents; an ACP agent (`kind = "acp"`) has its own.
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
    /// `llm` (default) or `acp`; `profile` and `[acp]` are for `acp` (settings/acp.rs).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub acp: Option<crate::settings::acp::AcpOverrides>,
}

/// An MCP server (`[mcp.servers.NAME]`): a program spoken to over stdio (`command`,
/// `args`, `env`, `cwd`) or a streamable HTTP endpoint (`url`, `headers`). Agents attach
/// it by naming it in their `ensembles`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the server's environment (which never holds `AGENTPLANE_*` variables).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The server's working directory; relative to the configuration file.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    /// Sent with every HTTP request (an `Authorization` header, say). Never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long starting and initializing may take. Default 30 s (an `npx` cold start).
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    /// Longest tool call; the agent's tool timeout applies too, the shorter wins.
    #[serde(default)]
    pub call_timeout_secs: Option<u64>,
    /// Keep the connection for the thread's next turns this long; 0 (the default) ends
    /// it after every turn.
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
}

/// Values of `env` and `headers` often are credentials: only their names are shown.
impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("startup_timeout_secs", &self.startup_timeout_secs)
            .field("call_timeout_secs", &self.call_timeout_secs)
            .field("idle_timeout_secs", &self.idle_timeout_secs)
            .finish()
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
pub(super) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks an MCP server's values; on error, the key within the server and the message.
pub(super) fn check_mcp_server(
    name: &str,
    server: &McpServerConfig,
) -> Result<(), (&'static str, String)> {
    // Tools are named `mcp__NAME__TOOL` and tool names are at most 64 characters.
    if !is_plain_name(name) || name.contains("__") || name.len() > 32 {
        return Err((
            "",
            "MCP server names use letters, digits, `-` and single `_`, at most 32 characters"
                .into(),
        ));
    }
    if crate::agents::KNOWN_ENSEMBLES.contains(&name) {
        return Err(("", format!("`{name}` is a builtin ensemble's name")));
    }
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => {
            return Err((
                "url",
                "give either `command` (stdio) or `url` (HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(("command", "give `command` (stdio) or `url` (HTTP)".into()));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(("command", "must not be empty".into()));
            }
            if !server.headers.is_empty() {
                return Err(("headers", "only HTTP servers (`url`) take headers".into()));
            }
        }
        (None, Some(url)) => {
            check_base_url(url).map_err(|m| ("url", m))?;
            if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                return Err((
                    "url",
                    "`args`, `env` and `cwd` belong to stdio servers (`command`)".into(),
                ));
            }
        }
    }
    for key in server.env.keys() {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(("env", format!("{key:?} is not a variable name")));
        }
    }
    for (key, timeout) in [
        ("startup_timeout_secs", server.startup_timeout_secs),
        ("call_timeout_secs", server.call_timeout_secs),
    ] {
        if timeout == Some(0) {
            return Err((key, "must be at least 1".into()));
        }
    }
    Ok(())
}

/// Checks an agent's values; on error, the key within the agent and the message.
pub(super) fn check_agent(
    name: &str,
    agent: &AgentConfig,
    mcp_servers: &BTreeMap<String, McpServerConfig>,
) -> Result<(), (&'static str, String)> {
    if !is_plain_name(name) {
        return Err(("", "agent names use letters, digits, `-` and `_`".into()));
    }
    crate::settings::acp::check(agent)?;
    if agent.system_prompt.trim().is_empty() && !crate::settings::acp::is_acp(agent) {
        return Err(("system_prompt", "must not be empty".into()));
    }
    version_settings::baseline_version(agent.version.as_deref()).map_err(|m| ("version", m))?;
    for ensemble in &agent.ensembles {
        if !crate::agents::KNOWN_ENSEMBLES.contains(&ensemble.as_str())
            && !mcp_servers.contains_key(ensemble)
        {
            let known: Vec<&str> = crate::agents::KNOWN_ENSEMBLES
                .iter()
                .copied()
                .chain(mcp_servers.keys().map(String::as_str))
                .collect();
            return Err((
                "ensembles",
                format!(
                    "unknown ensemble `{ensemble}`; known: {} (MCP servers are declared \
                     as [mcp.servers.NAME])",
                    known.join(", ")
                ),
            ));
        }
    }
    // An ACP agent's `shell_allow` is what it may run through our terminals.
    if !agent.shell_allow.is_empty()
        && !agent.ensembles.iter().any(|e| e == "shell")
        && !crate::settings::acp::is_acp(agent)
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
