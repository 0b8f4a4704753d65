//! The OpenAI-compatible gateway: `POST /openai/v1/chat/completions` (one document, or
//! an SSE stream of chunks) and `GET /openai/v1/models`, behind the same bearer token
//! and `X-Client-ID` as `/v1`.
//!
//! The handler parses the OpenAI body (`gateway_wire.rs`), asks the hub to admit the
//! call (policies, rate limits, budget: a refusal is an HTTP status in the standard
//! envelope, before any stream starts), then makes it. A streamed answer forwards text
//! deltas as they arrive; a failure after the stream began is one `data:` frame with
//! the error envelope. A client that leaves mid-stream stops the forwarding; the call
//! goes on for [`ABANDONED_GRACE`] to be charged its usage, else the worst case. Every answer passes the process-wide secret redactor, as turn
//! events do: a `[secrets]` value or the model API key the model echoes goes out as
//! `[REDACTED:NAME]`, also when the deltas split it. These routes are not in `/openapi.json`: their contract is
//! OpenAI's (ADR 0014).

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_core::secret;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::mpsc;

use super::gateway_wire::{self, Chunks, CompletionRequest};
use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::extract::ApiJson;

/// The gateway's routes, to be mounted behind the auth layer.
pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/openai/v1/chat/completions", post(chat_completions))
        .route("/openai/v1/models", get(models))
}

/// How long a streamed call goes on after its client left, for the usage it reports.
const ABANDONED_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Now, in Unix seconds (OpenAI's `created`).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `POST /openai/v1/chat/completions`.
async fn chat_completions(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let parsed = body.parse()?;
    let call = state.model_gateway.call(&caller.0, parsed.request).await?;
    let created = unix_now();
    if !parsed.stream {
        let reply = call.call(&mut |_: &str| {}).await?;
        // `completion` redacts: the model may echo a secret it was given.
        return Ok(Json(gateway_wire::completion(&reply, created)).into_response());
    }
    let chunks = Chunks::new(call.id().as_str(), call.model(), created);
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    // The receiver is still held here, so this send cannot fail.
    let _ = tx.send(chunks.role());
    let include_usage = parsed.include_usage;
    tokio::spawn(async move {
        let deltas = tx.clone();
        // Text that may be the start of a secret waits here for the next delta.
        let redactor = secret::current();
        let mut held = secret::HeldBack::default();
        let mut on_text = |text: &str| {
            if let Some(safe) = held.push(&redactor, text) {
                // Fails only once the client has gone; `closed()` below ends the call then.
                let _ = deltas.send(chunks.text(&safe));
            }
        };
        let answered = {
            let called = call.call(&mut on_text);
            tokio::pin!(called);
            tokio::select! {
                answered = &mut called => answered,
                () = tx.closed() => {
                    // The client left. The model was asked: the call goes on a little
                    // longer so it is charged the usage it reports; past that, dropping
                    // it charges the worst case (`governance::meter`), never nothing.
                    let _ = tokio::time::timeout(ABANDONED_GRACE, &mut called).await;
                    return;
                }
            }
        };
        if let Some(rest) = held.finish(&redactor) {
            let _ = tx.send(chunks.text(&rest));
        }
        let last = match answered {
            Ok(reply) => chunks.end(&reply.response, include_usage),
            Err(e) => gateway_wire::error_frame(&ApiError::from(e)),
        };
        let _ = tx.send(last);
    });
    // Ends when the call's task drops its sender.
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), rx))
    });
    Ok(crate::sse::event_stream(Body::from_stream(stream)))
}

/// `GET /openai/v1/models`.
async fn models(State(state): State<AppState>, caller: Identity) -> Result<Response, ApiError> {
    let (models, owner) = state.model_gateway.models(&caller.0).await?;
    Ok(Json(gateway_wire::model_list(&models, &owner)).into_response())
}
