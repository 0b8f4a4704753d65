//! `GET /v1/threads/{id}/events`: a thread's stored events after a `seq`, then its live
//! ones, each exactly once: what a client uses to reconnect to a running turn.
//!
//! The position comes from `Last-Event-ID` (what browsers' `EventSource` sends on
//! reconnect) or `?after=SEQ`; the header wins when both are given, since it is the
//! newer position of the same client. The stream follows the thread until the client
//! leaves or the server shuts down.

use std::net::SocketAddr;

use agentplane_core::ThreadId;
use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::tags;
use crate::AppState;
use crate::auth::Identity;
use crate::body::StreamedEvent;
use crate::error::ApiError;
use crate::extract::{ApiQuery, IdPath};
use crate::sse;

/// Where a replay starts.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    /// Replay events with a greater `seq` (default 0: from the start).
    #[param(minimum = 0, nullable = false)]
    after: Option<i64>,
}

/// Replays a thread's events after a position, then follows live ones.
#[utoipa::path(
    get,
    path = "/v1/threads/{id}/events",
    operation_id = "followEvents",
    tag = tags::TURNS,
    params(
        ("id" = String, Path, description = "The thread id (`thr_…`)."),
        EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "The last `seq` received; wins over `after`.", minimum = 0, nullable = false),
    ),
    responses(
        (status = 200, description = "The thread's events as Server-Sent Events, as for a \
            turn, followed until the client disconnects or the server shuts down.",
            content_type = "text/event-stream", body = StreamedEvent),
        (status = 429, description = "Too many event streams open (per client, per \
            address or in total): `RATE_LIMITED`, with `Retry-After`.", body = crate::error::ErrorEnvelope),
    )
)]
pub(crate) async fn follow(
    State(state): State<AppState>,
    caller: Identity,
    IdPath(thread): IdPath<ThreadId>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Result<Response, ApiError> {
    // Seqs are positive 64-bit signed integers, as the document says. Both positions
    // are checked, even the one that loses.
    let after = u64::try_from(query.after.unwrap_or(0))
        .map_err(|_| ApiError::invalid("`after` must not be negative"))?;
    let after = match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| ApiError::invalid("Last-Event-ID must be an event's seq"))?,
        None => after,
    };
    // Counted before subscribing, so a refused stream costs the hub nothing.
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr);
    let follower = state.followers.admit(caller.0.client(), peer)?;
    let events = state.hub.subscribe(&caller.0, &thread, after).await?;
    Ok(sse::respond(events, follower, state.stream_options()))
}
