//! One MCP server as one turn's [`Ensemble`]: nothing connects until `open`; `close`
//! hands a healthy connection back to the pool (when the server keeps connections) or
//! ends it.
//!
//! Calls go straight to the connection's peer, so concurrent calls do not wait on each
//! other. What must not live here: the protocol (see [`super::connection`]) and how
//! long kept connections live (see [`super::servers`]).

use std::sync::{Arc, Mutex};

use agentplane_core::{ThreadId, ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;

use super::connection::Connection;
use super::pool::{Lease, Pool};
use super::spec::McpServerSpec;

/// One server for one turn of one thread.
pub(crate) struct McpEnsemble {
    spec: Arc<McpServerSpec>,
    thread: ThreadId,
    pool: Arc<Pool>,
    /// The connection between `open` and `close`.
    current: Mutex<Option<Lease>>,
    /// Serializes `open` and `close` (the engine calls them in order; this makes a
    /// second `open` or `close` harmless).
    lifecycle: tokio::sync::Mutex<()>,
}

impl McpEnsemble {
    pub(crate) fn new(spec: Arc<McpServerSpec>, thread: ThreadId, pool: Arc<Pool>) -> Self {
        Self {
            spec,
            thread,
            pool,
            current: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }

    fn current(&self) -> Option<Arc<Connection>> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|lease| Arc::clone(&lease.connection))
    }
}

#[async_trait]
impl Ensemble for McpEnsemble {
    fn name(&self) -> &str {
        &self.spec.name
    }

    async fn open(&self) -> Result<(), ToolError> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.current().is_some() {
            return Ok(());
        }
        let lease = self
            .pool
            .connection(&self.spec, &self.thread)
            .await
            .map_err(|message| ToolError::new(ToolErrorKind::ExecutionFailed, message))?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(lease);
        Ok(())
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.current()
            .map(|c| c.catalog().specs.clone())
            .unwrap_or_default()
    }

    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(connection) = self.current() else {
            return Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!("the MCP server `{}` is not connected", self.spec.name),
            ));
        };
        super::shared::refuse_quarantined(connection.catalog(), &self.spec.name, tool)?;
        let Some(server_name) = connection.catalog().server_name(tool) else {
            return Err(crate::call::unknown_tool(&self.spec.name, tool));
        };
        let args = match args {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    format!("arguments for {tool} must be a JSON object, not {other}"),
                ));
            }
        };
        let timeout = self
            .spec
            .call_timeout
            .map_or(ctx.timeout, |t| t.min(ctx.timeout));
        connection
            .call(server_name, args, timeout, ctx.output_cap)
            .await
    }

    async fn close(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        let lease = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(lease) = lease {
            self.pool.release(&self.spec, &self.thread, lease).await;
        }
    }
}
