//! A raw MCP client session to one streamable HTTP URL, for relaying another client's
//! requests: `agentplane mcp gateway` beside a running server opens one to the
//! server's own `/gateway/mcp` and passes its stdio client's requests through.
//!
//! Unlike an ensemble's connection, nothing here names, filters or converts tools: the
//! caller gets the rmcp session and a handler of its own choice (which forwards the
//! server's progress notifications). It goes over the one HTTP client (`super::client`,
//! no redirects) with the headers given, marked sensitive.

use std::collections::BTreeMap;

use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient, ServiceExt};

use super::http::transport;

/// Opens an MCP session to `url`, sending `headers` with every request, handled by
/// `handler`. The error says what failed (the address, the handshake) without any
/// header value.
pub async fn connect<H: ClientHandler>(
    url: &str,
    headers: &BTreeMap<String, String>,
    handler: H,
) -> Result<RunningService<RoleClient, H>, String> {
    let transport = transport(url, headers, None)?;
    handler.serve(transport).await.map_err(|e| e.to_string())
}
