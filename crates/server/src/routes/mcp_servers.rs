//! `GET /v1/mcp/servers`: where each server the MCP gateway offers stands — connected
//! (with how many tools, and which are held back), failing (and why), or not connected
//! yet — as its last connection attempt left it on this replica. The service decides;
//! the wire names live here.

use agentplane_engine::ports::UpstreamState;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;

/// One offered server.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpServerView {
    server: String,
    /// `connected`, `failing` or `not_connected`.
    state: String,
    /// Why the last connection attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Since when (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    /// The tools it offers (after filters, pins and the description screen).
    tools: usize,
    /// Its tools held back (a changed or flagged definition), by the server's names.
    quarantined: Vec<String>,
}

impl From<UpstreamState> for McpServerView {
    fn from(state: UpstreamState) -> Self {
        Self {
            server: state.server,
            state: state.state,
            error: state.error,
            since: state.since,
            tools: state.tools,
            quarantined: state.quarantined,
        }
    }
}

/// The offered servers, in configuration order.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpServersView {
    servers: Vec<McpServerView>,
}

#[utoipa::path(
    get,
    path = "/v1/mcp/servers",
    operation_id = "listMcpGatewayServers",
    tag = tags::MCP,
    responses(
        (status = 200, description = "Each server the MCP gateway offers, and where it stands.", body = McpServersView),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
) -> Result<Json<McpServersView>, ApiError> {
    let servers = state.mcp_gateway.servers(&caller.0).await?;
    Ok(Json(McpServersView {
        servers: servers.into_iter().map(McpServerView::from).collect(),
    }))
}
