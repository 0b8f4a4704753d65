//! Threads: create, list, read, delete; a thread's history; compaction of its turns.
//!
//! Every call is scoped to the calling client by the hub: another client's thread is
//! 404, exactly like one that does not exist.

use agentplane_core::ThreadId;
use agentplane_engine::hub::CreateThread;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;

use super::tags;
use crate::AppState;
use crate::auth::ClientId;
use crate::body::{CompactionView, CreateThreadBody, HistoryView, ThreadList, ThreadView};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery, Flag, IdPath};

/// Creates a thread owned by the calling client.
#[utoipa::path(
    post,
    path = "/v1/threads",
    operation_id = "createThread",
    tag = tags::THREADS,
    request_body = CreateThreadBody,
    responses(
        (status = 201, description = "The new thread.", body = ThreadView),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    client: ClientId,
    ApiJson(body): ApiJson<CreateThreadBody>,
) -> Result<(StatusCode, Json<ThreadView>), ApiError> {
    let thread = state
        .hub
        .create_thread_on(
            client.as_str(),
            CreateThread {
                agent: body.agent,
                cwd: body.cwd,
                title: body.title,
            },
            body.agent_version.as_deref(),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(thread.into())))
}

/// The calling client's threads, newest first.
#[utoipa::path(
    get,
    path = "/v1/threads",
    operation_id = "listThreads",
    tag = tags::THREADS,
    responses((status = 200, description = "The client's threads.", body = ThreadList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    client: ClientId,
) -> Result<Json<ThreadList>, ApiError> {
    let threads = state.hub.list_threads(client.as_str()).await?;
    Ok(Json(ThreadList {
        threads: threads.into_iter().map(ThreadView::from).collect(),
    }))
}

/// One thread.
#[utoipa::path(
    get,
    path = "/v1/threads/{id}",
    operation_id = "getThread",
    tag = tags::THREADS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    responses((status = 200, description = "The thread.", body = ThreadView))
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    client: ClientId,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<ThreadView>, ApiError> {
    Ok(Json(state.hub.thread(client.as_str(), &id).await?.into()))
}

/// Deletes a thread: gone for the client, kept in the log for audit.
#[utoipa::path(
    delete,
    path = "/v1/threads/{id}",
    operation_id = "deleteThread",
    tag = tags::THREADS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 409, description = "A turn of the thread is running.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    client: ClientId,
    IdPath(id): IdPath<ThreadId>,
) -> Result<StatusCode, ApiError> {
    state.hub.delete_thread(client.as_str(), &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What `GET /v1/threads/{id}/history` may include.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HistoryQuery {
    /// `1` (or `true`) adds each turn's events.
    #[param(value_type = Option<String>, pattern = "^(0|1|true|false)$")]
    #[serde(default)]
    include_events: Flag,
    /// `1` (or `true`) adds internal (compaction) turns.
    #[param(value_type = Option<String>, pattern = "^(0|1|true|false)$")]
    #[serde(default)]
    include_internal: Flag,
}

/// A thread's turns, optionally with their events and the internal turns.
#[utoipa::path(
    get,
    path = "/v1/threads/{id}/history",
    operation_id = "getHistory",
    tag = tags::THREADS,
    params(("id" = String, Path, description = "The thread id (`thr_…`)."), HistoryQuery),
    responses((status = 200, description = "The thread and its turns.", body = HistoryView))
)]
pub(crate) async fn history(
    State(state): State<AppState>,
    client: ClientId,
    IdPath(id): IdPath<ThreadId>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryView>, ApiError> {
    let history = state
        .hub
        .history(
            client.as_str(),
            &id,
            query.include_events.is_on(),
            query.include_internal.is_on(),
        )
        .await?;
    Ok(Json(history.into()))
}

/// Summarizes the thread's turns into its summary with an internal turn, and returns
/// the summary. Waits for the model.
#[utoipa::path(
    post,
    path = "/v1/threads/{id}/compact",
    operation_id = "compactThread",
    tag = tags::THREADS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    responses(
        (status = 200, description = "The new summary.", body = CompactionView),
        (status = 409, description = "A turn is running, the server is shutting down, or the compaction did not finish.", body = crate::error::ErrorEnvelope),
        (status = 429, description = "The model server is rate limiting.", body = crate::error::ErrorEnvelope),
        (status = 502, description = "The model server failed.", body = crate::error::ErrorEnvelope),
        (status = 504, description = "The model server timed out.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn compact(
    State(state): State<AppState>,
    client: ClientId,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<CompactionView>, ApiError> {
    Ok(Json(state.hub.compact(client.as_str(), &id).await?.into()))
}
