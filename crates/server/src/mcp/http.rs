//! `/mcp` (the agents as MCP tools) and `/mcp/gateway` (the MCP gateway, also at
//! `/gateway/mcp`) over streamable HTTP, on the hub's router; rmcp's plain-text errors
//! answered in the error envelope ([`enveloped`]).
//!
//! The route sits behind the same auth middleware as `/v1/*` (the bearer token when one
//! is configured, then a valid `X-Client-ID`), so an unauthenticated caller is a 401
//! before any MCP session exists. The middleware leaves the validated [`ClientId`] in
//! the request's extensions; rmcp hands the request's `Parts` to the handler, which
//! reads the client from there, per request. The route is not in the OpenAPI document:
//! its contract is MCP's, not this API's.
//!
//! [`ClientId`]: crate::auth::ClientId

use std::sync::Arc;
use std::time::Duration;

use agentplane_engine::hub::Hub;
use agentplane_engine::services::mcp_gateway::McpGateway;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::agents::AgentTools;
use super::caller::Caller;
use super::gateway::GatewayTools;

/// How `/mcp` behaves.
pub(crate) struct HttpOptions {
    /// The largest request body, in bytes.
    pub(crate) body_limit: usize,
    /// How often idle MCP event streams send a keep-alive.
    pub(crate) keep_alive: Duration,
    /// Cancelled at shutdown: ends every MCP session and stream.
    pub(crate) stop: CancellationToken,
}

/// The streamable HTTP service behind `/mcp`.
pub(crate) fn service(
    hub: Arc<Hub>,
    options: HttpOptions,
) -> StreamableHttpService<AgentTools, LocalSessionManager> {
    let tools = AgentTools::new(hub, Caller::PerRequest, None);
    serve(tools, options)
}

/// The streamable HTTP service behind `/mcp/gateway`.
pub(crate) fn gateway_service(
    gateway: Arc<McpGateway>,
    options: HttpOptions,
) -> StreamableHttpService<GatewayTools, LocalSessionManager> {
    serve(GatewayTools::new(gateway, Caller::PerRequest), options)
}

fn serve<S: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    handler: S,
    options: HttpOptions,
) -> StreamableHttpService<S, LocalSessionManager> {
    // `Host` and `Origin` are the ingress guard's, for every route alike
    // (`ingress.rs`): rmcp's own check would answer outside the error envelope.
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(options.keep_alive))
        .with_max_request_body_bytes(options.body_limit)
        .with_cancellation_token(options.stop)
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The longest error text of rmcp's quoted in an envelope.
const MAX_QUOTED: usize = 512;

/// An error rmcp answers in plain text (a wrong `Content-Type` or `Accept`, a body that
/// is not JSON-RPC, an unknown session) in agentplane's error envelope instead, its
/// status kept: MCP clients read JSON errors, and every other route answers so. JSON
/// and event-stream answers — JSON-RPC errors included — pass unchanged.
pub(crate) async fn enveloped(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;

    let response = next.run(request).await;
    let status = response.status();
    let kept = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || kept {
        return response;
    }
    let said = match axum::body::to_bytes(response.into_body(), MAX_QUOTED * 4).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes)
            .chars()
            .take(MAX_QUOTED)
            .collect(),
        Err(_) => String::new(),
    };
    let said = said.trim();
    let error = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => crate::error::ApiError::invalid(
            "an MCP request is JSON-RPC with `Content-Type: application/json`",
        ),
        StatusCode::NOT_ACCEPTABLE => crate::error::ApiError::invalid(
            "an MCP client must accept `application/json` and `text/event-stream`",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => {
            crate::error::ApiError::invalid("the request body is larger than the server accepts")
        }
        StatusCode::NOT_FOUND => {
            crate::error::ApiError::not_found(format!("the MCP session ({said})"))
        }
        s if s.is_server_error() => crate::error::ApiError::internal(&said),
        _ => crate::error::ApiError::invalid(format!("not an MCP request: {said}")),
    };
    error.with_status(status).into_response()
}
