//! `agentplane mcp`: the configured MCP servers (`list`), agentplane itself as an MCP
//! server on stdio (`serve`), the MCP gateway on stdio (`gateway`), and the pinned
//! definitions of upstream tools (`tools`).

pub mod gateway;
pub mod list;
pub mod serve;
pub mod tools;

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
    /// Pinned tool definitions: list them, and approve a changed one.
    Tools(tools::ToolsArgs),
}

pub async fn run(config: Option<&Path>, args: McpArgs) -> Exit {
    match args.command {
        McpCommand::List(args) => list::run(config, args).await,
        McpCommand::Serve(args) => serve::run(config, args).await,
        McpCommand::Gateway(args) => gateway::run(config, args).await,
        McpCommand::Tools(args) => tools::run(config, args).await,
    }
}
