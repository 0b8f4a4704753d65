//! What every handler shares ([`AppState`]): the services, the execution service, the stream
//! settings and the followers counted against their limits. Built once by the router.
//!
//! What must not live here: routes or anything a handler does.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentplane_engine::executions::Executions;
use agentplane_engine::hub::Hub;
use agentplane_engine::services::identity::Identity;
use agentplane_engine::services::mcp_gateway::McpGateway;
use agentplane_engine::services::model_gateway::ModelGateway;
use agentplane_engine::services::reports::Reports;
use agentplane_engine::services::tool_pins::ToolPins;
use agentplane_engine::services::versions::Versions;
use axum::body::Bytes;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::{followers, sse};

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    /// Threads, turns, approvals, shadow runs.
    pub(crate) hub: Arc<Hub>,
    pub(crate) identity: Arc<Identity>,
    pub(crate) reports: Arc<Reports>,
    pub(crate) model_gateway: Arc<ModelGateway>,
    pub(crate) versions: Arc<Versions>,
    pub(crate) mcp_gateway: Arc<McpGateway>,
    pub(crate) tool_pins: Arc<ToolPins>,
    pub(crate) heartbeat: Duration,
    /// Cancelled after shutdown, to end streams that would follow a thread forever.
    pub(crate) streams_end: CancellationToken,
    /// The serialized OpenAPI document, set once the routes are known.
    pub(crate) openapi: Arc<OnceLock<Bytes>>,
    pub(crate) model_probe_timeout: Duration,
    pub(crate) executions: Option<Arc<Executions>>,
    /// The event streams following threads, counted against their limits.
    pub(crate) followers: Arc<followers::Followers>,
}

impl AppState {
    /// The execution service, or 404 when this server runs none.
    pub(crate) fn executions(&self) -> Result<&Arc<Executions>, ApiError> {
        self.executions
            .as_ref()
            .ok_or_else(|| ApiError::not_found("executions are not enabled on this server"))
    }

    pub(crate) fn stream_options(&self) -> sse::StreamOptions {
        sse::StreamOptions {
            heartbeat: self.heartbeat,
            end: self.streams_end.clone(),
        }
    }
}
