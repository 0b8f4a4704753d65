//! The configured MCP servers and the connections kept between a thread's turns.
//!
//! A connection belongs to one (thread, server). With an idle timeout of zero it ends
//! when the turn's ensemble closes; otherwise a healthy one is kept, handed to the
//! thread's next turn, and ended by a reaper once it sat unused for the idle timeout.
//! Broken connections are never kept. [`McpServers::shutdown`] ends every connection,
//! kept or in use. What must not live here: the protocol, and which agent may use
//! which server (the runtime's wiring).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use agentplane_core::{ThreadId, ToolSpec};
use agentplane_engine::ports::Ensemble;

use super::connection::{self, Connection};
use super::ensemble::McpEnsemble;
use super::oauth::TokenSource;
use super::shared::Shared;
use super::spec::{McpServerSpec, McpTransport};

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
                tokio::spawn(async move {
                    match connection::connect(&spec, tokens).await {
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
        self.shared.tools(spec, self.pool.tokens(spec)).await
    }

    /// One tool of `server` (by its `mcp__SERVER__TOOL` name) over its shared connection.
    pub async fn shared_tool(&self, server: &str, tool: &str) -> Result<Option<ToolSpec>, String> {
        let spec = self
            .specs
            .get(server)
            .ok_or_else(|| format!("no MCP server `{server}` is configured"))?;
        self.shared.tool(spec, self.pool.tokens(spec), tool).await
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
            .call(spec, self.pool.tokens(spec), tool, arguments, timeout)
            .await
    }

    /// Ends every connection, kept or in use, and its processes. Ensembles opened later
    /// still work, but their connections are no longer kept.
    pub async fn shutdown(&self) {
        self.pool.shut_down.store(true, Ordering::SeqCst);
        self.shared.shutdown().await;
        // Strong references first: a kept connection dropped without `close` would
        // only be killed, not waited for.
        let kept: Vec<Lease> = {
            let mut kept = self.pool.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.drain().map(|(_, lease)| lease).collect()
        };
        let mut live: Vec<Arc<Connection>> = {
            let mut live = self.pool.live.lock().unwrap_or_else(|e| e.into_inner());
            live.drain().filter_map(|(_, c)| c.upgrade()).collect()
        };
        live.extend(kept.into_iter().map(|lease| lease.connection));
        for connection in live {
            connection.close().await;
        }
    }
}

/// Connections kept between turns, and every connection made (for shutdown).
#[derive(Default)]
pub(crate) struct Pool {
    kept: Mutex<HashMap<(ThreadId, String), Lease>>,
    /// Every connection not yet closed through the pool, by id.
    live: Mutex<HashMap<u64, Weak<Connection>>>,
    next_id: AtomicU64,
    shut_down: AtomicBool,
    /// The access tokens of each server with an OAuth grant, shared by all its
    /// connections, by server name.
    tokens: Mutex<HashMap<String, Arc<TokenSource>>>,
}

/// A connection handed out by the pool, with the id it is known by there (the reaper
/// compares ids to tell whether a kept entry is still the one it was started for).
#[derive(Clone)]
pub(crate) struct Lease {
    id: u64,
    pub(crate) connection: Arc<Connection>,
}

impl Pool {
    /// The kept connection of (thread, server) when it is still healthy, or a new one.
    pub(crate) async fn connection(
        self: &Arc<Self>,
        spec: &Arc<McpServerSpec>,
        thread: &ThreadId,
    ) -> Result<Lease, String> {
        let key = (thread.clone(), spec.name.clone());
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some(kept) = kept {
            if kept.connection.is_healthy().await {
                return Ok(kept);
            }
            self.end(kept.id, &kept.connection).await;
        }
        let connection = Arc::new(connection::connect(spec, self.tokens(spec)).await?);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::downgrade(&connection));
        if self.shut_down.load(Ordering::SeqCst) {
            // Shutdown ran while we connected; the caller still gets a working
            // connection, which its own close ends.
            tracing::debug!(server = %spec.name, "MCP connection opened after shutdown");
        }
        Ok(Lease { id, connection })
    }

    /// Takes a connection back at the end of a turn: kept when the server keeps
    /// connections and this one is healthy, ended otherwise.
    pub(crate) async fn release(
        self: &Arc<Self>,
        spec: &Arc<McpServerSpec>,
        thread: &ThreadId,
        lease: Lease,
    ) {
        let Lease { id, connection } = &lease;
        let id = *id;
        if spec.idle_timeout.is_zero()
            || self.shut_down.load(Ordering::SeqCst)
            || !connection.is_healthy().await
        {
            self.end(id, connection).await;
            return;
        }
        let key = (thread.clone(), spec.name.clone());
        let replaced = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), lease.clone());
        if let Some(old) = replaced
            && old.id != id
        {
            self.end(old.id, &old.connection).await;
        }
        // The reaper holds the pool weakly: a dropped pool drops its connections (and
        // so kills their processes) without waiting for the reaper.
        let pool = Arc::downgrade(self);
        let idle = spec.idle_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(idle).await;
            let Some(pool) = pool.upgrade() else {
                return;
            };
            let expired = {
                let mut kept = pool.kept.lock().unwrap_or_else(|e| e.into_inner());
                match kept.get(&key) {
                    Some(entry) if entry.id == id => kept.remove(&key),
                    _ => None,
                }
            };
            if let Some(expired) = expired {
                pool.end(expired.id, &expired.connection).await;
            }
        });
    }

    /// The token source of `spec`'s OAuth grant, made on first use; `None` without one.
    pub(crate) fn tokens(&self, spec: &McpServerSpec) -> Option<Arc<TokenSource>> {
        let McpTransport::Http {
            oauth: Some(grant), ..
        } = &spec.transport
        else {
            return None;
        };
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let source = tokens
            .entry(spec.name.clone())
            .or_insert_with(|| Arc::new(TokenSource::new(&spec.name, grant.clone())));
        Some(Arc::clone(source))
    }

    async fn end(&self, id: u64, connection: &Connection) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        connection.close().await;
    }
}
