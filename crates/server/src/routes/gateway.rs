//! The OpenAI-compatible gateway: `POST /openai/v1/chat/completions` (one document, or
//! an SSE stream of chunks) and `GET /openai/v1/models`, behind the same bearer token
//! and `X-Client-ID` as `/v1`.
//!
//! The handler parses the OpenAI body (`gateway_wire.rs`), asks the hub to admit the
//! call (policies, rate limits, budget: a refusal is an HTTP status in the standard
//! envelope, before any stream starts), then makes it. A streamed answer forwards text
//! deltas as they arrive; a failure after the stream began is one `data:` frame with
//! the error envelope. A client that leaves mid-stream ends the call and releases its
//! budget reservation. These routes are not in `/openapi.json`: their contract is
//! OpenAI's (ADR 0014).

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::mpsc;

use super::gateway_wire::{self, Chunks, CompletionRequest};
use crate::AppState;
use crate::auth::ClientId;
use crate::error::ApiError;
use crate::extract::ApiJson;

/// The gateway's routes, to be mounted behind the auth layer.
pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/openai/v1/chat/completions", post(chat_completions))
        .route("/openai/v1/models", get(models))
}

/// Now, in Unix seconds (OpenAI's `created`).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `POST /openai/v1/chat/completions`.
async fn chat_completions(
    State(state): State<AppState>,
    client: ClientId,
    ApiJson(body): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let parsed = body.parse()?;
    let call = state.hub.gateway(client.as_str(), parsed.request).await?;
    let created = unix_now();
    if !parsed.stream {
        let reply = call.call(&mut |_: &str| {}).await?;
        return Ok(Json(gateway_wire::completion(&reply, created)).into_response());
    }
    let chunks = Chunks::new(call.id().as_str(), call.model(), created);
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    // The receiver is still held here, so this send cannot fail.
    let _ = tx.send(chunks.role());
    let include_usage = parsed.include_usage;
    tokio::spawn(async move {
        let deltas = tx.clone();
        let mut on_text = |text: &str| {
            // Fails only once the client has gone; `closed()` below ends the call then.
            let _ = deltas.send(chunks.text(text));
        };
        let answered = tokio::select! {
            answered = call.call(&mut on_text) => answered,
            // The client left: dropping the call releases its budget reservation.
            () = tx.closed() => return,
        };
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
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// `GET /openai/v1/models`.
async fn models(State(state): State<AppState>, _client: ClientId) -> Result<Response, ApiError> {
    let models = state.hub.gateway_models().await?;
    // The provider that listed them: the first of the gateway's chain that answered is
    // not reported back, so name the first configured one.
    let owner = state
        .hub
        .deps()
        .providers
        .names()
        .next()
        .unwrap_or("agentplane")
        .to_owned();
    Ok(Json(gateway_wire::model_list(&models, &owner)).into_response())
}
