//! MCP over stdin/stdout, for `agentplane mcp serve`: an MCP client (an IDE, a desktop
//! assistant) starts agentplane as its child process and calls the agents as tools.
//!
//! stdout carries the protocol and nothing else; whatever the process logs must go to
//! stderr (the CLI's subscriber does). Every thread belongs to one client, fixed for
//! the process. The service ends when stdin closes or `shutdown` resolves; either way
//! the hub is shut down before returning, so running turns finish or are recorded as
//! cancelled.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentplane_engine::hub::{Hub, Services};
use rmcp::service::ServerInitializeError;
use rmcp::{ServiceExt, transport};
use tokio_util::sync::CancellationToken;

use super::agents::AgentTools;
use super::bridge::{Connect, GatewayBridge};
use super::caller::Caller;
use super::gateway::GatewayTools;

/// How [`serve_stdio`] runs.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The client every thread belongs to (the CLI's local client, so `run` and MCP
    /// calls share one list of threads).
    pub client: String,
    /// The workspace of a call that names none: where the MCP client started us.
    pub workspace: PathBuf,
    /// How long shutdown lets running turns finish before cancelling them.
    pub shutdown_grace: Duration,
}

/// Why the stdio service failed. Stdin closing, even before the handshake, is a normal
/// end and not an error.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The MCP handshake failed (a malformed first message, a transport error).
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// The service's task failed.
    #[error("the MCP service failed: {0}")]
    Service(String),
}

/// Serves the hub's agents as MCP tools on stdin/stdout until stdin closes or
/// `shutdown` resolves, then shuts the hub down within `shutdown_grace`.
pub async fn serve_stdio(
    hub: Arc<Hub>,
    options: StdioOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), StdioError> {
    let tools = AgentTools::new(
        hub.clone(),
        Caller::Fixed(options.client),
        Some(options.workspace),
    );
    let stop = CancellationToken::new();
    let result = run(tools, stop.clone(), shutdown).await;
    stop.cancel();
    hub.shutdown(options.shutdown_grace).await;
    result
}

/// Serves the MCP gateway (`[mcp.gateway] servers`) on stdin/stdout for one fixed
/// client, as [`serve_stdio`] serves the agents.
pub async fn serve_gateway_stdio(
    services: Services,
    options: StdioOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), StdioError> {
    let tools = GatewayTools::new(services.mcp_gateway, Caller::Fixed(options.client));
    let stop = CancellationToken::new();
    let result = run(tools, stop.clone(), shutdown).await;
    stop.cancel();
    services.hub.shutdown(options.shutdown_grace).await;
    result
}

/// Serves the MCP gateway on stdin/stdout by relaying every request to the running
/// server at `target` (its `/gateway/mcp`), whose session `connect` opens; for
/// `agentplane mcp gateway` while `serve` holds the store. Nothing is started here:
/// the server governs, records and decides.
pub async fn serve_gateway_bridge(
    target: String,
    connect: Connect,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), StdioError> {
    let bridge = GatewayBridge::new(target, connect);
    run(bridge, CancellationToken::new(), shutdown).await
}

async fn run<S: rmcp::ServerHandler>(
    tools: S,
    stop: CancellationToken,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), StdioError> {
    tokio::pin!(shutdown);
    let starting = tools.serve_with_ct(transport::stdio(), stop.clone());
    let running = tokio::select! {
        started = starting => match started {
            Ok(running) => running,
            Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
                return Ok(());
            }
            Err(e) => return Err(StdioError::Handshake(e.to_string())),
        },
        () = &mut shutdown => return Ok(()),
    };
    let cancel = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        quit = &mut waiting => {
            quit.map(|_| ()).map_err(|e| StdioError::Service(e.to_string()))
        }
        () = &mut shutdown => {
            cancel.cancel();
            // In-flight calls get a moment to send their (cancelled) results.
            match tokio::time::timeout(Duration::from_secs(5), waiting).await {
                Ok(Err(e)) => Err(StdioError::Service(e.to_string())),
                _ => Ok(()),
            }
        }
    }
}
