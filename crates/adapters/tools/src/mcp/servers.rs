//! The configured MCP servers: an ensemble per (thread, server), the listing, and the
//! shared connections of the MCP gateway. The connections kept between a thread's
//! turns are the pool's (`super::pool`). [`McpServers::shutdown`] ends every connection,
//! kept or in use. What must not live here: the protocol, and which agent may use
//! which server (the runtime's wiring).

use std::collections::BTreeMap;
use std::sync::Arc;

use agentplane_core::{ThreadId, ToolSpec};
use agentplane_engine::ports::Ensemble;

use super::connection;
use super::ensemble::McpEnsemble;
use super::pins::Pins;
use super::pool::Pool;
use super::shared::{Shared, SharedState};
use super::spec::McpServerSpec;

/// The configured servers, and the pool of connections kept for threads. Cheap to
/// clone: clones share the pool.
#[derive(Clone)]
pub struct McpServers {
    specs: Arc<BTreeMap<String, Arc<McpServerSpec>>>,
    /// Specs in the order given, for [`McpServers::list`].
    order: Arc<Vec<Arc<McpServerSpec>>>,
    pool: Arc<Pool>,
    /// One connection per server for the MCP gateway (`shared.rs`).
    shared: Arc<Shared>,
}

/// What `agentplane mcp list` shows for one server.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// The server's name.
    pub name: String,
    /// `stdio: COMMAND ARGS…` or `http: URL`; never a header or environment value.
    pub transport: String,
    /// Its tools as the model would see them, or why it could not be reached.
    pub tools: Result<Vec<ToolSpec>, String>,
}

impl McpServers {
    /// The servers `specs` name; a later spec with the same name replaces an earlier one.
    pub fn new(specs: Vec<McpServerSpec>) -> Self {
        let order: Vec<Arc<McpServerSpec>> = specs.into_iter().map(Arc::new).collect();
        let specs = order
            .iter()
            .map(|s| (s.name.clone(), Arc::clone(s)))
            .collect();
        Self {
            specs: Arc::new(specs),
            order: Arc::new(order),
            pool: Arc::new(Pool::default()),
            shared: Arc::new(Shared::default()),
        }
    }

    /// The ensemble of `server` for one turn of `thread`; `None` if no such server is
    /// configured. Nothing connects until the ensemble is opened.
    pub fn ensemble(&self, server: &str, thread: &ThreadId) -> Option<Arc<dyn Ensemble>> {
        let spec = self.specs.get(server)?;
        Some(Arc::new(McpEnsemble::new(
            Arc::clone(spec),
            thread.clone(),
            Arc::clone(&self.pool),
        )))
    }

    /// Connects to every server at once (each bounded by its startup timeout), lists its
    /// tools and disconnects. Reports come in configuration order.
    pub async fn list(&self) -> Vec<ServerReport> {
        let probes: Vec<_> = self
            .order
            .iter()
            .map(|spec| {
                let spec = Arc::clone(spec);
                let tokens = self.pool.tokens(&spec);
                let pins = self.pool.pins().cloned();
                tokio::spawn(async move {
                    match connection::connect(&spec, tokens, pins.as_ref()).await {
                        Ok(connection) => {
                            let tools = connection.catalog().specs.clone();
                            connection.close().await;
                            Ok(tools)
                        }
                        Err(message) => Err(message),
                    }
                })
            })
            .collect();
        let mut reports = Vec::with_capacity(probes.len());
        for (spec, probe) in self.order.iter().zip(probes) {
            let tools = probe
                .await
                .unwrap_or_else(|e| Err(format!("listing MCP server `{}` failed: {e}", spec.name)));
            reports.push(ServerReport {
                name: spec.name.clone(),
                transport: spec.describe(),
                tools,
            });
        }
        reports
    }

    /// Pins the servers' tool definitions in `pins` from now on (`super::pins`); set
    /// once, before the first connection.
    pub fn pin_in(&self, pins: Pins) {
        self.pool.pin_in(pins);
    }

    /// Ends the gateway's connection to `server`, so that its next use lists the tools
    /// again (after an admin approved a changed definition).
    pub async fn forget(&self, server: &str) {
        self.shared.forget(server).await;
    }

    /// Where the gateway's connection to `server` stands; `None` before any attempt.
    pub fn shared_state(&self, server: &str) -> Option<SharedState> {
        self.shared.state(server)
    }

    /// Whether `server` is configured.
    pub fn has(&self, server: &str) -> bool {
        self.specs.contains_key(server)
    }

    /// The tools of `server` over its shared connection (the MCP gateway's), named
    /// `mcp__SERVER__TOOL`; connects on first use.
    pub async fn shared_tools(&self, server: &str) -> Result<Vec<ToolSpec>, String> {
        let spec = self
            .specs
            .get(server)
            .ok_or_else(|| format!("no MCP server `{server}` is configured"))?;
        self.shared
            .tools(spec, self.pool.tokens(spec), self.pool.pins())
            .await
    }

    /// One tool of `server` (by its `mcp__SERVER__TOOL` name) over its shared connection;
    /// `Err` when it cannot be called now (the server unreachable, the tool quarantined).
    pub async fn shared_tool(
        &self,
        server: &str,
        tool: &str,
    ) -> Result<Option<ToolSpec>, agentplane_engine::ports::ToolError> {
        let Some(spec) = self.specs.get(server) else {
            return Ok(None);
        };
        self.shared
            .tool(spec, self.pool.tokens(spec), self.pool.pins(), tool)
            .await
    }

    /// Calls `tool` (its `mcp__SERVER__TOOL` name) on `server` over its shared
    /// connection, within `timeout` (and the server's own call timeout).
    pub async fn shared_call(
        &self,
        server: &str,
        tool: &str,
        arguments: serde_json::Value,
        timeout: std::time::Duration,
    ) -> Result<agentplane_engine::ports::ToolOutput, agentplane_engine::ports::ToolError> {
        let Some(spec) = self.specs.get(server) else {
            return Err(agentplane_engine::ports::ToolError::new(
                agentplane_core::ToolErrorKind::UnknownTool,
                format!("no MCP server `{server}` is configured"),
            ));
        };
        self.shared
            .call(
                spec,
                self.pool.tokens(spec),
                self.pool.pins(),
                tool,
                arguments,
                timeout,
            )
            .await
    }

    /// Ends every connection, kept or in use, and its processes. Ensembles opened later
    /// still work, but their connections are no longer kept.
    pub async fn shutdown(&self) {
        self.pool.refuse_keeping();
        self.shared.shutdown().await;
        self.pool.close_all().await;
    }
}
