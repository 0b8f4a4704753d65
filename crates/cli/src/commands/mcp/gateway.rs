//! `agentplane mcp gateway`: the MCP gateway on stdin/stdout, for a local MCP client
//! (an IDE, a desktop assistant) that starts agentplane as its child process: the tools
//! of the servers named in `[mcp.gateway] servers`, named `SERVER__TOOL`, each call
//! governed as on `/mcp/gateway`. Calls are the local client's (as `run`'s), so their
//! approvals are listed by `agentplane approvals` and the log by `GET /v1/mcp/calls`.
//! The service lives in `agentplane-server` ([`serve_gateway_stdio`]).

use std::path::Path;

use agentplane_runtime::LOCAL_CLIENT;
use agentplane_server::{StdioOptions, serve_gateway_stdio};
use clap::Args;

use crate::exit::Exit;

#[derive(Args)]
pub struct GatewayArgs {}

pub async fn run(config: Option<&Path>, _args: GatewayArgs) -> Exit {
    let runtime = match crate::commands::started(config).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    if !runtime.hub().offers_mcp_gateway() {
        // Still served (an empty tool list), but say why on stderr.
        tracing::warn!("the MCP gateway offers no servers: name them in [mcp.gateway] servers");
    }
    let workspace = match crate::commands::workspace_or_current(None) {
        Ok(dir) => dir,
        Err(code) => return code,
    };
    let options = StdioOptions {
        client: LOCAL_CLIENT.to_owned(),
        workspace,
        shutdown_grace: runtime.config().server.shutdown_grace,
    };
    let served = serve_gateway_stdio(
        runtime.hub().clone(),
        options,
        crate::commands::serve::stop_requested(),
    )
    .await;
    crate::commands::finish(&runtime, served).await
}
