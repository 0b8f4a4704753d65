//! `[mcp.servers.NAME]`: MCP servers agents attach by naming them in their `ensembles`,
//! as written; the checks that turn a bad value into a load error naming the key; and
//! the secrets their `env` and `headers` values refer to (`${secret:NAME}`). The
//! clients are the tools adapter's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;

use super::SettingError;
use super::agents::{KNOWN_ENSEMBLES, is_plain_name};
use super::llm::check_base_url;
use super::secrets::{SecretsConfig, references};

/// `[mcp]` as written: `servers` and `gateway`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMcp {
    /// `[mcp.servers.NAME]`, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
    /// `[mcp.gateway]`: which servers the MCP gateway offers.
    #[serde(default)]
    pub gateway: super::mcp_gateway::FileMcpGateway,
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
    /// Offer only the server's tools matching one of these patterns (`*` wildcards, the
    /// server's own names); absent: all.
    #[serde(default)]
    pub include: Option<Vec<String>>,
    /// Never offer the server's tools matching one of these patterns.
    #[serde(default)]
    pub exclude: Vec<String>,
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
            .field("include", &self.include)
            .field("exclude", &self.exclude)
            .finish()
    }
}

/// Checks an MCP server's values; on error, the key within the server and the message.
pub fn check_mcp_server(
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
    if KNOWN_ENSEMBLES.contains(&name) {
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
    for (key, patterns) in [
        ("include", server.include.as_deref().unwrap_or_default()),
        ("exclude", server.exclude.as_slice()),
    ] {
        for pattern in patterns {
            agentplane_core::policy::Glob::new(pattern).map_err(|m| (key, m))?;
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

/// The secrets each MCP server's `env` and `headers` values refer to, by server.
/// A reference to a secret not in `[secrets]` is an error naming the key.
pub fn secret_references(
    servers: &BTreeMap<String, McpServerConfig>,
    secrets: &SecretsConfig,
) -> Result<BTreeMap<String, BTreeSet<String>>, SettingError> {
    let mut needs = BTreeMap::new();
    for (server, config) in servers {
        let values = config
            .env
            .iter()
            .map(|(k, v)| (format!("mcp.servers.{server}.env.{k}"), v))
            .chain(
                config
                    .headers
                    .iter()
                    .map(|(k, v)| (format!("mcp.servers.{server}.headers.{k}"), v)),
            );
        let mut names = BTreeSet::new();
        for (key, value) in values {
            for name in references(value).map_err(|m| (key.clone(), m))? {
                if !secrets.sources.contains_key(name) {
                    let known: Vec<&str> = secrets.sources.keys().map(String::as_str).collect();
                    return Err((
                        key,
                        format!(
                            "unknown secret `{name}` (configured: {})",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                names.insert(name.to_owned());
            }
        }
        if !names.is_empty() {
            needs.insert(server.clone(), names);
        }
    }
    Ok(needs)
}
