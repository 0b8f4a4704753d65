//! Connections shared by every caller of the MCP gateway: one per server, made on the
//! first call or listing, reused by every client's calls (a stdio server is one
//! process), and made again on the next use after it broke (its process died, its
//! session ended). Concurrent calls share the connection: MCP multiplexes requests.
//! What must not live here: who may call what (the engine's gateway).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{ToolError, ToolOutput};
use serde_json::Value;
use tokio::sync::Mutex;

use super::connection::{self, Connection};
use super::oauth::TokenSource;
use super::pins::Pins;
use super::spec::McpServerSpec;

/// The most a gateway tool result may hold, in bytes; past it the text is cut.
const OUTPUT_CAP: usize = 1024 * 1024;

/// A server's live connection, if any; locked while one is made.
type Slot = Arc<Mutex<Option<Arc<Connection>>>>;

/// Where a server's shared connection stands, as its last attempt left it.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedState {
    /// Why the last attempt failed; `None`: connected.
    pub error: Option<String>,
    /// When (RFC 3339).
    pub since: String,
    /// The tools offered, and those held back, by the server's names.
    pub tools: usize,
    pub quarantined: Vec<String>,
}

/// One slot per server, and where each stands.
#[derive(Default)]
pub(crate) struct Shared {
    slots: std::sync::Mutex<HashMap<String, Slot>>,
    states: std::sync::Mutex<HashMap<String, SharedState>>,
}

impl Shared {
    fn slot(&self, server: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(slots.entry(server.to_owned()).or_default())
    }

    /// The server's healthy connection, made now if there is none (one connect at a
    /// time per server; the others wait for it).
    pub(crate) async fn connection(
        &self,
        spec: &Arc<McpServerSpec>,
        tokens: Option<Arc<TokenSource>>,
        pins: Option<&Pins>,
    ) -> Result<Arc<Connection>, String> {
        let slot = self.slot(&spec.name);
        let mut slot = slot.lock().await;
        if let Some(connection) = slot.as_ref() {
            if connection.is_healthy().await {
                return Ok(Arc::clone(connection));
            }
            let stale = slot.take();
            if let Some(stale) = stale {
                stale.close().await;
            }
        }
        let connected = connection::connect(spec, tokens, pins).await;
        let since = agentplane_core::policy::Timestamp::now().to_string();
        let state = match &connected {
            Ok(connection) => SharedState {
                error: None,
                since,
                tools: connection.catalog().specs.len(),
                quarantined: connection.catalog().quarantined_names(&spec.tool_prefix()),
            },
            Err(reason) => SharedState {
                error: Some(reason.clone()),
                since,
                tools: 0,
                quarantined: Vec::new(),
            },
        };
        self.states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.name.clone(), state);
        let connection = Arc::new(connected?);
        *slot = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Where `server`'s shared connection stands; `None` before any attempt.
    pub(crate) fn state(&self, server: &str) -> Option<SharedState> {
        self.states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(server)
            .cloned()
    }

    /// The tools of `spec`'s server, named `mcp__SERVER__TOOL`.
    pub(crate) async fn tools(
        &self,
        spec: &Arc<McpServerSpec>,
        tokens: Option<Arc<TokenSource>>,
        pins: Option<&Pins>,
    ) -> Result<Vec<ToolSpec>, String> {
        Ok(self
            .connection(spec, tokens, pins)
            .await?
            .catalog()
            .specs
            .clone())
    }

    /// One tool of `spec`'s server by its prefixed name.
    /// `Err` says why the tool cannot be called now: the server cannot be reached
    /// (`ExecutionFailed`), or the tool is quarantined (`NotAllowed`).
    pub(crate) async fn tool(
        &self,
        spec: &Arc<McpServerSpec>,
        tokens: Option<Arc<TokenSource>>,
        pins: Option<&Pins>,
        tool: &str,
    ) -> Result<Option<ToolSpec>, ToolError> {
        let connection = self
            .connection(spec, tokens, pins)
            .await
            .map_err(|reason| ToolError::new(ToolErrorKind::ExecutionFailed, reason))?;
        refuse_quarantined(connection.catalog(), &spec.name, tool)?;
        Ok(connection
            .catalog()
            .specs
            .iter()
            .find(|s| s.name == tool)
            .cloned())
    }

    /// Calls `tool` (its prefixed name) on `spec`'s server.
    pub(crate) async fn call(
        &self,
        spec: &Arc<McpServerSpec>,
        tokens: Option<Arc<TokenSource>>,
        pins: Option<&Pins>,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        let connection = self
            .connection(spec, tokens, pins)
            .await
            .map_err(|reason| ToolError::new(ToolErrorKind::ExecutionFailed, reason))?;
        refuse_quarantined(connection.catalog(), &spec.name, tool)?;
        let Some(name) = connection.catalog().server_name(tool) else {
            return Err(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!("the MCP server `{}` offers no tool `{tool}`", spec.name),
            ));
        };
        let Value::Object(arguments) = arguments else {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                "the arguments must be a JSON object",
            ));
        };
        let timeout = spec.call_timeout.map_or(timeout, |own| own.min(timeout));
        connection.call(name, arguments, timeout, OUTPUT_CAP).await
    }

    /// Ends the shared connection of `server`, if there is one: the next use connects
    /// and lists again (a definition approved since is offered).
    pub(crate) async fn forget(&self, server: &str) {
        let slot = self.slot(server);
        let stale = slot.lock().await.take();
        if let Some(stale) = stale {
            stale.close().await;
        }
    }

    /// Ends every shared connection.
    pub(crate) async fn shutdown(&self) {
        let slots: Vec<_> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.drain().map(|(_, slot)| slot).collect()
        };
        for slot in slots {
            if let Some(connection) = slot.lock().await.take() {
                connection.close().await;
            }
        }
    }
}

/// `NotAllowed` when `catalog` holds `tool` (its prefixed name) back, naming why: the
/// one refusal of a quarantined tool, for the gateway's lookup and call and an agent's
/// call.
pub(crate) fn refuse_quarantined(
    catalog: &super::catalog::Catalog,
    server: &str,
    tool: &str,
) -> Result<(), ToolError> {
    match catalog.quarantined(tool) {
        Some(reason) => Err(ToolError::new(
            ToolErrorKind::NotAllowed,
            format!("the tool `{tool}` of MCP server `{server}` is quarantined: {reason}"),
        )),
        None => Ok(()),
    }
}
