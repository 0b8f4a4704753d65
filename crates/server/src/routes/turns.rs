//! Turns: start one (its events streamed back as SSE) and cancel one.
//!
//! A failure before the turn starts (unknown thread, busy thread, empty input, no
//! model) is an ordinary JSON error response; once the stream is open, a failure is an
//! SSE `error` event. The turn's disconnect guard rides inside the response stream:
//! a client that goes away declines the turn's pending permissions (fail-closed), while
//! the turn itself runs on and stays in the log.

use agentplane_core::{ThreadId, TurnId};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::{Cancelled, StartTurnBody, StreamedEvent};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, IdPath};
use crate::sse;

/// Starts a turn and streams its events, from `turn_started` to `turn_completed`.
#[utoipa::path(
    post,
    path = "/v1/threads/{id}/turns",
    operation_id = "startTurn",
    tag = tags::TURNS,
    params(("id" = String, Path, description = "The thread id (`thr_…`).")),
    request_body = StartTurnBody,
    responses(
        (status = 200, description = "The turn's events as Server-Sent Events: `id:` is the \
            event's `seq`, `event:` its kind, `data:` the event (an `EventView`) as JSON. A \
            failure while streaming is an `error` event whose data is the error envelope.",
            content_type = "text/event-stream", body = StreamedEvent),
        (status = 409, description = "Another turn of the thread is running, or the server is shutting down.", body = ErrorEnvelope),
        (status = 429, description = "The model server is rate limiting.", body = ErrorEnvelope),
        (status = 502, description = "The model server failed.", body = ErrorEnvelope),
        (status = 504, description = "The model server timed out.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(thread): IdPath<ThreadId>,
    ApiJson(body): ApiJson<StartTurnBody>,
) -> Result<Response, ApiError> {
    let started = state
        .hub
        .start_turn_sized(&caller.0, &thread, body.input, body.size.map(Into::into))
        .await?;
    Ok(sse::respond(
        started.events,
        started.guard,
        state.stream_options(),
    ))
}

/// Cancels a running turn; its stream ends with `turn_completed` (`cancelled`).
#[utoipa::path(
    post,
    path = "/v1/turns/{id}/cancel",
    operation_id = "cancelTurn",
    tag = tags::TURNS,
    params(("id" = String, Path, description = "The turn id (`turn_…`).")),
    responses(
        (status = 202, description = "Cancellation requested.", body = Cancelled),
        (status = 409, description = "The turn is not running.", body = ErrorEnvelope),
    )
)]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(turn): IdPath<TurnId>,
) -> Result<(StatusCode, Json<Cancelled>), ApiError> {
    state.hub.cancel_turn(&caller.0, &turn).await?;
    Ok((StatusCode::ACCEPTED, Json(Cancelled { cancelled: true })))
}
