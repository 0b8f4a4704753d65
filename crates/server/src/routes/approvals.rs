//! Approvals: tool calls a policy holds for a person's decision. `GET /v1/approvals`
//! lists them, `GET /v1/approvals/{id}` shows one, `POST /v1/approvals/{id}` decides it
//! (approve, edit and approve, reject with feedback); the hub then resumes the
//! suspended turn in the background.
//!
//! Unlike a permission, an approval is *not* decided by a malformed body: bad JSON, an
//! unknown decision, an extra field or a wrong type is a 400 and the approval stays
//! pending. A permission holds a running turn and a worker, so it must settle at once
//! and fails closed; an approval holds nothing (the turn is suspended in the store) and
//! expires by itself, so a reviewer's typo is better answered with "try again" than
//! with a rejection the reviewer did not mean. The hub's own refusals (arguments that
//! do not match the tool's schema, feedback that is too long) leave it pending too.
//!
//! The turn's saved state (`snapshot`) is the engine's and never leaves the server.
//! Wire names live here; visibility, approvers and validation are the hub's.

use agentplane_core::{ApprovalId, ApprovalOutcome};
use agentplane_engine::hub::ApprovalAnswer;
use agentplane_engine::ports::{ApprovalRecord, ApprovalStatus};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, ApiQuery, IdPath};

/// Which approvals `GET /v1/approvals` lists. Unknown parameters are refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalsQuery {
    /// `pending` (the default) or `all`.
    #[param(inline, value_type = Option<ApprovalFilter>, nullable = false)]
    #[serde(default)]
    status: ApprovalFilter,
}

/// Which approvals to list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalFilter {
    /// Only those waiting for a decision.
    #[default]
    Pending,
    /// Every approval, decided or not.
    All,
}

/// `POST /v1/approvals/{id}`: exactly one of these shapes; anything else is a 400 and
/// decides nothing.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum DecideApprovalBody {
    /// Run the call exactly as it was planned.
    // A struct variant, not a unit one: serde ignores extra fields of an internally
    // tagged unit variant.
    Approve {},
    /// Run the call with these arguments instead; they must match the tool's schema.
    Edit {
        #[schema(value_type = Object)]
        arguments: Value,
    },
    /// Do not run the call; the feedback (at most 4,000 characters) goes back to the
    /// model as the call's result.
    Reject {
        #[serde(default)]
        #[schema(max_length = 4000)]
        feedback: Option<String>,
    },
}

/// [`DecideApprovalBody`] read from a JSON object only: serde would also take an
/// internally tagged enum from an array (`["approve"]`), a shape nobody means.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Map<String, Value>")]
pub(crate) struct DecisionRequest(DecideApprovalBody);

impl TryFrom<Map<String, Value>> for DecisionRequest {
    type Error = serde_json::Error;

    fn try_from(object: Map<String, Value>) -> Result<Self, Self::Error> {
        serde_json::from_value(Value::Object(object)).map(Self)
    }
}

impl From<DecideApprovalBody> for ApprovalAnswer {
    fn from(body: DecideApprovalBody) -> Self {
        match body {
            DecideApprovalBody::Approve {} => Self::Approve,
            DecideApprovalBody::Edit { arguments } => Self::Edit { arguments },
            DecideApprovalBody::Reject { feedback } => Self::Reject { feedback },
        }
    }
}

/// `GET /v1/approvals`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApprovalList {
    /// Oldest first.
    approvals: Vec<ApprovalView>,
}

/// A tool call held for a decision, and the decision once made.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApprovalView {
    #[schema(example = "apr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    id: String,
    thread_id: String,
    /// The suspended turn.
    turn_id: String,
    /// The thread's agent.
    agent: String,
    call_id: String,
    /// The tool the call waits to run.
    tool: String,
    /// The exact arguments the model planned.
    #[schema(value_type = Object)]
    arguments: Value,
    /// The `approval_required` policy that holds the call.
    policy: String,
    /// Who may decide; empty: the thread's owner.
    approvers: Vec<String>,
    status: ApprovalState,
    /// The arguments an `edited` decision runs.
    #[schema(value_type = Option<Object>)]
    edited_arguments: Option<Value>,
    /// A rejection's feedback, as given to the model.
    feedback: Option<String>,
    /// The client that decided, or `expiry`.
    decided_by: Option<String>,
    /// RFC 3339, UTC.
    created_at: String,
    /// When a pending approval expires (a rejection); RFC 3339, UTC.
    expires_at: String,
    decided_at: Option<String>,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalState {
    Pending,
    Approved,
    Edited,
    Rejected,
    Expired,
}

impl From<ApprovalStatus> for ApprovalState {
    fn from(status: ApprovalStatus) -> Self {
        match status {
            ApprovalStatus::Pending => Self::Pending,
            ApprovalStatus::Decided(ApprovalOutcome::Approved) => Self::Approved,
            ApprovalStatus::Decided(ApprovalOutcome::Edited) => Self::Edited,
            ApprovalStatus::Decided(ApprovalOutcome::Rejected) => Self::Rejected,
            ApprovalStatus::Decided(ApprovalOutcome::Expired) => Self::Expired,
        }
    }
}

impl From<ApprovalRecord> for ApprovalView {
    fn from(record: ApprovalRecord) -> Self {
        // `snapshot` (the suspended turn's messages) is deliberately dropped.
        Self {
            id: record.id.to_string(),
            thread_id: record.thread_id.to_string(),
            turn_id: record.turn_id.to_string(),
            agent: record.agent,
            call_id: record.call_id,
            tool: record.tool,
            arguments: record.arguments,
            policy: record.policy,
            approvers: record.approvers,
            status: record.status.into(),
            edited_arguments: record.edited_arguments,
            feedback: record.feedback,
            decided_by: record.decided_by,
            created_at: record.created_at,
            expires_at: record.expires_at,
            decided_at: record.decided_at,
        }
    }
}

/// The approvals the calling client may see (those of its threads and those naming it
/// as an approver), oldest first.
#[utoipa::path(
    get,
    path = "/v1/approvals",
    operation_id = "listApprovals",
    tag = tags::APPROVALS,
    params(ApprovalsQuery),
    responses((status = 200, description = "The approvals.", body = ApprovalList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<ApprovalsQuery>,
) -> Result<Json<ApprovalList>, ApiError> {
    let pending_only = query.status == ApprovalFilter::Pending;
    let approvals = state.hub.list_approvals(&caller.0, pending_only).await?;
    Ok(Json(ApprovalList {
        approvals: approvals.into_iter().map(ApprovalView::from).collect(),
    }))
}

/// One approval; one the client may not see is 404.
#[utoipa::path(
    get,
    path = "/v1/approvals/{id}",
    operation_id = "getApproval",
    tag = tags::APPROVALS,
    params(("id" = String, Path, description = "The approval id (`apr_…`).")),
    responses((status = 200, description = "The approval.", body = ApprovalView))
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ApprovalId>,
) -> Result<Json<ApprovalView>, ApiError> {
    Ok(Json(state.hub.approval(&caller.0, &id).await?.into()))
}

/// Decides a pending approval; the suspended turn resumes in the background (follow
/// it on `GET /v1/threads/{id}/events`).
#[utoipa::path(
    post,
    path = "/v1/approvals/{id}",
    operation_id = "decideApproval",
    tag = tags::APPROVALS,
    params(("id" = String, Path, description = "The approval id (`apr_…`).")),
    request_body = DecideApprovalBody,
    responses(
        (status = 200, description = "The approval, decided.", body = ApprovalView),
        (status = 403, description = "The approval names approvers and the client is \
            not one of them.", body = ErrorEnvelope),
        (status = 409, description = "The approval was already decided (by a person \
            or by expiry).", body = ErrorEnvelope),
    )
)]
pub(crate) async fn decide(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ApprovalId>,
    ApiJson(DecisionRequest(body)): ApiJson<DecisionRequest>,
) -> Result<Json<ApprovalView>, ApiError> {
    let decided = state
        .hub
        .decide_approval(&caller.0, &id, body.into())
        .await?;
    Ok(Json(decided.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<DecideApprovalBody, String> {
        serde_json::from_value::<DecisionRequest>(body)
            .map(|DecisionRequest(body)| body)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_three_decisions_parse() {
        assert_eq!(
            parse(json!({"decision": "approve"})),
            Ok(DecideApprovalBody::Approve {})
        );
        assert_eq!(
            parse(json!({"decision": "edit", "arguments": {"path": "a"}})),
            Ok(DecideApprovalBody::Edit {
                arguments: json!({"path": "a"})
            })
        );
        assert_eq!(
            parse(json!({"decision": "reject"})),
            Ok(DecideApprovalBody::Reject { feedback: None })
        );
        assert_eq!(
            parse(json!({"decision": "reject", "feedback": "no"})),
            Ok(DecideApprovalBody::Reject {
                feedback: Some("no".into())
            })
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for body in [
            json!({}),
            json!({"decision": "approved"}),
            json!({"decision": "APPROVE"}),
            json!({"decision": null}),
            json!({"decision": ["approve"]}),
            json!({"decision": "approve", "feedback": "x"}),
            json!({"decision": "approve", "extra": 1}),
            json!({"decision": "edit"}),
            json!({"decision": "edit", "arguments": {}, "feedback": "x"}),
            json!({"decision": "reject", "feedback": 7}),
            json!({"decision": "reject", "arguments": {}}),
            json!(["approve"]),
            json!("approve"),
        ] {
            assert!(parse(body.clone()).is_err(), "{body} was accepted");
        }
    }
}
