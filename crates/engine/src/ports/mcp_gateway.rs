//! The MCP servers the gateway offers, as the engine sees them: their tools, and one
//! call. The composition root implements it over the MCP client (one shared connection
//! per server); the engine decides who may call what.

use std::time::Duration;

use agentplane_core::ToolSpec;
use async_trait::async_trait;
use serde_json::Value;

use super::tools::{ToolError, ToolOutput};

/// One tool of an offered server.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTool {
    /// The server's configured name.
    pub server: String,
    /// The tool under the name policies know it by (`mcp__SERVER__TOOL`, as for an
    /// agent's tools), with the server's description and input schema.
    pub spec: ToolSpec,
}

/// Where one offered server stands, as its last connection attempt left it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UpstreamState {
    pub server: String,
    /// `connected`, `failing` (the last attempt failed: `error` says why) or
    /// `not_connected` (nothing asked for it yet).
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it got there (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// How many tools it offers (after filters, pins and the screen).
    pub tools: usize,
    /// Its tools held back (a changed or flagged definition), by the server's names.
    pub quarantined: Vec<String>,
}

/// The servers named in `[mcp.gateway] servers`.
#[async_trait]
pub trait McpUpstreams: Send + Sync {
    /// Every tool of every offered server that `client` may use (a server needing
    /// secrets only for clients a `data_scope` policy grants them), in configuration
    /// order. A server that cannot be reached now is left out (and logged), not an
    /// error of the others.
    async fn tools(&self, client: &str) -> Vec<UpstreamTool>;

    /// The one tool `tool` (its `mcp__SERVER__TOOL` name) of `server`, if `client` may
    /// use the server and it offers the tool. `Err` says why a tool of a server the
    /// client may use cannot be called now: the server cannot be reached
    /// (`ExecutionFailed`), or the tool is quarantined (`NotAllowed`).
    async fn tool(
        &self,
        client: &str,
        server: &str,
        tool: &str,
    ) -> Result<Option<UpstreamTool>, ToolError>;

    /// Lists `server`'s tools again at its next use (an admin approved a changed
    /// definition). Default: nothing to do.
    async fn refresh(&self, _server: &str) {}

    /// Where each offered server stands, in configuration order. Default: nothing known.
    async fn states(&self) -> Vec<UpstreamState> {
        Vec::new()
    }

    /// Calls `tool` (its `mcp__SERVER__TOOL` name) on `server` for `client` within
    /// `timeout`.
    async fn call(
        &self,
        client: &str,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError>;
}
