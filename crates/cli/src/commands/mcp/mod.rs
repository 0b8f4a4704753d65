//! `agentplane mcp`: the configured MCP servers (`list`), agentplane itself as an MCP
//! server on stdio (`serve`), and the MCP gateway on stdio (`gateway`).

pub mod gateway;
pub mod list;
pub mod serve;

use std::path::Path;

use clap::{Args, Subcommand};

use crate::exit::Exit;

#[derive(Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Subcommand)]
enum McpCommand {
    /// Connect to each configured MCP server and show its state and tools.
    List(list::ListArgs),
    /// Serve agentplane's agents as MCP tools on stdin/stdout.
    Serve(serve::ServeArgs),
    /// Serve the MCP gateway ([mcp.gateway] servers, governed) on stdin/stdout.
    Gateway(gateway::GatewayArgs),
}

pub async fn run(config: Option<&Path>, args: McpArgs) -> Exit {
    match args.command {
        McpCommand::List(args) => list::run(config, args).await,
        McpCommand::Serve(args) => serve::run(config, args).await,
        McpCommand::Gateway(args) => gateway::run(config, args).await,
    }
}
