//! What every A2A answer is written in: the protocol generation a request speaks, and a
//! failure as JSON-RPC (or our HTTP envelope) answers it.
//!
//! What must not live here: any method, or who called (`super::call`).

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, JsonRpcError, JsonRpcResponse, codes};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::error::ApiError;

/// The protocol generation a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generation {
    V1,
    V0_3,
}

impl Generation {
    pub(crate) fn version(self) -> &'static str {
        match self {
            Self::V1 => wire::PROTOCOL_VERSION,
            Self::V0_3 => v0_3::PROTOCOL_VERSION,
        }
    }

    /// An error object as this generation writes it.
    pub(crate) fn error(self, code: i64, message: impl Into<String>) -> JsonRpcError {
        match self {
            Self::V1 => JsonRpcError::new(code, message),
            Self::V0_3 => JsonRpcError::plain(code, message),
        }
    }
}

/// A JSON-RPC failure, or one our HTTP envelope answers (a role the caller lacks, a
/// rate limit, a budget: as on `/v1`).
#[derive(Debug)]
pub(crate) enum Failure {
    Rpc(i64, String),
    Http(ApiError),
}

impl Failure {
    pub(crate) fn rpc(code: i64, message: impl Into<String>) -> Self {
        Self::Rpc(code, message.into())
    }

    /// The outcome recorded for it: the JSON-RPC code, or our error code.
    pub(crate) fn outcome(&self) -> String {
        match self {
            Self::Rpc(code, _) => code.to_string(),
            Self::Http(e) => e.code().as_str().to_owned(),
        }
    }
}

impl From<agentplane_engine::hub::HubError> for Failure {
    fn from(e: agentplane_engine::hub::HubError) -> Self {
        use agentplane_engine::hub::HubError;
        match e {
            HubError::NotFound(_) => Self::rpc(codes::TASK_NOT_FOUND, "Task not found"),
            HubError::InvalidArgument(m) => Self::Rpc(codes::INVALID_PARAMS, m),
            HubError::Conflict(m) => Self::Rpc(codes::UNSUPPORTED_OPERATION, m),
            other => Self::Http(ApiError::from(other)),
        }
    }
}

/// A JSON-RPC error response (HTTP 200, as JSON-RPC over HTTP answers).
pub(crate) fn rpc_error(
    id: &Value,
    generation: Generation,
    code: i64,
    message: impl Into<String>,
) -> Response {
    axum::Json(JsonRpcResponse::err(
        id.clone(),
        generation.error(code, message),
    ))
    .into_response()
}
