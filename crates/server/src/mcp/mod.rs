//! agentplane as an MCP server: every agent of the hub is one MCP tool.
//!
//! A `tools/call` is one task: a new thread owned by the caller's client, one turn
//! started through the hub exactly as `POST /v1/threads` and `POST …/turns` start it,
//! progress notifications while it runs, and the turn's result as the tool's result.
//! Two transports share one handler (`agents.rs`): streamable HTTP at `/mcp` on the
//! hub's router (behind the same bearer token; the client is the request's
//! `X-Client-ID`, see `http.rs`) and stdio for `agentplane mcp serve` (one fixed client,
//! see `stdio.rs`); `bridge.rs` relays the stdio gateway to a running server.
//!
//! Like the HTTP routes, nothing here decides what a request means: the hub validates
//! agents, workspaces and inputs and owns tenancy. This module only maps MCP onto hub
//! calls and hub errors onto MCP errors. It never sends a tool call's arguments in a
//! progress message.

mod agents;
pub(crate) mod authorization;
mod bridge;
mod call;
mod caller;
mod gateway;
mod http;
mod progress;
mod stdio;
mod tools;

pub use bridge::{Connect, Relay, Upstream};
pub(crate) use http::{HttpOptions, enveloped, gateway_service, service as http_service};
pub use stdio::{StdioError, StdioOptions, serve_gateway_bridge, serve_gateway_stdio, serve_stdio};
