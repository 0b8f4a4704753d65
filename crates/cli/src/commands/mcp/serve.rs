//! `agentplane mcp serve`: the agents as MCP tools on stdin/stdout, for an MCP client
//! that starts agentplane as its child process.
//!
//! stdout carries the protocol and nothing else: errors and logs go to stderr (the
//! subscriber in `main.rs` writes there). Threads belong to the same local client as
//! `agentplane run`'s, so `agentplane runlog` and the HTTP API (as client `local`) show
//! them. The service itself lives in `agentplane-server` ([`serve_stdio`]); this file
//! starts the runtime, picks the options and owns the process's signals.

use std::path::{Path, PathBuf};

use agentplane_runtime::LOCAL_CLIENT;
use agentplane_server::{StdioOptions, serve_gateway_stdio, serve_stdio};
use clap::Args;

use crate::exit::Exit;

#[derive(Args)]
pub struct ServeArgs {
    /// The workspace of a call that names none (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

pub async fn run(config: Option<&Path>, args: ServeArgs) -> Exit {
    on_stdio(config, args.workspace, Served::Agents).await
}

/// What is served on stdio.
pub(super) enum Served {
    /// The agents as tools (`mcp serve`).
    Agents,
    /// The MCP gateway (`mcp gateway`).
    Gateway,
}

/// Starts the runtime and serves `what` on stdin/stdout for the local client until
/// stdin closes or a signal arrives.
pub(super) async fn on_stdio(
    config: Option<&Path>,
    workspace: Option<PathBuf>,
    what: Served,
) -> Exit {
    let runtime = match crate::commands::started(config).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let workspace = match crate::commands::workspace_or_current(workspace) {
        Ok(dir) => dir,
        Err(code) => return code,
    };
    let options = StdioOptions {
        client: LOCAL_CLIENT.to_owned(),
        workspace,
        shutdown_grace: runtime.config().server.shutdown_grace,
    };
    let services = runtime.services().clone();
    let stop = crate::commands::serve::stop_requested();
    let served = match what {
        Served::Agents => serve_stdio(services.hub, options, stop).await,
        Served::Gateway => {
            if !services.mcp_gateway.offers() {
                // Still served (an empty tool list), but say why on stderr.
                tracing::warn!(
                    "the MCP gateway offers no servers: name them in [mcp.gateway] servers"
                );
            }
            serve_gateway_stdio(services, options, stop).await
        }
    };
    crate::commands::finish(&runtime, served).await
}
