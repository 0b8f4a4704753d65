//! Our agents as Agent2Agent (A2A) agents (issue 35, `docs/a2a.md`): the agents named
//! in `[a2a] agents` are published at `/a2a/{agent}` (JSON-RPC binding) with their
//! Agent Card at `/a2a/{agent}/.well-known/agent-card.json`, the first also at the
//! host's `/.well-known/agent-card.json`. With no agent named, nothing here is mounted
//! and every such path is 404.
//!
//! An A2A context is one of our threads and a task one of its turns, started through
//! the hub exactly as `POST /v1/threads/{id}/turns` starts one: the hub decides
//! (tenancy, policies, approvals, budgets), this module maps. Protocol 1.0 clients
//! send `A2A-Version: 1.0` and 1.0's method names (`SendMessage`…); 0.3 clients send
//! 0.3's (`message/send`…) and are answered in 0.3's shapes; a 1.0 method without a
//! 1.x version header is `VersionNotSupported`, as the official SDK's server answers.
//!
//! The card is public (it holds no secret); every JSON-RPC call needs a caller proven
//! as on `/v1` (`auth.rs`), a request naming no client being [`DEFAULT_CLIENT`]'s.

mod call;
mod card;
mod protocol;
mod push;
mod rpc;
mod state;
mod stream;
mod targets;
mod task;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, codes};
use agentplane_engine::executions::WebhookSender;
use agentplane_engine::hub::Hub;
use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::HeaderMap;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::auth::{Gate, Identity};
use crate::error::ApiError;
use crate::followers::Followers;

use call::Call;
use protocol::{Generation, rpc_error};
pub use state::A2aOptions;
use state::A2aState;
use targets::Registry;

/// The client an A2A request acts as when a token or claimed caller names none (a key
/// or an OIDC token names its own).
pub const DEFAULT_CLIENT: &str = "a2a";

/// Where the routes' streams are kept alive, counted and ended.
pub(crate) struct Streams {
    /// How often an idle stream sends a keep-alive.
    pub(crate) heartbeat: Duration,
    /// Cancelled at shutdown: every stream ends.
    pub(crate) end: CancellationToken,
    /// The follower registry every stream following a thread counts against.
    pub(crate) followers: Arc<Followers>,
}

/// The routes, or an empty router when no agent is published.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(
    hub: Arc<Hub>,
    options: A2aOptions,
    gate: Gate,
    streams: Streams,
    webhooks: Option<Arc<dyn WebhookSender>>,
) -> Router<S> {
    if options.agents.is_empty() {
        return Router::new();
    }
    let state = A2aState {
        hub,
        options: Arc::new(options),
        heartbeat: streams.heartbeat,
        end: streams.end,
        webhooks,
        pushes: Arc::new(Registry::default()),
        followers: streams.followers,
    };
    let rpc = Router::new()
        .route("/a2a/{agent}", post(rpc_entry))
        .route_layer(from_fn_with_state(gate, authenticate));
    Router::new()
        .route(
            "/a2a/{agent}/.well-known/agent-card.json",
            get(card::agent_card),
        )
        .route(wire::AGENT_CARD_PATH, get(card::host_card))
        .merge(rpc)
        .with_state(state)
}

/// As `/v1`'s authentication, with [`DEFAULT_CLIENT`] for a request naming no client.
async fn authenticate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match gate.caller(&parts, Some(DEFAULT_CLIENT)).await {
        Ok(caller) => {
            parts.extensions.insert(Identity(caller));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(error) => error.into_response(),
    }
}

/// The generation a request's `A2A-Version` header names (absent: 0.3, as the SDK
/// reads it).
fn header_version(headers: &HeaderMap) -> Result<Generation, String> {
    let Some(raw) = headers.get(wire::VERSION_HEADER) else {
        return Ok(Generation::V0_3);
    };
    let version = raw
        .to_str()
        .map_err(|_| "the A2A-Version header is not text".to_owned())?;
    let version = version.trim();
    if version.is_empty() {
        return Ok(Generation::V0_3);
    }
    match wire::major_minor(version).split('.').next() {
        Some("1") => Ok(Generation::V1),
        Some("0") if wire::major_minor(version) == v0_3::PROTOCOL_VERSION => Ok(Generation::V0_3),
        _ => Err(format!(
            "A2A version '{version}' is not supported; this server speaks 1.0 and 0.3"
        )),
    }
}

/// `POST /a2a/{agent}`: one JSON-RPC request.
async fn rpc_entry(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    identity: Identity,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !state.options.agents.iter().any(|a| a == &agent) {
        return ApiError::not_found(format!("no A2A agent `{agent}` is published here"))
            .into_response();
    }
    // A body sent without a declared length that grows over the limit: the same 413
    // envelope as one whose declared length is over it (`body_limit.rs`).
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            return ApiError::invalid(format!(
                "the request body could not be read: {}",
                rejection.body_text()
            ))
            .with_status(status)
            .into_response();
        }
    };
    let shape = header_version(&headers).unwrap_or(Generation::V1);
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => {
            return rpc_error(
                &Value::Null,
                shape,
                codes::PARSE_ERROR,
                format!("Invalid JSON payload: {e}"),
            );
        }
    };
    let Some(object) = request.as_object() else {
        let message = if request.is_array() {
            "Batch requests are not supported"
        } else {
            "Invalid Request: a JSON-RPC request is an object"
        };
        return rpc_error(&Value::Null, shape, codes::INVALID_REQUEST, message);
    };
    let id = match object.get("id") {
        None | Some(Value::Null) => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        Some(_) => {
            return rpc_error(
                &Value::Null,
                shape,
                codes::INVALID_REQUEST,
                "Invalid request: id must be a string, integer, or null",
            );
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return rpc_error(
            &id,
            shape,
            codes::INVALID_REQUEST,
            "Invalid request: 'jsonrpc' must be exactly '2.0'",
        );
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return rpc_error(&id, shape, codes::INVALID_REQUEST, "Method is required");
    };
    let (generation, method) = if let Some(current) = v0_3::method_to_v1(method) {
        (Generation::V0_3, current)
    } else if let Some(current) = wire::methods::ALL.iter().copied().find(|m| *m == method) {
        match header_version(&headers) {
            Ok(Generation::V1) => (Generation::V1, current),
            Ok(Generation::V0_3) => {
                return rpc_error(
                    &id,
                    Generation::V1,
                    codes::VERSION_NOT_SUPPORTED,
                    format!(
                        "A2A version '0.3' is not supported by {method}: send the \
                         {} header with 1.0, or use 0.3's method names",
                        wire::VERSION_HEADER
                    ),
                );
            }
            Err(message) => {
                return rpc_error(&id, Generation::V1, codes::VERSION_NOT_SUPPORTED, message);
            }
        }
    } else {
        return rpc_error(&id, shape, codes::METHOD_NOT_FOUND, "Method not found");
    };
    let params = object
        .get("params")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let call = Call {
        state,
        caller: identity.0,
        agent,
        generation,
        method,
        id,
        peer: peer.map(|Extension(ConnectInfo(addr))| addr),
    };
    rpc::dispatch(call, params).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use crate::a2a::protocol::Failure;

    fn with(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert(
                wire::VERSION_HEADER,
                HeaderValue::from_str(version).expect("value"),
            );
        }
        headers
    }

    #[test]
    fn the_version_header_names_the_generation() {
        assert_eq!(header_version(&with(None)), Ok(Generation::V0_3));
        assert_eq!(header_version(&with(Some(""))), Ok(Generation::V0_3));
        assert_eq!(header_version(&with(Some("1.0"))), Ok(Generation::V1));
        assert_eq!(header_version(&with(Some("1.2.3"))), Ok(Generation::V1));
        assert_eq!(header_version(&with(Some("0.3"))), Ok(Generation::V0_3));
        assert_eq!(header_version(&with(Some("0.3.0"))), Ok(Generation::V0_3));
        for unsupported in ["0.2", "2.0", "one"] {
            assert!(
                header_version(&with(Some(unsupported))).is_err(),
                "{unsupported}"
            );
        }
    }

    #[test]
    fn errors_are_written_in_each_generations_shape() {
        let v1 = Generation::V1.error(codes::TASK_NOT_FOUND, "Task not found");
        assert!(v1.data.is_some());
        let legacy = Generation::V0_3.error(codes::TASK_NOT_FOUND, "Task not found");
        assert!(legacy.data.is_none());
        assert_eq!(
            Failure::from(agentplane_engine::hub::HubError::NotFound("turn x".into())).outcome(),
            "-32001"
        );
    }
}
