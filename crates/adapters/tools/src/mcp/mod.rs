//! The MCP client: each configured MCP server is one [`Ensemble`] whose tools are
//! offered to the model as `mcp__{server}__{tool}`.
//!
//! Servers are reached over stdio (a process we start, in its own process group, ended
//! with its whole tree on close) or streamable HTTP, both through the official `rmcp`
//! crate. Nothing connects before a turn opens the ensemble. Connections may be kept
//! for a thread's next turn ([`McpServerSpec::idle_timeout`]).
//!
//! Files: [`spec`] (what a server is), `stdio` and `http` (the two ways to reach one;
//! `oauth` and `bearer`: access tokens from a client-credentials grant on each request;
//! `client`: the one HTTP client under both),
//! `connection` (one live session), `catalog` (tools for the model), `content`
//! (results as text), `ensemble` (one server for one turn), [`servers`] (the set of
//! servers), `pool` (the connections kept between turns), `pins` (tool definitions pinned in the
//! store: a changed one quarantined or reported), `shared` (one connection per server for the
//! MCP gateway's callers), [`relay`] (a raw session to a URL, to pass another client's
//! requests through). What must not live here: which agent may use
//! which server, and configuration parsing (both belong to the runtime).
//!
//! [`Ensemble`]: agentplane_engine::ports::Ensemble

mod bearer;
mod catalog;
mod client;
mod connection;
mod content;
mod ensemble;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod oauth;
mod pins;
mod pool;
pub mod relay;
pub mod servers;
mod shared;
pub mod spec;
mod stdio;

pub use pins::{DefinitionChanged, Pins};
pub use servers::{McpServers, ServerReport};
pub use shared::SharedState;
pub use spec::{
    ClientAuth, McpServerSpec, McpTransport, OAuthClient, PinMode, ScreenMode, ToolFilter,
};
