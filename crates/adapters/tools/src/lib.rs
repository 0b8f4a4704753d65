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

mod call;
pub mod changes;
pub mod fs;
pub mod mcp;
pub mod shell;
mod text;
pub mod web;
pub mod webhook;

pub use changes::WorkspaceFiles;
pub use fs::{FsEnsemble, MAX_EDIT_FILE_BYTES};
pub use mcp::{
    ClientAuth, McpServerSpec, McpServers, McpTransport, OAuthClient, ServerReport, ToolFilter,
};
pub use shell::ShellEnsemble;
pub use web::{WebEnsemble, WebLimits};
pub use webhook::{WebhookClient, WebhookSettings};
