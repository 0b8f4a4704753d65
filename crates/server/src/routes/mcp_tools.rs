//! `GET /v1/mcp/tools` and `POST /v1/mcp/tools/{server}/{tool}/approve`: upstream MCP
//! tools' pinned definitions (ADR 0062) — as approved, as last listed, what changed —
//! and an admin's approval of a changed one. The service decides; the wire names live
//! here.

use agentplane_engine::services::tool_pins::PinView;
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::tags;
use super::versions::NamePath;
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};

/// Which pins. Unknown parameters are refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpToolsQuery {
    /// Only this configured server's tools.
    server: Option<String>,
}

/// One pinned tool.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PinnedToolView {
    server: String,
    /// The tool's name on its server.
    tool: String,
    /// `pinned` (listed as approved) or `changed` (listed otherwise: quarantined under
    /// `pin = "strict"`, offered under `"warn"`).
    status: String,
    /// SHA-256 of the approved definition.
    approved_hash: String,
    /// SHA-256 of the definition last listed; approve with it.
    seen_hash: String,
    first_seen_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    changed_at: Option<String>,
    /// Who approved the definition in force (absent: first seen).
    #[serde(skip_serializing_if = "Option::is_none")]
    approved_by: Option<String>,
    /// What changed, field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
    /// What the description screen finds in the definition last listed (hidden
    /// characters, text aimed at the model, an overlong description).
    findings: Vec<String>,
    /// The approved definition: name, title, description, inputSchema, outputSchema,
    /// annotations.
    #[schema(value_type = Object)]
    approved: Value,
    /// The definition last listed.
    #[schema(value_type = Object)]
    seen: Value,
}

impl From<PinView> for PinnedToolView {
    fn from(pin: PinView) -> Self {
        Self {
            server: pin.server,
            tool: pin.tool,
            status: pin.status.to_owned(),
            approved_hash: pin.approved_hash,
            seen_hash: pin.seen_hash,
            first_seen_at: pin.first_seen_at,
            changed_at: pin.changed_at,
            approved_by: pin.approved_by,
            diff: pin.diff,
            findings: pin.findings,
            approved: pin.approved,
            seen: pin.seen,
        }
    }
}

/// The pins.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PinnedToolsView {
    tools: Vec<PinnedToolView>,
}

#[utoipa::path(
    get,
    path = "/v1/mcp/tools",
    operation_id = "listPinnedMcpTools",
    tag = tags::MCP,
    params(McpToolsQuery),
    responses(
        (status = 200, description = "Every pinned upstream MCP tool, changed ones first.", body = PinnedToolsView),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<McpToolsQuery>,
) -> Result<Json<PinnedToolsView>, ApiError> {
    let pins = state
        .tool_pins
        .list(&caller.0, query.server.as_deref())
        .await?;
    Ok(Json(PinnedToolsView {
        tools: pins.into_iter().map(PinnedToolView::from).collect(),
    }))
}

/// An approval of the definition last listed.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveToolBody {
    /// The `seen_hash` looked at: refused with `409` when the tool was listed with
    /// another definition since.
    #[serde(default)]
    hash: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/mcp/tools/{server}/{tool}/approve",
    operation_id = "approvePinnedMcpTool",
    tag = tags::MCP,
    params(
        ("server" = String, Path, description = "The configured server."),
        ("tool" = String, Path, description = "The tool's name on the server."),
    ),
    request_body = ApproveToolBody,
    responses(
        (status = 200, description = "The pin, its last listed definition now approved.", body = PinnedToolView),
        (status = 403, description = "The caller is not an admin.", body = crate::error::ErrorEnvelope),
        (status = 404, description = "No such pinned tool.", body = crate::error::ErrorEnvelope),
        (status = 409, description = "Listed with another definition than `hash` since.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn approve(
    State(state): State<AppState>,
    caller: Identity,
    NamePath((server, tool)): NamePath<(String, String)>,
    ApiJson(body): ApiJson<ApproveToolBody>,
) -> Result<Json<PinnedToolView>, ApiError> {
    let pin = state
        .tool_pins
        .approve(&caller.0, &server, &tool, body.hash.as_deref())
        .await?;
    Ok(Json(pin.into()))
}
