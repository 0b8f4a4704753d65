//! The model gateway: OpenAI's chat completions, Responses API and embeddings, and
//! Anthropic's Messages API, behind the same credentials and `X-Client-ID` as `/v1` (`x-api-key`
//! too, as Anthropic clients send it).
//!
//! Every route is one surface of the same governed call: its handler parses the
//! client's wire format (`chat.rs`, `responses.rs`, `messages.rs`) into one
//! provider-neutral request, asks the hub to admit it under the route's agent name
//! (policies, content, rate limits, budget: a refusal is an HTTP status before any
//! stream starts), then makes it — whole, or streamed in the client's framing
//! (`frames.rs`). Every answer passes the process-wide secret redactor, as turn events
//! do. These routes are not in `/openapi.json`: their contracts are OpenAI's and
//! Anthropic's (ADR 0014, 0060).

mod chat;
mod embeddings;
mod frames;
mod messages;
mod responses;

pub(crate) use chat::CompletionRequest;
pub(crate) use embeddings::EmbeddingsRequest;
pub(crate) use messages::MessagesRequest;
pub(crate) use responses::ResponsesRequest;

use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_engine::gateway::GatewayRoute;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::AppState;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::extract::ApiJson;
use agentplane_engine::error::HubError;
use chat::Chunks;

/// OpenAI's routes, to be mounted behind the auth layer.
pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/openai/v1/chat/completions", post(chat_completions))
        .route("/openai/v1/responses", post(responses))
        .route("/openai/v1/embeddings", post(embed))
        .route("/openai/v1/models", get(models))
}

/// Anthropic's routes, to be mounted behind the auth layer and inside
/// [`anthropic_shaped`], so every error (the credential's too) reads as Anthropic's.
pub(crate) fn anthropic_routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/anthropic/v1/messages", post(messages))
        .route("/anthropic/v1/messages/count_tokens", post(count_tokens))
        .route("/anthropic/v1/models", get(anthropic_models))
}

/// The largest error body [`anthropic_shaped`] rewrites (the envelope is small).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An error response of agentplane's envelope as Anthropic's clients read it: `type:
/// "error"` and `error.type` added, the code, message and details kept.
pub(crate) async fn anthropic_shaped(response: Response) -> Response {
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(response.status().is_client_error() || response.status().is_server_error()) || !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return ApiError::internal(&"an error body too large to reshape").into_response();
    };
    let Ok(mut envelope) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    messages::reshape_error(&mut envelope);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(envelope.to_string()))
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
    caller: Identity,
    ApiJson(body): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let parsed = body.parse()?;
    let call = state
        .model_gateway
        .call(&caller.0, GatewayRoute::ChatCompletions, parsed.request)
        .await?;
    let created = unix_now();
    if !parsed.stream {
        let reply = call.call(&mut |_: &str| {}).await?;
        // `completion` redacts: the model may echo a secret it was given.
        return Ok(Json(chat::completion(&reply, created)).into_response());
    }
    let chunks = Chunks::new(
        call.id().as_str(),
        call.model(),
        created,
        parsed.include_usage,
    );
    Ok(frames::stream(call, chunks))
}

/// `POST /openai/v1/responses`.
async fn responses(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<ResponsesRequest>,
) -> Result<Response, ApiError> {
    let mut parsed = body.parse()?;
    let gateway = &state.model_gateway;
    if let Some(previous) = &parsed.previous {
        // The conversation so far goes before what is new, after the instructions, and
        // is admitted, screened and priced with it.
        let earlier = gateway
            .previous_response(&caller.0, previous)
            .await
            .map_err(|e| match e {
                HubError::NotFound(_) => HubError::NotFound(format!(
                    "previous_response_id `{}` among this client's kept responses (kept {} \
                     days; none made with `store: false`)",
                    parsed
                        .echo
                        .previous_response_id
                        .as_deref()
                        .unwrap_or_default(),
                    agentplane_engine::gateway::KEPT_FOR_SECS / 86_400
                )),
                other => other,
            })?;
        let at = parsed.skip;
        parsed.request.messages.splice(at..at, earlier);
    }
    let mut call = gateway
        .call(&caller.0, GatewayRoute::Responses, parsed.request)
        .await?;
    if parsed.keep {
        call = gateway.keeping(call, parsed.skip);
    }
    parsed.echo.store = call.keeps();
    let created = unix_now();
    if !parsed.stream {
        let reply = call.call(&mut |_: &str| {}).await?;
        return Ok(Json(responses::response(&reply, created, &parsed.echo)).into_response());
    }
    let events =
        responses::ResponseEvents::new(call.id().as_str(), call.model(), created, parsed.echo);
    Ok(frames::stream(call, events))
}

/// `POST /openai/v1/embeddings`.
async fn embed(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<EmbeddingsRequest>,
) -> Result<Response, ApiError> {
    let parsed = body.parse()?;
    let call = state
        .model_gateway
        .call(&caller.0, GatewayRoute::Embeddings, parsed.request)
        .await?;
    let reply = call.embed(parsed.dimensions).await?;
    Ok(Json(embeddings::list(&reply, parsed.base64)).into_response())
}

/// `POST /anthropic/v1/messages`.
async fn messages(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<MessagesRequest>,
) -> Result<Response, ApiError> {
    let parsed = body.parse()?;
    let call = state
        .model_gateway
        .call(&caller.0, GatewayRoute::Messages, parsed.request)
        .await?;
    if !parsed.stream {
        let reply = call.call(&mut |_: &str| {}).await?;
        return Ok(Json(messages::message(&reply)).into_response());
    }
    let events = messages::MessageEvents::new(call.id().as_str(), call.model());
    Ok(frames::stream(call, events))
}

/// `POST /anthropic/v1/messages/count_tokens`: the gateway's estimate of the input
/// (what budgets reserve for it), as the upstream's own count is not asked.
async fn count_tokens(
    State(state): State<AppState>,
    caller: Identity,
    ApiJson(body): ApiJson<MessagesRequest>,
) -> Result<Response, ApiError> {
    let request = body.into_request()?;
    let tokens = state.model_gateway.count_tokens(&caller.0, &request)?;
    Ok(Json(messages::token_count(tokens)).into_response())
}

/// `GET /openai/v1/models`.
async fn models(State(state): State<AppState>, caller: Identity) -> Result<Response, ApiError> {
    let (models, owner) = state.model_gateway.models(&caller.0).await?;
    Ok(Json(chat::model_list(&models, &owner)).into_response())
}

/// `GET /anthropic/v1/models`: the same models, Anthropic-shaped.
async fn anthropic_models(
    State(state): State<AppState>,
    caller: Identity,
) -> Result<Response, ApiError> {
    let (models, _) = state.model_gateway.models(&caller.0).await?;
    Ok(Json(messages::model_list(&models)).into_response())
}
