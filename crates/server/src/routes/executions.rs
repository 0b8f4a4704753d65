//! Executions: turns triggered now and run later by the worker pool.
//! `POST /v1/executions` queues one (202), `GET /v1/executions/{id}` polls it,
//! `GET /v1/executions` lists the client's, `POST /v1/executions/{id}/cancel` cancels.
//!
//! The body of `GET` is the engine's `execution_json`, the same object a webhook's
//! `execution` carries, so the two can never differ; [`ExecutionView`] only documents
//! it (a test keeps the two in step). Validation, idempotency, tenancy and the queue
//! are the engine's (`agentplane_engine::executions`).

use agentplane_core::{ExecutionId, ThreadId};
use agentplane_engine::executions::{ListExecutions, SubmitExecution, execution_json};
use agentplane_engine::ports::ExecutionStatus;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, ApiQuery, IdPath};

/// Set on a `POST /v1/executions` answer that returns an earlier execution.
const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// How many executions a list returns unless asked.
const DEFAULT_LIMIT: usize = 50;

/// `POST /v1/executions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateExecutionBody {
    /// The agent's name, as listed by `GET /v1/agents`.
    agent: String,
    /// What the agent is asked: not blank, at most 65,536 characters.
    #[schema(min_length = 1, max_length = 65536, pattern = "\\S")]
    input: String,
    /// Run as a turn of this thread of the client (same agent). Without it, a thread
    /// is created for the execution.
    #[serde(default)]
    #[schema(example = "thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    thread_id: Option<String>,
    /// Without `thread_id`: the working directory of the created thread (absolute,
    /// existing); without either, a fresh directory beside the database.
    #[serde(default)]
    #[schema(pattern = "^/", min_length = 1)]
    cwd: Option<String>,
    /// Where the final state is POSTed, signed (see docs/executions.md). Needs
    /// `[executions] webhook_secret`; private addresses need `allow_private_webhooks`.
    #[serde(default)]
    #[schema(max_length = 2048)]
    webhook_url: Option<String>,
    /// The same key (per client) with the same body returns the first execution; with
    /// another body it is 409.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    idempotency_key: Option<String>,
}

/// Which executions `GET /v1/executions` lists. Unknown parameters are refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecutionsQuery {
    /// Only executions in this status.
    #[param(inline, value_type = Option<ExecutionState>, nullable = false)]
    status: Option<ExecutionState>,
    /// Only executions of this agent.
    #[param(nullable = false)]
    agent: Option<String>,
    /// Only executions of this thread.
    #[param(nullable = false)]
    thread_id: Option<String>,
    /// At most this many, newest first (1 to 1,000; default 50).
    #[param(minimum = 1, maximum = 1000, nullable = false)]
    limit: Option<usize>,
}

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ExecutionState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Interrupted,
}

impl From<ExecutionState> for ExecutionStatus {
    fn from(state: ExecutionState) -> Self {
        match state {
            ExecutionState::Queued => Self::Queued,
            ExecutionState::Running => Self::Running,
            ExecutionState::Succeeded => Self::Succeeded,
            ExecutionState::Failed => Self::Failed,
            ExecutionState::Cancelled => Self::Cancelled,
            ExecutionState::Interrupted => Self::Interrupted,
        }
    }
}

/// An execution: what `GET /v1/executions/{id}` returns and a webhook's `execution`.
#[allow(dead_code)] // Documents `execution_json`; never built.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionView {
    #[schema(example = "exec_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    id: String,
    status: ExecutionState,
    agent: String,
    /// The thread whose turns the attempts are.
    thread_id: String,
    /// The turn of the latest attempt, once begun.
    turn_id: Option<String>,
    /// Attempts begun so far.
    attempts: u32,
    max_attempts: u32,
    /// The successful turn's result (`finish_task`'s arguments, or `{"text": …}`).
    #[schema(value_type = Option<Object>)]
    output: Option<Value>,
    /// The final failure when `failed`; the one being retried when `queued` again.
    error: Option<ExecutionErrorView>,
    idempotency_key: Option<String>,
    webhook_url: Option<String>,
    /// The client asked to cancel it while it ran.
    cancel_requested: bool,
    /// RFC 3339, UTC.
    created_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
    /// When a queued execution is due.
    next_attempt_at: Option<String>,
}

/// Why an execution failed.
#[allow(dead_code)] // See `ExecutionView`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionErrorView {
    /// One of the envelope's codes.
    #[schema(example = "UPSTREAM_UNAVAILABLE")]
    code: String,
    message: String,
}

/// `GET /v1/executions`.
#[allow(dead_code)] // Documents the list; built as JSON.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionList {
    /// Newest first.
    executions: Vec<ExecutionView>,
}

fn parse_thread(id: Option<String>) -> Result<Option<ThreadId>, ApiError> {
    id.map(|id| ThreadId::parse(&id).map_err(|_| ApiError::not_found("thread not found")))
        .transpose()
}

/// Queues an execution; 202 with the execution, which workers then run.
#[utoipa::path(
    post,
    path = "/v1/executions",
    operation_id = "createExecution",
    tag = tags::EXECUTIONS,
    request_body = CreateExecutionBody,
    responses(
        (status = 202, description = "Queued (or, with `Idempotent-Replayed: true`, the \
            earlier execution with this idempotency key).", body = ExecutionView),
        (status = 404, description = "`thread_id` is not a thread of this client.",
            body = ErrorEnvelope),
        (status = 409, description = "The idempotency key was used with another body, or \
            the server is shutting down.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<CreateExecutionBody>,
) -> Result<Response, ApiError> {
    let executions = state.executions()?;
    let submitted = executions
        .submit(
            &caller.0,
            SubmitExecution {
                agent: body.agent,
                input: body.input,
                thread: parse_thread(body.thread_id)?,
                cwd: body.cwd,
                webhook_url: body.webhook_url,
                idempotency_key: body.idempotency_key,
            },
        )
        .await?;
    let mut response = (
        StatusCode::ACCEPTED,
        Json(execution_json(&submitted.execution)),
    )
        .into_response();
    let headers = response.headers_mut();
    if let Ok(location) =
        HeaderValue::from_str(&format!("/v1/executions/{}", submitted.execution.id))
    {
        headers.insert(header::LOCATION, location);
    }
    if !submitted.created {
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// The client's executions, newest first.
#[utoipa::path(
    get,
    path = "/v1/executions",
    operation_id = "listExecutions",
    tag = tags::EXECUTIONS,
    params(ExecutionsQuery),
    responses((status = 200, description = "The executions.", body = ExecutionList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<ExecutionsQuery>,
) -> Result<Json<Value>, ApiError> {
    let executions = state.executions()?;
    let thread = match parse_thread(query.thread_id) {
        Ok(thread) => thread,
        // A malformed thread id matches no execution.
        Err(_) => return Ok(Json(serde_json::json!({"executions": []}))),
    };
    let records = executions
        .list(
            &caller.0,
            ListExecutions {
                status: query.status.map(Into::into),
                agent: query.agent,
                thread,
                limit: query.limit.unwrap_or(DEFAULT_LIMIT),
            },
        )
        .await?;
    Ok(Json(serde_json::json!({
        "executions": records.iter().map(execution_json).collect::<Vec<_>>(),
    })))
}

/// One execution: its status, and its output once it succeeded.
#[utoipa::path(
    get,
    path = "/v1/executions/{id}",
    operation_id = "getExecution",
    tag = tags::EXECUTIONS,
    params(("id" = String, Path, description = "The execution id (`exec_…`).")),
    responses((status = 200, description = "The execution.", body = ExecutionView))
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ExecutionId>,
) -> Result<Json<Value>, ApiError> {
    let record = state.executions()?.get(&caller.0, &id).await?;
    Ok(Json(execution_json(&record)))
}

/// Cancels an execution: a queued one at once (`cancelled`), a running one by
/// cancelling its turn (`cancel_requested`, then `cancelled` when the turn ends).
#[utoipa::path(
    post,
    path = "/v1/executions/{id}/cancel",
    operation_id = "cancelExecution",
    tag = tags::EXECUTIONS,
    params(("id" = String, Path, description = "The execution id (`exec_…`).")),
    responses(
        (status = 202, description = "Cancelled, or being cancelled.", body = ExecutionView),
        (status = 409, description = "The execution has already finished.",
            body = ErrorEnvelope),
    )
)]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ExecutionId>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let record = state.executions()?.cancel(&caller.0, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(execution_json(&record))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_core::{ErrorCode, TurnId};
    use agentplane_engine::ports::{ExecutionFailure, ExecutionRecord};
    use utoipa::PartialSchema;
    use utoipa::openapi::{RefOr, Schema};

    #[test]
    fn the_view_documents_exactly_what_execution_json_returns() {
        let record = ExecutionRecord {
            id: ExecutionId::new(),
            client_id: "c".into(),
            agent: "chat".into(),
            input: "hi".into(),
            thread_id: ThreadId::new(),
            turn_id: Some(TurnId::new()),
            status: ExecutionStatus::Failed,
            attempts: 1,
            max_attempts: 3,
            output: None,
            error: Some(ExecutionFailure {
                code: ErrorCode::Timeout,
                message: "slow".into(),
            }),
            webhook_url: None,
            idempotency_key: None,
            fingerprint: "{}".into(),
            cancel_requested: false,
            created_at: "t".into(),
            updated_at: "t".into(),
            started_at: None,
            finished_at: None,
            next_attempt_at: None,
        };
        let json = execution_json(&record);
        let mut keys: Vec<_> = json.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        let RefOr::T(Schema::Object(schema)) = ExecutionView::schema() else {
            panic!("an object schema");
        };
        let mut documented: Vec<_> = schema.properties.keys().cloned().collect();
        documented.sort();
        assert_eq!(keys, documented);
        assert_eq!(json["status"], "failed");
        assert_eq!(json["error"]["code"], "TIMEOUT");
        for status in ExecutionStatus::ALL {
            let state: ExecutionState =
                serde_json::from_value(Value::from(status.as_str())).expect("a state");
            assert_eq!(ExecutionStatus::from(state), status);
        }
    }
}
