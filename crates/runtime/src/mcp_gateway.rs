//! The MCP gateway's upstreams: the servers `[mcp.gateway] servers` names, over one
//! shared connection each (`agentplane_tools::mcp`), offered to a client only when the
//! data-scope policies grant the gateway's calls for that client every secret the
//! server is started with (as for an agent, fail-closed).

use std::time::Duration;

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::{McpUpstreams, ToolError, ToolOutput, UpstreamState, UpstreamTool};
use agentplane_tools::mcp::McpServers;
use async_trait::async_trait;
use serde_json::Value;

use crate::secrets::McpSecretGate;

/// The offered servers.
pub(crate) struct GatewayUpstreams {
    pub(crate) servers: Vec<String>,
    pub(crate) mcp: McpServers,
    pub(crate) gate: McpSecretGate,
    /// The gateway's agent name and tags, which data-scope policies select.
    pub(crate) agent: String,
    pub(crate) tags: Vec<String>,
}

impl GatewayUpstreams {
    fn scope(&self, client: &str, server: &str) -> Result<(), String> {
        self.gate
            .check_scope(&self.agent, &self.tags, client, server)
    }
}

#[async_trait]
impl McpUpstreams for GatewayUpstreams {
    async fn tools(&self, client: &str) -> Vec<UpstreamTool> {
        let mut tools = Vec::new();
        for server in &self.servers {
            if let Err(reason) = self.scope(client, server) {
                tracing::debug!(server, client, "MCP gateway server not offered: {reason}");
                continue;
            }
            match self.mcp.shared_tools(server).await {
                Ok(specs) => tools.extend(specs.into_iter().map(|spec| UpstreamTool {
                    server: server.clone(),
                    spec,
                })),
                Err(reason) => {
                    tracing::warn!(server, "MCP gateway server unavailable: {reason}");
                }
            }
        }
        tools
    }

    async fn tool(
        &self,
        client: &str,
        server: &str,
        tool: &str,
    ) -> Result<Option<UpstreamTool>, ToolError> {
        if !self.servers.iter().any(|s| s == server) || self.scope(client, server).is_err() {
            return Ok(None);
        }
        // Quarantined, or the server cannot be reached: named, so the caller hears why.
        let found = self.mcp.shared_tool(server, tool).await?;
        Ok(found.map(|spec| UpstreamTool {
            server: server.to_owned(),
            spec,
        }))
    }

    async fn refresh(&self, server: &str) {
        self.mcp.forget(server).await;
    }

    async fn states(&self) -> Vec<UpstreamState> {
        self.servers
            .iter()
            .map(|server| match self.mcp.shared_state(server) {
                None => UpstreamState {
                    server: server.clone(),
                    state: "not_connected".into(),
                    error: None,
                    since: None,
                    tools: 0,
                    quarantined: Vec::new(),
                },
                Some(state) => UpstreamState {
                    server: server.clone(),
                    state: if state.error.is_some() {
                        "failing"
                    } else {
                        "connected"
                    }
                    .into(),
                    error: state.error,
                    since: Some(state.since),
                    tools: state.tools,
                    quarantined: state.quarantined,
                },
            })
            .collect()
    }

    async fn call(
        &self,
        client: &str,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        if !self.servers.iter().any(|s| s == server) {
            return Err(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!("the MCP gateway offers no server `{server}`"),
            ));
        }
        self.scope(client, server)
            .map_err(|reason| ToolError::new(ToolErrorKind::PolicyDenied, reason))?;
        self.mcp.shared_call(server, tool, arguments, timeout).await
    }
}
