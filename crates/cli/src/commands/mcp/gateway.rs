//! `agentplane mcp gateway`: the MCP gateway on stdin/stdout, for a local MCP client
//! (an IDE, a desktop assistant) that starts agentplane as its child process: the tools
//! of the servers named in `[mcp.gateway] servers`, named `SERVER__TOOL`, each call
//! governed as on `/gateway/mcp`.
//!
//! Beside a running `agentplane serve` that holds the configuration's SQLite store (or
//! with `--key`), it relays every request to that server's `/gateway/mcp`
//! (`agentplane-server`'s `serve_gateway_bridge`): the calls, their approvals, records
//! and costs are the server's, decided from its web UI and `agentplane approvals`.
//! Otherwise it runs the gateway itself on the store (`serve_gateway_stdio`); calls are
//! the local client's, as `run`'s.

use std::path::Path;
use std::sync::Arc;

use agentplane_runtime::{Config, RuntimeError, mcp_relay, replicas};
use agentplane_server::{GatewayConnect, serve_gateway_bridge};
use clap::Args;

use super::serve::{Served, on_stdio};
use crate::commands::remote::{Remote, ServerArgs};
use crate::exit::{self, Exit};

/// Where a running server serves its MCP gateway.
const GATEWAY_PATH: &str = "/gateway/mcp";

#[derive(Args)]
pub struct GatewayArgs {
    /// The server to relay to when it holds the store (or with --key); default: the
    /// address the running server recorded in the data directory, else `[server]
    /// listen`.
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(config: Option<&Path>, args: GatewayArgs) -> Exit {
    let loaded = match Config::load(config) {
        Ok(loaded) => loaded,
        Err(e) => return crate::commands::failed_to_start(&RuntimeError::from(e)),
    };
    if args.server.has_key() || replicas::held_by_a_server(&loaded.store) {
        let server = args.server.located(&loaded);
        return relay(&server).await;
    }
    on_stdio(config, None, Served::Gateway).await
}

/// Serves the running server's gateway on stdio, until stdin closes or a signal.
async fn relay(server: &ServerArgs) -> Exit {
    let remote = match Remote::new(server) {
        Ok(remote) => remote,
        Err(e) => return e.report(),
    };
    let url = format!("{}{GATEWAY_PATH}", remote.base());
    tracing::info!(
        server = %remote.base(),
        "the store is held by a running server: relaying the MCP gateway to {url}"
    );
    let headers = Arc::new(remote.headers());
    let target = url.clone();
    let connect: GatewayConnect = Arc::new(move |relay| {
        let url = url.clone();
        let headers = headers.clone();
        Box::pin(async move { mcp_relay::connect(&url, &headers, relay).await })
    });
    let stop = crate::commands::serve::stop_requested();
    match serve_gateway_bridge(target, connect, stop).await {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            eprintln!("error [internal]: {e}");
            exit::INTERNAL
        }
    }
}
