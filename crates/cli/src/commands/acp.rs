//! `agentplane acp`: agentplane as an ACP agent on stdin/stdout, for an editor that
//! speaks the Agent Client Protocol and starts agentplane as its child process.
//!
//! stdout carries the protocol and nothing else: errors and logs go to stderr. Sessions
//! are threads of the same local client as `agentplane run`'s. The service lives in
//! `agentplane-server` ([`serve_acp_stdio`]); this file starts the runtime and picks
//! the options.

use std::path::{Path, PathBuf};

use agentplane_runtime::LOCAL_CLIENT;
use agentplane_server::{AcpServeOptions, serve_acp_stdio};
use clap::Args;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct AcpArgs {
    /// The agent sessions run on (default: `[run] default_agent`).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// The workspace of a session whose `cwd` is relative (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

pub async fn run(config: Option<&Path>, args: AcpArgs) -> Exit {
    let runtime = match crate::commands::started(config).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let agent = args
        .agent
        .unwrap_or_else(|| runtime.config().default_agent.clone());
    if !runtime.agents().contains_key(&agent) {
        eprintln!("error [NOT_FOUND]: there is no agent `{agent}`");
        return exit::CONFIG;
    }
    let workspace = match crate::commands::workspace_or_current(args.workspace) {
        Ok(dir) => dir,
        Err(code) => return code,
    };
    let served = serve_acp_stdio(
        runtime.hub().clone(),
        AcpServeOptions {
            client: LOCAL_CLIENT.to_owned(),
            agent,
            workspace,
        },
    )
    .await;
    crate::commands::finish(&runtime, served).await
}
