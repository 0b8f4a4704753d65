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

mod card;
mod push;
mod rpc;
mod stream;
mod task;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, JsonRpcError, JsonRpcResponse, codes};
use agentplane_engine::executions::WebhookSender;
use agentplane_engine::hub::Hub;
use agentplane_engine::identity::Caller;
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

/// The client an A2A request acts as when a token or claimed caller names none (a key
/// or an OIDC token names its own).
pub const DEFAULT_CLIENT: &str = "a2a";

/// What `[a2a]` publishes.
#[derive(Debug, Clone, Default)]
pub struct A2aOptions {
    /// The published agents, in the configured order; empty: A2A is off.
    pub agents: Vec<String>,
    /// The absolute, checked workspace of the threads A2A messages create.
    pub workspace: String,
    /// The OIDC provider's discovery document, when `[auth.oidc]` is configured.
    pub oidc_discovery: Option<String>,
}

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct A2aState {
    pub(crate) hub: Arc<Hub>,
    pub(crate) options: Arc<A2aOptions>,
    pub(crate) heartbeat: Duration,
    pub(crate) end: CancellationToken,
    /// The executions' signed webhooks; `None`: no push notifications.
    pub(crate) webhooks: Option<Arc<dyn WebhookSender>>,
    /// The push notification configurations of the tasks started here.
    pub(crate) pushes: Arc<push::Registry>,
    /// The streams following threads, `/v1`'s and ours: a `SubscribeToTask` takes a
    /// place under the same caps as `GET /v1/threads/{id}/events`.
    pub(crate) followers: Arc<Followers>,
}

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
        pushes: Arc::new(push::Registry::default()),
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

/// The protocol generation a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generation {
    V1,
    V0_3,
}

impl Generation {
    pub(crate) fn version(self) -> &'static str {
        match self {
            Self::V1 => wire::PROTOCOL_VERSION,
            Self::V0_3 => v0_3::PROTOCOL_VERSION,
        }
    }

    /// An error object as this generation writes it.
    pub(crate) fn error(self, code: i64, message: impl Into<String>) -> JsonRpcError {
        match self {
            Self::V1 => JsonRpcError::new(code, message),
            Self::V0_3 => JsonRpcError::plain(code, message),
        }
    }
}

/// A JSON-RPC failure, or one our HTTP envelope answers (a role the caller lacks, a
/// rate limit, a budget: as on `/v1`).
#[derive(Debug)]
pub(crate) enum Failure {
    Rpc(i64, String),
    Http(ApiError),
}

impl Failure {
    pub(crate) fn rpc(code: i64, message: impl Into<String>) -> Self {
        Self::Rpc(code, message.into())
    }

    /// The outcome recorded for it: the JSON-RPC code, or our error code.
    pub(crate) fn outcome(&self) -> String {
        match self {
            Self::Rpc(code, _) => code.to_string(),
            Self::Http(e) => e.code().as_str().to_owned(),
        }
    }
}

impl From<agentplane_engine::hub::HubError> for Failure {
    fn from(e: agentplane_engine::hub::HubError) -> Self {
        use agentplane_engine::hub::HubError;
        match e {
            HubError::NotFound(_) => Self::rpc(codes::TASK_NOT_FOUND, "Task not found"),
            HubError::InvalidArgument(m) => Self::Rpc(codes::INVALID_PARAMS, m),
            HubError::Conflict(m) => Self::Rpc(codes::UNSUPPORTED_OPERATION, m),
            other => Self::Http(ApiError::from(other)),
        }
    }
}

/// One call being served.
pub(crate) struct Call {
    pub(crate) state: A2aState,
    pub(crate) caller: Caller,
    pub(crate) agent: String,
    pub(crate) generation: Generation,
    /// The 1.0 name of the method.
    pub(crate) method: &'static str,
    pub(crate) id: Value,
    /// The remote address, for the per-address stream cap (unknown only for a router
    /// served without the accept loop).
    pub(crate) peer: Option<SocketAddr>,
}

impl Call {
    /// A successful answer.
    pub(crate) fn ok(&self, result: Value) -> Response {
        axum::Json(JsonRpcResponse::ok(self.id.clone(), result)).into_response()
    }

    /// A failed answer, recorded where it names a task the caller may see.
    pub(crate) fn fail(&self, failure: Failure) -> Response {
        match failure {
            Failure::Rpc(code, message) => rpc_error(&self.id, self.generation, code, message),
            Failure::Http(e) => e.into_response(),
        }
    }

    /// Records the request in the running turn it names (an `a2a_request` event,
    /// never the message); a turn that has ended cannot take events, so the request is
    /// then only in the access log and the metrics.
    pub(crate) async fn record(&self, task: &str, context: Option<&str>, outcome: &str) {
        tracing::info!(
            target: "agentplane::a2a",
            agent = %self.agent,
            method = self.method,
            version = self.generation.version(),
            task,
            outcome,
            "a2a request"
        );
        let Ok(turn) = agentplane_core::TurnId::parse(task) else {
            return;
        };
        let payload = agentplane_core::EventPayload::A2aRequest {
            direction: "in".into(),
            method: self.wire_method().to_owned(),
            task: Some(task.to_owned()),
            context: context.map(str::to_owned),
            protocol_version: self.generation.version().to_owned(),
            outcome: outcome.to_owned(),
        };
        match self
            .state
            .hub
            .record_request(&self.caller, &turn, payload)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::debug!(%turn, "the task has ended: its request is logged only"),
            Err(e) => tracing::debug!(%turn, error = %e, "an a2a request could not be recorded"),
        }
    }

    /// The method as the client named it.
    pub(crate) fn wire_method(&self) -> &'static str {
        match self.generation {
            Generation::V1 => self.method,
            Generation::V0_3 => v0_3::method_from_v1(self.method).unwrap_or(self.method),
        }
    }

    /// Logs a request that names no task.
    pub(crate) fn log(&self, outcome: &str) {
        tracing::info!(
            target: "agentplane::a2a",
            agent = %self.agent,
            method = self.wire_method(),
            version = self.generation.version(),
            outcome,
            "a2a request"
        );
    }
}

/// A JSON-RPC error response (HTTP 200, as JSON-RPC over HTTP answers).
fn rpc_error(
    id: &Value,
    generation: Generation,
    code: i64,
    message: impl Into<String>,
) -> Response {
    axum::Json(JsonRpcResponse::err(
        id.clone(),
        generation.error(code, message),
    ))
    .into_response()
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
