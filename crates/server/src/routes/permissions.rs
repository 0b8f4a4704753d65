//! `POST /v1/permissions/{id}`: a person's decision on a tool call waiting for
//! permission.
//!
//! Fail-closed: a body that is not exactly `{"decision":"approved"}` or
//! `{"decision":"declined"}` (bad JSON, a wrong type, an unknown word, an extra field)
//! is answered 400 *and* declines the permission; the hub records why.

use agentplane_core::{ErrorCode, PermissionId};
use axum::Json;
use axum::extract::State;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::{DecisionBody, PermissionView};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, IdPath};

/// Approves or declines a pending permission.
#[utoipa::path(
    post,
    path = "/v1/permissions/{id}",
    operation_id = "resolvePermission",
    tag = tags::PERMISSIONS,
    params(("id" = String, Path, description = "The permission id (`perm_…`).")),
    request_body = DecisionBody,
    responses(
        (status = 200, description = "The permission, resolved.", body = PermissionView),
        (status = 409, description = "The permission was already resolved (by a person, \
            a timeout, a disconnect or a restart).", body = ErrorEnvelope),
    )
)]
pub(crate) async fn resolve(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<PermissionId>,
    body: Result<ApiJson<DecisionBody>, ApiError>,
) -> Result<Json<PermissionView>, ApiError> {
    // A caller who may not answer was refused before its body was read.
    if let Err(refused) = &body
        && refused.code() == ErrorCode::Forbidden
    {
        return Err(refused.clone());
    }
    // An unreadable body still reaches the hub, as a decision it will refuse: the
    // permission is declined either way.
    let decision = match &body {
        Ok(ApiJson(body)) => body.decision.as_str(),
        Err(_) => "",
    };
    let resolved = state.hub.resolve_permission(&caller.0, &id, decision).await;
    match (resolved, body) {
        (Ok(record), _) => Ok(Json(record.into())),
        (Err(e), Err(unreadable)) if e.code() == ErrorCode::InvalidArgument => {
            let message = format!("{}; the permission was declined", unreadable.message());
            Err(ApiError::invalid(message).with_status(unreadable.status()))
        }
        (Err(e), _) => Err(e.into()),
    }
}
