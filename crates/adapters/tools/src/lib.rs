//! The tool ensembles: builtin `fs`, `shell` and `web`, and one per MCP server ([`mcp`]), each an
//! [`Ensemble`](agentplane_engine::ports::Ensemble) the engine calls.
//!
//! Each one is confined on its own terms: files to the workspace
//! ([`confine`](agentplane_process::confine)), programs to an allowlist run without a
//! shell ([`process`](agentplane_process::process)) and confined by the kernel
//! ([`sandbox`](agentplane_process::sandbox)) — those three from `agentplane-process` —,
//! the network to public addresses
//! unless the agent allows more ([`web`]). A refused breach is a `ToolError` that carries
//! a security violation, so the engine records a `security_event` besides the error.
//!
//! This crate must never decide *who* gets which ensemble (that is the engine's policy
//! and the runtime's wiring), never import another adapter, and never spawn a process
//! but through `agentplane-process`.

pub mod changes;
pub mod fs;
pub mod mcp;
pub mod shell;
mod text;
pub mod web;
pub mod webhook;

// Spawning and confinement live in `agentplane-process`, shared with the ACP client and
// the runtime, which depend on it themselves; named here for this crate's own modules
// (`crate::process`, …) only, so no other crate reaches it through this one.
use agentplane_process::{confine, process, sandbox};

pub use changes::WorkspaceFiles;
pub use fs::{FsEnsemble, MAX_EDIT_FILE_BYTES};
pub use mcp::{
    ClientAuth, McpServerSpec, McpServers, McpTransport, OAuthClient, ServerReport, ToolFilter,
};
pub use shell::ShellEnsemble;
pub use web::{WebEnsemble, WebLimits};
pub use webhook::{WebhookClient, WebhookSettings};

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::ToolError;
use serde::de::DeserializeOwned;

/// Turns a tool's JSON arguments into its argument struct. The engine has already
/// checked them against the schema; this is the second, typed check, so a schema that
/// drifted from the struct fails as `InvalidArguments` instead of misbehaving.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("invalid arguments for {tool}: {e}"),
        )
    })
}

/// The error for a tool name this ensemble does not offer.
pub(crate) fn unknown_tool(ensemble: &str, tool: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::UnknownTool,
        format!("the {ensemble} ensemble has no tool named {tool:?}"),
    )
}
