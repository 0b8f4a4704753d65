//! Streams (`SendStreamingMessage` / `message/stream`, `SubscribeToTask` /
//! `tasks/resubscribe`): Server-Sent Events whose `data:` is each a JSON-RPC response
//! holding one item: the task first, then status and artifact updates built from the
//! turn's events (`task.rs`), until the task ends or waits for input. A 0.3 client gets
//! 0.3's items, the last status update marked `final`.

use std::convert::Infallible;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{JsonRpcResponse, StreamResponse, codes};
use agentplane_core::{Event, TurnId};
use agentplane_engine::hub::EventStream;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tokio::sync::mpsc;

use super::call::{Call, find, parse, task_json};
use super::protocol::{Failure, Generation};
use super::task::{StreamMapper, task_of};

/// The stream of a turn just started by this request.
pub(crate) async fn follow_started(
    call: Call,
    turn: TurnId,
    rx: mpsc::UnboundedReceiver<Event>,
) -> Response {
    let found = match find(&call, turn.as_str()).await {
        Ok(found) => found,
        Err(failure) => return call.fail(failure),
    };
    let first = task_of(&found.turn, &[], None);
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (event, rx))
    })
    .boxed();
    respond(call, first, found.turn.thread_id.to_string(), events, ())
}

/// `SubscribeToTask` / `tasks/resubscribe`: the task as stored, then its updates. A
/// task that has ended has nothing to follow (`UnsupportedOperation`, as the SDK's
/// server answers).
pub(crate) async fn subscribe(call: Call, params: Value) -> Response {
    let id = match call.generation {
        Generation::V1 => {
            parse::<agentplane_a2a::wire::SubscribeToTaskRequest>(params).map(|r| r.id)
        }
        Generation::V0_3 => parse::<v0_3::TaskIdParams>(params).map(|r| r.id),
    };
    let found = match id {
        Ok(id) => find(&call, &id).await,
        Err(failure) => Err(failure),
    };
    let found = match found {
        Ok(found) => found,
        Err(failure) => {
            call.log(&failure.outcome());
            return call.fail(failure);
        }
    };
    let events = found.events.clone().unwrap_or_default();
    let first = task_of(&found.turn, &events, None);
    if first.status.state.is_terminal() {
        call.log(&codes::UNSUPPORTED_OPERATION.to_string());
        return call.fail(Failure::rpc(
            codes::UNSUPPORTED_OPERATION,
            format!(
                "task {} is in a terminal state ({:?}); read it with GetTask",
                first.id, first.status.state
            ),
        ));
    }
    // Counted before subscribing, as `GET /v1/threads/{id}/events` is, so a refused
    // stream costs the hub nothing.
    let follower = match call.state.followers.admit(call.caller.client(), call.peer) {
        Ok(follower) => follower,
        Err(refused) => {
            call.log(refused.code().as_str());
            return call.fail(Failure::Http(refused));
        }
    };
    let context = found.turn.thread_id.to_string();
    call.record(&first.id, Some(&context), "ok").await;
    let after = events.last().map_or(0, |e| e.seq);
    let stream: EventStream = match call
        .state
        .hub
        .subscribe(&call.caller, &found.turn.thread_id, after)
        .await
    {
        Ok(stream) => stream,
        Err(e) => return call.fail(e.into()),
    };
    let events = futures_util::stream::unfold(stream, |mut stream| async move {
        match stream.next().await {
            Some(Ok(event)) => Some((event, stream)),
            _ => None,
        }
    })
    .boxed();
    respond(call, first, context, events, follower)
}

struct Streaming<G> {
    first: Option<StreamResponse>,
    /// Whatever must live as long as the client listens: its follower place.
    _keep: G,
    events: BoxStream<'static, Event>,
    mapper: StreamMapper,
    ready: std::collections::VecDeque<StreamResponse>,
}

/// The SSE response: `first` (the task), then what the events map to; `keep` is
/// dropped with the stream.
fn respond<G: Send + 'static>(
    call: Call,
    first: agentplane_a2a::wire::Task,
    context: String,
    events: BoxStream<'static, Event>,
    keep: G,
) -> Response {
    let mapper = StreamMapper::new(&first.id, &context);
    let state = Streaming {
        first: Some(StreamResponse::Task(first)),
        _keep: keep,
        events,
        mapper,
        ready: Default::default(),
    };
    let id = call.id.clone();
    let generation = call.generation;
    let items = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(first) = state.first.take() {
                return Some((first, state));
            }
            if let Some(item) = state.ready.pop_front() {
                return Some((item, state));
            }
            if state.mapper.done {
                return None;
            }
            let event = state.events.next().await?;
            state.ready.extend(state.mapper.map(&event));
        }
    });
    let sse = items.map(move |item| {
        let result = match generation {
            Generation::V1 => serde_json::to_value(&item),
            Generation::V0_3 => match &item {
                StreamResponse::Task(task) => Ok(task_json(Generation::V0_3, task)),
                other => serde_json::to_value(v0_3::event_from_v1(other)),
            },
        }
        .unwrap_or(Value::Null);
        let data =
            serde_json::to_string(&JsonRpcResponse::ok(id.clone(), result)).unwrap_or_default();
        Ok::<_, Infallible>(SseEvent::default().data(data))
    });
    let sse = sse.take_until(call.state.end.clone().cancelled_owned());
    Sse::new(sse)
        .keep_alive(KeepAlive::new().interval(call.state.heartbeat))
        .into_response()
}
