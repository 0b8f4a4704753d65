//! `agentplane mcp gateway`: the MCP gateway on stdin/stdout, for a local MCP client
//! (an IDE, a desktop assistant) that starts agentplane as its child process: the tools
//! of the servers named in `[mcp.gateway] servers`, named `SERVER__TOOL`, each call
//! governed as on `/mcp/gateway`. Calls are the local client's (as `run`'s), so their
//! approvals are listed by `agentplane approvals` and the log by `GET /v1/mcp/calls`.
//! The service lives in `agentplane-server` (`serve_gateway_stdio`).

use std::path::Path;

use clap::Args;

use super::serve::{Served, on_stdio};
use crate::exit::Exit;

#[derive(Args)]
pub struct GatewayArgs {}

pub async fn run(config: Option<&Path>, _args: GatewayArgs) -> Exit {
    on_stdio(config, None, Served::Gateway).await
}
