//! The HTTP interface of agentplane: the hub's threads, turns, event streams and
//! permissions over JSON and SSE, with an OpenAPI document of itself.
//!
//! An interface, not an application: handlers extract, call one [`Hub`] method and
//! map the result. No business rule, no SQL and no adapter lives here; tenancy,
//! validation of what a request means, and fail-closed permissions are the hub's. This
//! crate owns what is HTTP's alone: routing, the error envelope, bearer auth and the
//! client id, SSE framing and heartbeats, body limits, access logs, the bind policy,
//! graceful shutdown, and serving the web UI's embedded files (`routes/ui.rs`).
//!
//! ```text
//! GET    /healthz                          {"ok":true}
//! GET    /openapi.json                     this API, generated from the handlers
//! GET    /v1/agents                        agents and their model status
//! POST   /v1/threads                       create (201)
//! GET    /v1/threads                       the client's threads
//! GET    /v1/threads/{id}                  one thread
//! DELETE /v1/threads/{id}                  delete (204)
//! POST   /v1/threads/{id}/turns            start a turn; its events as SSE
//! GET    /v1/threads/{id}/events           replay after a seq, then follow (SSE)
//! GET    /v1/threads/{id}/history          turns, optionally with events/internal ones
//! POST   /v1/threads/{id}/compact          summarize the thread
//! POST   /v1/turns/{id}/cancel             cancel a running turn (202)
//! POST   /v1/permissions/{id}              approve or decline a tool call
//! GET    /v1/approvals                     approvals waiting (`?status=all`: every one)
//! GET    /v1/approvals/{id}                one approval
//! POST   /v1/approvals/{id}                approve, edit and approve, or reject a held call
//! GET    /v1/policies                      the policies in force, with sources
//! POST   /v1/policies/explain              how the policies decide one request
//! GET    /v1/costs                         model call costs, grouped
//! POST   /v1/executions                    queue an execution (202)
//! GET    /v1/executions                    the client's executions (filters)
//! GET    /v1/executions/{id}               poll one: status and output
//! POST   /v1/executions/{id}/cancel        cancel a queued or running one (202)
//! POST   /v1/keys                          create an API key (admins; 201, secret once)
//! GET    /v1/keys                          the API keys, never a secret (admins)
//! POST   /v1/keys/{id}/revoke              revoke a key, at once on every replica
//! GET    /metrics                          Prometheus metrics
//! POST   /mcp  (GET, DELETE)               the agents as MCP tools (streamable HTTP)
//! POST   /mcp/gateway  (GET, DELETE)       the MCP gateway: configured MCP servers, governed
//! POST   /a2a/{agent}                      an `[a2a]` agent over A2A's JSON-RPC binding
//! GET    /a2a/{agent}/.well-known/agent-card.json   its Agent Card (public)
//! GET    /.well-known/agent-card.json      the first `[a2a]` agent's card (public)
//! GET    /  and  /assets/{name}            the web UI (embedded; no token: it holds no data)
//! POST   /openai/v1/chat/completions       OpenAI-compatible model calls (gateway)
//! POST   /openai/v1/responses              OpenAI's Responses API (gateway)
//! POST   /openai/v1/embeddings             embeddings, priced by input tokens
//! GET    /openai/v1/models                 the model server's models, OpenAI-shaped
//! POST   /anthropic/v1/messages            Anthropic's Messages API (gateway)
//! POST   /anthropic/v1/messages/count_tokens  the input's estimated tokens
//! GET    /anthropic/v1/models              the models, Anthropic-shaped
//! ```
//!
//! The same agents are served as MCP tools on stdio by [`serve_stdio`].

mod a2a;
mod access_log;
mod acp_agent;
mod auth;
mod body;
mod body_limit;
mod connections;
mod error;
mod extract;
mod followers;
mod guarded;
mod ingress;
mod mcp;
mod metrics_layer;
mod model_probe;
mod openapi;
mod origin;
mod routes;
mod sse;
mod state;
mod summary;
mod trace;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentplane_engine::executions::Executions;
use agentplane_engine::hub::Hub;
use agentplane_engine::hub::Services;
use agentplane_metrics::Metrics;
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::{from_fn, from_fn_with_state};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use a2a::{A2aOptions, DEFAULT_CLIENT as A2A_DEFAULT_CLIENT};
pub use acp_agent::{AcpServeError, AcpServeOptions, serve_acp_stdio};
pub use auth::{ClientId, Identity, MCP_DEFAULT_CLIENT};
pub use connections::ConnectionLimits;
pub use error::{ApiError, status_of};
pub use followers::FollowerLimits;
pub use mcp::{
    Connect as GatewayConnect, Relay as GatewayRelay, StdioError, StdioOptions,
    Upstream as GatewayUpstream, serve_gateway_bridge, serve_gateway_stdio, serve_stdio,
};
pub use model_probe::{AgentModel, MODEL_PROBE_TIMEOUT, probe_models};
pub use origin::AllowedOrigins;
pub use summary::{StartupSummary, startup_summary};

use crate::routes::{agents, events, health, permissions, threads, turns};
pub(crate) use crate::state::AppState;

/// Largest request body accepted by default: far above any real request (turn input
/// is capped at 256 KiB by the hub), far below what could hurt the process.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// How often an idle SSE stream sends a heartbeat comment by default.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// The shortest heartbeat interval: a zero interval would spin.
const MIN_HEARTBEAT: Duration = Duration::from_millis(10);
/// How long shutdown waits for connections to close once the hub has stopped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How the router behaves.
#[derive(Clone)]
pub struct RouterOptions {
    /// The bearer token `/v1/*` requires; `None` (or empty) requires none.
    pub auth_token: Option<String>,
    /// How often idle SSE streams send a heartbeat comment (tests use a short one).
    pub heartbeat: Duration,
    /// The largest request body, in bytes; larger ones are 413.
    pub body_limit: usize,
    /// The process's metrics: with them, `GET /metrics` (behind the token) and the
    /// HTTP metrics layer; without them, neither.
    pub metrics: Option<Arc<Metrics>>,
    /// The execution service behind `/v1/executions`; without it those routes are 404.
    pub executions: Option<Arc<Executions>>,
    /// How many event streams may follow threads at once.
    pub followers: FollowerLimits,
    /// Browser origins every route accepts besides loopback ones.
    pub allowed_origins: AllowedOrigins,
    /// The agents published over A2A (`[a2a]`); none by default.
    pub a2a: A2aOptions,
}

impl Default for RouterOptions {
    fn default() -> Self {
        Self {
            auth_token: None,
            heartbeat: DEFAULT_HEARTBEAT,
            body_limit: DEFAULT_BODY_LIMIT,
            metrics: None,
            executions: None,
            followers: FollowerLimits::default(),
            allowed_origins: AllowedOrigins::default(),
            a2a: A2aOptions::default(),
        }
    }
}

impl fmt::Debug for RouterOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouterOptions")
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("heartbeat", &self.heartbeat)
            .field("body_limit", &self.body_limit)
            .field("metrics", &self.metrics.is_some())
            .field("executions", &self.executions.is_some())
            .field("followers", &self.followers)
            .field("allowed_origins", &self.allowed_origins)
            .field("a2a", &self.a2a)
            .finish()
    }
}

/// Stops the application behind a server (the runtime's one ordered shutdown); the
/// server calls it once it accepts no more connections, then drains them.
pub type StopHook = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How `serve` runs.
#[derive(Clone)]
pub struct ServeOptions {
    /// The address to listen on; must be loopback unless `allow_public`.
    pub listen: SocketAddr,
    /// The bearer token `/v1/*` requires; required for a public address.
    pub auth_token: Option<String>,
    /// Allows a non-loopback address (with a token).
    pub allow_public: bool,
    /// How long shutdown lets running turns finish before cancelling them.
    pub shutdown_grace: Duration,
    /// How often idle SSE streams send a heartbeat comment.
    pub heartbeat: Duration,
    /// The process's metrics, served at `/metrics` when set.
    pub metrics: Option<Arc<Metrics>>,
    /// The execution service (already started); shut down with the hub.
    pub executions: Option<Arc<Executions>>,
    /// What stops the application when the server is asked to stop, before it drains
    /// its connections: the runtime's ordered shutdown. `None`: the hub and the
    /// executions above are shut down within `shutdown_grace`.
    pub stop: Option<StopHook>,
    /// Connection caps and timeouts.
    pub connections: ConnectionLimits,
    /// How many event streams may follow threads at once.
    pub followers: FollowerLimits,
    /// Browser origins every route accepts besides loopback ones (`[server]
    /// allowed_origins`).
    pub allowed_origins: AllowedOrigins,
    /// The agents published over A2A (`[a2a]`); none by default.
    pub a2a: A2aOptions,
}

impl fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeOptions")
            .field("listen", &self.listen)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_public", &self.allow_public)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("heartbeat", &self.heartbeat)
            .field("metrics", &self.metrics.is_some())
            .field("executions", &self.executions.is_some())
            .field("stop", &self.stop.is_some())
            .field("connections", &self.connections)
            .field("followers", &self.followers)
            .field("allowed_origins", &self.allowed_origins)
            .field("a2a", &self.a2a)
            .finish()
    }
}

/// Why the server would not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without `allow_public`.
    #[error(
        "refusing to listen on {0}: it is not a loopback address; pass --allow-public \
         (with an auth token) to serve other machines"
    )]
    PublicNotAllowed(SocketAddr),
    /// A non-loopback address without a token, even with `allow_public`.
    #[error(
        "refusing to listen on {0} without an auth token: a public address needs \
         --auth-token or AGENTPLANE_AUTH_TOKEN"
    )]
    PublicWithoutToken(SocketAddr),
    /// The listener or a connection failed.
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Refuses a non-loopback address unless public serving is allowed *and* a token is
/// set: the API runs tools on this machine, so it is never open to a network by
/// accident.
pub fn check_bind(options: &ServeOptions) -> Result<(), ServeError> {
    check_address(
        options.listen,
        options.allow_public,
        options.auth_token.as_deref(),
    )
}

fn check_address(
    addr: SocketAddr,
    allow_public: bool,
    token: Option<&str>,
) -> Result<(), ServeError> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !allow_public {
        return Err(ServeError::PublicNotAllowed(addr));
    }
    if token.is_none_or(str::is_empty) {
        return Err(ServeError::PublicWithoutToken(addr));
    }
    Ok(())
}

/// The API as an axum router, ready to serve (its streams end only when their turn
/// does or the client leaves; use [`serve`] for a shutdown that ends them all).
pub fn router(services: Services, options: &RouterOptions) -> Router {
    build(
        services,
        options,
        CancellationToken::new(),
        CancellationToken::new(),
    )
}

/// The router; `streams_end` ends the event streams, `mcp_stop` the MCP sessions.
fn build(
    services: Services,
    options: &RouterOptions,
    streams_end: CancellationToken,
    mcp_stop: CancellationToken,
) -> Router {
    let gate = auth::Gate::new(options.auth_token.as_deref(), services.identity.clone());
    let state = AppState {
        hub: services.hub,
        identity: services.identity,
        reports: services.reports,
        model_gateway: services.model_gateway,
        versions: services.versions,
        mcp_gateway: services.mcp_gateway,
        tool_pins: services.tool_pins,
        heartbeat: options.heartbeat.max(MIN_HEARTBEAT),
        streams_end,
        openapi: Arc::new(OnceLock::new()),
        model_probe_timeout: MODEL_PROBE_TIMEOUT,
        executions: options.executions.clone(),
        followers: Arc::new(followers::Followers::new(options.followers)),
    };
    let v1 = OpenApiRouter::<AppState>::new()
        .routes(routes!(agents::list))
        .routes(routes!(threads::create, threads::list))
        .routes(routes!(threads::get, threads::delete))
        .routes(routes!(threads::history))
        .routes(routes!(threads::audit))
        .routes(routes!(threads::compact))
        .routes(routes!(turns::start))
        .routes(routes!(events::follow))
        .routes(routes!(turns::cancel))
        .routes(routes!(permissions::resolve))
        .routes(routes!(crate::routes::approvals::list))
        .routes(routes!(crate::routes::mcp_calls::list))
        .routes(routes!(crate::routes::mcp_servers::list))
        .routes(routes!(crate::routes::mcp_tools::list))
        .routes(routes!(crate::routes::mcp_tools::approve))
        .routes(routes!(
            crate::routes::approvals::get,
            crate::routes::approvals::decide
        ))
        .routes(routes!(crate::routes::costs::list))
        .routes(routes!(crate::routes::policies::list))
        .routes(routes!(crate::routes::policies::explain))
        .routes(routes!(
            crate::routes::executions::create,
            crate::routes::executions::list
        ))
        .routes(routes!(crate::routes::executions::get))
        .routes(routes!(crate::routes::executions::cancel))
        .routes(routes!(
            crate::routes::versions::list,
            crate::routes::versions::create
        ))
        .routes(routes!(
            crate::routes::versions::get,
            crate::routes::versions::edit
        ))
        .routes(routes!(crate::routes::versions::promote))
        .routes(routes!(crate::routes::versions::traffic))
        .routes(routes!(crate::routes::versions::rollback))
        .routes(routes!(crate::routes::versions::shadow))
        .routes(routes!(crate::routes::versions::shadows))
        .routes(routes!(
            crate::routes::keys::create,
            crate::routes::keys::list
        ))
        .routes(routes!(crate::routes::keys::revoke))
        .route_layer(from_fn_with_state(gate.clone(), auth::authenticate));
    let (router, mut doc) = OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(health::healthz))
        .routes(routes!(openapi::document))
        .merge(v1)
        .split_for_parts();
    // Not an OpenAPI route: its contract is MCP's. Same auth as `/v1/*`, except that a
    // request naming no client is `auth::MCP_DEFAULT_CLIENT`'s (MCP clients cannot all
    // add headers).
    let mcp_options = || mcp::HttpOptions {
        body_limit: options.body_limit,
        keep_alive: state.heartbeat,
        stop: mcp_stop.clone(),
    };
    let mcp = Router::new()
        .route_service("/mcp", mcp::http_service(state.hub.clone(), mcp_options()))
        .route_service(
            "/mcp/gateway",
            mcp::gateway_service(state.mcp_gateway.clone(), mcp_options()),
        )
        // The same gateway at a path ending in `/mcp` (clients pick the transport from it).
        .route_service(
            mcp::authorization::GATEWAY_MCP_PATH,
            mcp::gateway_service(state.mcp_gateway.clone(), mcp_options()),
        )
        .route_layer(axum::middleware::from_fn(mcp::enveloped))
        .route_layer(from_fn_with_state(gate.clone(), auth::authenticate_mcp));
    let router = router.merge(mcp);
    // Unauthenticated, as RFC 9728 wants: where a client learns how to get a token.
    let router = router.merge(
        Router::new()
            .route(
                mcp::authorization::METADATA_PATH,
                axum::routing::get(mcp::authorization::metadata),
            )
            .route(
                mcp::authorization::METADATA_ROOT_PATH,
                axum::routing::get(mcp::authorization::metadata),
            )
            .route(
                mcp::authorization::GATEWAY_METADATA_PATH,
                axum::routing::get(mcp::authorization::metadata),
            )
            .route(
                mcp::authorization::GATEWAY_MCP_METADATA_PATH,
                axum::routing::get(mcp::authorization::metadata),
            )
            .with_state(state.hub.clone()),
    );
    let router = router.merge(routes::ui::routes());
    // Not OpenAPI routes: their contract is A2A's (`docs/a2a.md`). Cards are public;
    // JSON-RPC calls authenticate as `/v1` does. Nothing is mounted without `[a2a]`.
    let router = router.merge(a2a::routes(
        state.hub.clone(),
        options.a2a.clone(),
        gate.clone(),
        a2a::Streams {
            heartbeat: state.heartbeat,
            end: state.streams_end.clone(),
            followers: state.followers.clone(),
        },
        options.executions.as_ref().and_then(|e| e.webhook_sender()),
    ));
    // Not OpenAPI routes either: their contract is OpenAI's (ADR 0014). Same auth.
    let router = router.merge(
        routes::gateway::routes().route_layer(from_fn_with_state(gate.clone(), auth::authenticate)),
    );
    // Anthropic's contract: every error of these routes in Anthropic's shape.
    let router = router.merge(
        routes::gateway::anthropic_routes()
            .route_layer(from_fn_with_state(gate.clone(), auth::authenticate))
            .route_layer(axum::middleware::map_response(
                routes::gateway::anthropic_shaped,
            )),
    );
    let router = match &options.metrics {
        Some(metrics) => router.merge(routes::metrics::routes(metrics.clone(), gate.clone())),
        None => router,
    };
    // In-process: the document names every agent, whoever later reads it.
    let agents = state
        .hub
        .agents("openapi")
        .map(|agents| agents.keys().cloned().collect())
        .unwrap_or_default();
    openapi::complete(&mut doc, gate.required(), agents);
    let json = serde_json::to_vec(&doc).unwrap_or_else(|e| {
        tracing::error!(error = %e, "the OpenAPI document could not be serialized");
        b"{}".to_vec()
    });
    // A fresh lock, set exactly once here.
    let _ = state.openapi.set(Bytes::from(json));
    let router = router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    // After the fallbacks, so requests no route matched are counted too.
    let router = match &options.metrics {
        Some(metrics) => metrics_layer::around(router, metrics.clone()),
        None => router,
    };
    // Around every route, the fallbacks included: what a web page can make a browser
    // send is refused before any route, credential check or body read (`ingress.rs`).
    let ingress = ingress::Ingress {
        allowed_origins: options.allowed_origins.clone(),
        token_required: gate.required(),
        body_limit: options.body_limit,
    };
    router
        .layer(DefaultBodyLimit::max(options.body_limit))
        .layer(from_fn_with_state(Arc::new(ingress), ingress::guard))
        .layer(from_fn(trace::trace_requests))
        .layer(from_fn(access_log::log_requests))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route; see /openapi.json")
}

async fn method_not_allowed() -> ApiError {
    ApiError::invalid("this route does not accept this method; see /openapi.json")
        .with_status(StatusCode::METHOD_NOT_ALLOWED)
}

/// Serves the API on `listener` until `shutdown` completes, then shuts down
/// gracefully: stops accepting connections, lets running turns finish within
/// `shutdown_grace` (then cancels and records them, via [`Hub::shutdown`]), ends every
/// open event stream once it has delivered what is stored, and returns. Refuses a
/// listener whose address [`check_bind`] would refuse.
pub async fn serve(
    services: Services,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    check_address(addr, options.allow_public, options.auth_token.as_deref())?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "serving on a public address; /v1/* requires the bearer token");
    }
    let streams_end = CancellationToken::new();
    let mcp_stop = CancellationToken::new();
    let hub = services.hub.clone();
    let app = build(
        services,
        &RouterOptions {
            auth_token: options.auth_token.clone(),
            heartbeat: options.heartbeat,
            body_limit: DEFAULT_BODY_LIMIT,
            metrics: options.metrics.clone(),
            executions: options.executions.clone(),
            followers: options.followers,
            allowed_origins: options.allowed_origins.clone(),
            a2a: options.a2a.clone(),
        },
        streams_end.clone(),
        mcp_stop.clone(),
    );
    let stop_accepting = CancellationToken::new();
    let server = connections::serve(listener, app, options.connections, stop_accepting.clone());
    let mut serving = tokio::spawn(server);
    tokio::select! {
        result = &mut serving => {
            // The server ended on its own: an accept loop failure.
            shut_down(&hub, &options).await;
            return match result {
                Ok(result) => result.map_err(ServeError::Io),
                Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
            };
        }
        () = shutdown => {}
    }
    tracing::info!(
        grace_secs = options.shutdown_grace.as_secs(),
        "shutting down: no new connections; running turns may finish within the grace period"
    );
    stop_accepting.cancel();
    shut_down(&hub, &options).await;
    // MCP calls have their results (their turns ended); idle MCP streams would only
    // hold the drain below open.
    mcp_stop.cancel();
    // The hub has closed its live feeds: every stream now delivers what is stored (a
    // cancelled turn's `turn_completed` included) and ends by itself. Only streams
    // still open after the drain time are cut.
    if let Ok(joined) = tokio::time::timeout(DRAIN_TIMEOUT, &mut serving).await {
        return joined
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))?
            .map_err(ServeError::Io);
    }
    streams_end.cancel();
    match tokio::time::timeout(Duration::from_secs(1), &mut serving).await {
        Ok(Ok(result)) => result.map_err(ServeError::Io),
        Ok(Err(e)) => Err(ServeError::Io(std::io::Error::other(e))),
        Err(_) => {
            tracing::warn!("connections still open after shutdown; closing them");
            serving.abort();
            Ok(())
        }
    }
}

/// Runs the stop hook; without one, stops the hub and the execution workers together,
/// each within the grace period.
async fn shut_down(hub: &Hub, options: &ServeOptions) {
    if let Some(stop) = &options.stop {
        return stop().await;
    }
    let grace = options.shutdown_grace;
    match options.executions.as_deref() {
        Some(executions) => {
            tokio::join!(executions.shutdown(grace), hub.shutdown(grace));
        }
        None => hub.shutdown(grace).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str, allow_public: bool, token: Option<&str>) -> ServeOptions {
        ServeOptions {
            listen: listen.parse().expect("addr"),
            auth_token: token.map(str::to_owned),
            allow_public,
            shutdown_grace: Duration::from_secs(1),
            heartbeat: DEFAULT_HEARTBEAT,
            metrics: None,
            executions: None,
            stop: None,
            connections: ConnectionLimits::default(),
            followers: FollowerLimits::default(),
            allowed_origins: AllowedOrigins::default(),
            a2a: A2aOptions::default(),
        }
    }

    #[test]
    fn public_addresses_need_permission_and_a_token() {
        assert!(check_bind(&options("127.0.0.1:8686", false, None)).is_ok());
        assert!(check_bind(&options("[::1]:8686", false, None)).is_ok());
        assert!(matches!(
            check_bind(&options("0.0.0.0:8686", false, Some("t"))),
            Err(ServeError::PublicNotAllowed(_))
        ));
        assert!(matches!(
            check_bind(&options("192.168.1.5:8686", true, None)),
            Err(ServeError::PublicWithoutToken(_))
        ));
        assert!(matches!(
            check_bind(&options("[::]:8686", true, Some(""))),
            Err(ServeError::PublicWithoutToken(_))
        ));
        assert!(check_bind(&options("0.0.0.0:8686", true, Some("t"))).is_ok());
    }

    #[test]
    fn options_never_print_the_token() {
        let text = format!("{:?}", options("127.0.0.1:1", false, Some("s3cret")));
        assert!(!text.contains("s3cret"), "{text}");
        let text = format!(
            "{:?}",
            RouterOptions {
                auth_token: Some("s3cret".into()),
                ..RouterOptions::default()
            }
        );
        assert!(!text.contains("s3cret"), "{text}");
    }
}
