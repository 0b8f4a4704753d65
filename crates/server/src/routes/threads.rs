//! Threads: create, list, read, delete; a thread's history; compaction of its turns;
//! the head of its audit chain.
//!
//! Every call is scoped to the calling client by the hub: another client's thread is
//! 404, exactly like one that does not exist.

use agentplane_core::ThreadId;
use agentplane_engine::hub::{CreateThread, MAX_THREAD_PAGE};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::{
    CompactionView, CreateThreadBody, HistoryView, ThreadAuditView, ThreadList, ThreadView,
};
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
    caller: Identity,
    ApiJson(body): ApiJson<CreateThreadBody>,
) -> Result<(StatusCode, Json<ThreadView>), ApiError> {
    let thread = state
        .hub
        .create_thread_on(
            &caller.0,
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

/// Which page of threads.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadsQuery {
    /// The most threads in the answer: 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, nullable = false)]
    limit: Option<i64>,
    /// `next_cursor` of the previous page; absent for the first.
    #[param(nullable = false)]
    cursor: Option<String>,
}

/// The default page size of `GET /v1/threads`.
const DEFAULT_PAGE: usize = 100;

/// The calling client's threads, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/threads",
    operation_id = "listThreads",
    tag = tags::THREADS,
    params(ThreadsQuery),
    responses(
        (status = 200, description = "A page of the client's threads; `next_cursor` \
            fetches the next one.", body = ThreadList),
        (status = 400, description = "A `limit` out of range or a bad `cursor`.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Identity,
    ApiQuery(query): ApiQuery<ThreadsQuery>,
) -> Result<Json<ThreadList>, ApiError> {
    let limit = match query.limit {
        None => DEFAULT_PAGE,
        Some(limit) => usize::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_THREAD_PAGE).contains(l))
            .ok_or_else(|| ApiError::invalid(format!("`limit` must be 1 to {MAX_THREAD_PAGE}")))?,
    };
    let cursor = query
        .cursor
        .map(|c| {
            ThreadId::parse(&c).map_err(|_| {
                ApiError::invalid("`cursor` must be a `next_cursor` this API returned")
            })
        })
        .transpose()?;
    let page = state
        .hub
        .list_threads_page(&caller.0, limit, cursor.as_ref())
        .await?;
    Ok(Json(ThreadList {
        threads: page.threads.into_iter().map(ThreadView::from).collect(),
        next_cursor: page.next.map(|id| id.as_str().to_owned()),
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
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<ThreadView>, ApiError> {
    Ok(Json(state.hub.thread(&caller.0, &id).await?.into()))
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
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
) -> Result<StatusCode, ApiError> {
    state.hub.delete_thread(&caller.0, &id).await?;
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
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryView>, ApiError> {
    let history = state
        .hub
        .history(
            &caller.0,
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
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<CompactionView>, ApiError> {
    Ok(Json(state.hub.compact(&caller.0, &id).await?.into()))
}

/// The head of the thread's tamper-evident audit chain (`docs/audit.md`): the last
/// chained event's seq and hash, for an outside system to anchor.
#[utoipa::path(
    get,
    path = "/v1/threads/{id}/audit",
    operation_id = "getThreadAudit",
    tag = tags::THREADS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    responses((status = 200, description = "The chain's head.", body = ThreadAuditView))
)]
pub(crate) async fn audit(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(id): IdPath<ThreadId>,
) -> Result<Json<ThreadAuditView>, ApiError> {
    Ok(Json(
        state.reports.thread_audit(&caller.0, &id).await?.into(),
    ))
}
