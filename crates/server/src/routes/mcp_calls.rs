//! `GET /v1/mcp/calls`: the MCP gateway's log of the calling client, newest first: who
//! called which tool, how it ended, what it cost; never the arguments. The hub forces
//! the client filter; the wire names live here.

use agentplane_engine::ports::McpCallRecord;
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// The most calls one request returns.
const MAX_LIMIT: usize = 1_000;

/// Which calls. Unknown parameters are refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpCallsQuery {
    /// At most this many (1 to 1,000; default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// One call through the MCP gateway.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpCallView {
    /// `mcpc_…`.
    id: String,
    /// When it ended (RFC 3339).
    ts: String,
    client: String,
    /// The agent name policies and budgets saw it under.
    agent: String,
    server: String,
    /// `SERVER__TOOL`.
    tool: String,
    /// `ok`, `error`, `denied`, `rate_limited`, `budget_exceeded`, `rejected`,
    /// `expired` or `invalid`.
    status: String,
    /// Why it did not succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// The policy that refused it or asked for its approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
    /// The approval it waited for.
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<String>,
    duration_ms: u64,
    /// What it was charged (`[prices.tools]`).
    usd_micros: u64,
}

impl From<McpCallRecord> for McpCallView {
    fn from(call: McpCallRecord) -> Self {
        Self {
            id: call.id.to_string(),
            ts: call.ts,
            client: call.client,
            agent: call.agent,
            server: call.server,
            tool: call.tool,
            status: call.status,
            detail: call.detail,
            policy: call.policy,
            approval_id: call.approval.map(|a| a.to_string()),
            duration_ms: call.duration_ms,
            usd_micros: call.usd_micros,
        }
    }
}

/// The calls.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpCallsView {
    calls: Vec<McpCallView>,
}

#[utoipa::path(
    get,
    path = "/v1/mcp/calls",
    operation_id = "listMcpCalls",
    tag = tags::MCP,
    params(McpCallsQuery),
    responses(
        (status = 200, description = "The client's MCP gateway calls, newest first.", body = McpCallsView),
        (status = 400, description = "A bad `limit`.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<McpCallsQuery>,
) -> Result<Json<McpCallsView>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` must be 1 to {MAX_LIMIT}"
        )));
    }
    let calls = state.reports.mcp_gateway_calls(&caller.0, limit).await?;
    Ok(Json(McpCallsView {
        calls: calls.into_iter().map(McpCallView::from).collect(),
    }))
}
