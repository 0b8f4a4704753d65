//! A hub event stream as an SSE response: `id:` is the event's `seq`, `event:` its kind,
//! `data:` the event as JSON, with heartbeat comments in between.
//!
//! The SSE stream is only a view of the log: events were stored before the hub handed
//! them out, so a client that reconnects with `Last-Event-ID` loses nothing. A failure
//! while streaming becomes one `event: error` whose data is the error envelope (and
//! which has no `id:`, since it is not in the log), and then the stream ends. Whatever
//! must live as long as the client listens (a turn's disconnect guard) is moved into
//! the stream, so a client that goes away drops it.

use std::convert::Infallible;
use std::time::Duration;

use agentplane_engine::hub::EventStream;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// What a stream needs besides its events.
pub(crate) struct StreamOptions {
    /// How often a heartbeat comment is sent while no event comes.
    pub heartbeat: Duration,
    /// Cancelled when the server has shut down: ends streams that never end by
    /// themselves (a thread's follow stream).
    pub end: CancellationToken,
}

struct Streaming<G> {
    events: EventStream,
    /// Held, never read: dropped when the client goes away or the stream ends.
    _keep: G,
    failed: bool,
}

/// The SSE response of `events`, holding `keep` until the stream is dropped.
pub(crate) fn respond<G: Send + 'static>(
    events: EventStream,
    keep: G,
    options: StreamOptions,
) -> Response {
    let state = Streaming {
        events,
        _keep: keep,
        failed: false,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if state.failed {
            return None;
        }
        // The JSON is built once per event for every subscriber of the thread.
        let sse = match state.events.next_shared().await? {
            Ok(shared) => match shared.json() {
                Ok(data) => SseEvent::default()
                    .id(shared.event().seq.to_string())
                    .event(shared.event().payload.kind())
                    .data(&*data),
                Err(e) => {
                    state.failed = true;
                    error_event(&ApiError::internal(&e))
                }
            },
            Err(e) => {
                state.failed = true;
                error_event(&ApiError::from(e))
            }
        };
        Some((Ok::<_, Infallible>(sse), state))
    })
    .take_until(options.end.cancelled_owned());
    Sse::new(stream)
        .keep_alive(
            KeepAlive::new()
                .interval(options.heartbeat)
                .text("heartbeat"),
        )
        .into_response()
}

/// The `event: error` sent when a stream fails.
fn error_event(error: &ApiError) -> SseEvent {
    SseEvent::default()
        .event("error")
        .data(error.envelope().to_string())
}
