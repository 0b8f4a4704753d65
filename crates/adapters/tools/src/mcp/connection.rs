//! One live MCP session with one server: connect (start or dial, `initialize`, list the
//! tools, all within the startup timeout), call a tool, and close (end the session, then
//! the process tree).
//!
//! A connection that lost its server marks itself broken: its later calls fail at once
//! and it is never kept for reuse. What must not live here: which thread or turn uses a
//! connection and for how long (that is [`super::servers`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::{ToolError, ToolOutput};
use rmcp::Peer;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject,
    ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::catalog::Catalog;
use super::content;
use super::http;
use super::oauth::TokenSource;
use super::pins::{self, Pins};
use super::spec::{McpServerSpec, McpTransport};
use super::stdio::{self, StderrDrain};
use agentplane_process::process::{ServerCommand, ServerProcess};

/// Bytes of a startup failure's own reason (an HTTP error page, say) kept in the message,
/// besides the stderr tail.
const MAX_REASON: usize = 1024;

/// How long ending the MCP session may take before the process is signalled.
const SESSION_CLOSE_GRACE: Duration = Duration::from_millis(200);

/// How long the process tree gets between SIGTERM and SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_millis(500);

/// How long to wait for a dead server's last stderr lines.
const STDERR_GRACE: Duration = Duration::from_millis(200);

/// A live session with one server.
pub(crate) struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    catalog: Catalog,
    /// Why the connection is unusable, once it is.
    broken: Mutex<Option<String>>,
    stderr: Option<StderrDrain>,
    /// What `close` ends; taken by the first close.
    teardown: tokio::sync::Mutex<Option<Teardown>>,
}

struct Teardown {
    service: RunningService<RoleClient, ClientConfig>,
    process: Option<ServerProcess>,
}

/// Connects to the server within its startup timeout. The error names the server and
/// carries the tail of its stderr or the HTTP error, never a header value.
/// `tokens` are the server's access tokens when it has an OAuth grant.
pub(crate) async fn connect(
    spec: &McpServerSpec,
    tokens: Option<Arc<TokenSource>>,
    pins: Option<&Pins>,
) -> Result<Connection, String> {
    let failed = |reason: String| {
        let reason = content::cap_text(reason, MAX_REASON).content;
        format!("MCP server `{}` did not start: {reason}", spec.name)
    };
    match &spec.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let started = stdio::start(&ServerCommand {
                program: command,
                args,
                env,
                cwd: cwd.as_deref(),
            })
            .map_err(|e| failed(format!("`{command}` could not be run: {e}")))?;
            let mut process = started.process;
            let stderr = started.stderr;
            // A server that exits before answering fails now, not at the startup
            // timeout (a grandchild may hold its stdout open, so EOF never comes).
            let handshake = tokio::select! {
                answered = handshake(spec, (started.stdout, started.stdin), lifecycle(), pins) => {
                    answered.map_err(String::from)
                }
                status = process.exited() => {
                    Err(format!("it exited ({status}) before answering `initialize`"))
                }
            };
            match handshake {
                Ok((service, catalog)) => Ok(Connection::new(
                    spec,
                    service,
                    catalog,
                    Some(process),
                    Some(stderr),
                )),
                Err(reason) => {
                    process.terminate(TERMINATE_GRACE).await;
                    let tail = stderr.settle(STDERR_GRACE).await;
                    Err(with_stderr(failed(reason), &tail))
                }
            }
        }
        McpTransport::Http { url, headers, .. } => {
            let transport = http::transport(url, headers, tokens.clone()).map_err(failed)?;
            let (service, catalog) = match handshake(spec, transport, lifecycle(), pins).await {
                Ok(started) => started,
                // A server that answers `server/discover` with something other than a
                // discovery or an error (an empty result, say) predates it: the older
                // handshake, on a new transport.
                Err(Handshake::Misread(_)) => {
                    let transport = http::transport(url, headers, tokens).map_err(failed)?;
                    handshake(spec, transport, ClientLifecycleMode::Initialize, pins)
                        .await
                        .map_err(|e| failed(e.into()))?
                }
                Err(other) => return Err(failed(other.into())),
            };
            Ok(Connection::new(spec, service, catalog, None, None))
        }
    }
}

/// Why a handshake failed.
enum Handshake {
    /// The server answered the first request with a result of another kind.
    Misread(String),
    Failed(String),
}

impl From<Handshake> for String {
    fn from(failure: Handshake) -> Self {
        match failure {
            Handshake::Misread(reason) | Handshake::Failed(reason) => reason,
        }
    }
}

/// Starting the session as `lifecycle` says, and `tools/list`, within the startup
/// timeout.
async fn handshake<T, E, A>(
    spec: &McpServerSpec,
    transport: T,
    lifecycle: ClientLifecycleMode,
    pins: Option<&Pins>,
) -> Result<(RunningService<RoleClient, ClientConfig>, Catalog), Handshake>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let config = match lifecycle {
        // The older handshake names the newest version that has one.
        ClientLifecycleMode::Initialize => {
            client_config().with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
        }
        _ => client_config(),
    };
    let work = async {
        let service = config
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|e| {
                let reason = format!("initialize failed: {}", initialize_error(&e));
                match e {
                    ClientInitializeError::ExpectedInitResult(_) => Handshake::Misread(reason),
                    _ => Handshake::Failed(reason),
                }
            })?;
        let tools = service.list_all_tools().await.map_err(|e| {
            Handshake::Failed(format!("listing its tools failed: {}", service_error(&e)))
        })?;
        let admitted = pins::admit(spec, tools, pins)
            .await
            .map_err(Handshake::Failed)?;
        Ok::<_, Handshake>((service, admitted))
    };
    let (service, admitted) = tokio::time::timeout(spec.startup_timeout, work)
        .await
        .map_err(|_| {
            Handshake::Failed(format!(
                "no answer within the startup timeout of {} ms",
                spec.startup_timeout.as_millis()
            ))
        })??;
    let mut catalog = Catalog::new(&spec.name, &spec.tool_prefix(), admitted.tools, &spec.tools);
    catalog.quarantine(&spec.tool_prefix(), admitted.quarantined);
    Ok((service, catalog))
}

/// Who we are to the server; we offer no client capabilities (no sampling, roots or
/// elicitation), so the server never waits on us.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentplane", env!("CARGO_PKG_VERSION")),
    )
}

/// How a session starts, so that every server generation accepts it: `server/discover`
/// at 2026-07-28 first (a server of that generation has no `initialize`); a server
/// that answers it with a JSON-RPC error is session-based and gets `initialize` at
/// 2025-11-25, the newest version with a handshake, which older servers answer with
/// their own version. (rmcp's default sends `initialize` naming 2026-07-28, which a
/// 2026-07-28-only server refuses.) A server that ignores `server/discover` gets
/// `initialize` after rmcp's 10 s probe timeout, within the startup timeout.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// An initialize failure without rmcp's transport type names.
fn initialize_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{} ({context})", transport_chain(error.error.as_ref()))
        }
        // `server/discover` was refused (a session-based server, or no MCP at all):
        // what `initialize` met says why.
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => initialize_error(fallback),
        other => chain(other),
    }
}

/// A request failure without rmcp's transport type names.
fn service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => transport_chain(error.error.as_ref()),
        other => chain(other),
    }
}

/// A transport's error; the HTTP client's error is not linked as a source by rmcp, so
/// it is looked for here (it carries the cause: refused, timed out, TLS…).
fn transport_chain(error: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    match error.downcast_ref::<StreamableHttpError<reqwest_mcp::Error>>() {
        Some(StreamableHttpError::Client(client)) => chain(client),
        // No access token (`bearer`): its message says why, without "Io error".
        Some(StreamableHttpError::Io(io)) => io.to_string(),
        _ => chain(error),
    }
}

/// An error and its sources, each source added only when its text is not already
/// part of the message (many errors print their source themselves).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(current) = source {
        let more = current.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = current.source();
    }
    text
}

fn with_stderr(reason: String, tail: &str) -> String {
    if tail.is_empty() {
        reason
    } else {
        format!("{reason}; its stderr ends with:\n{tail}")
    }
}

impl Connection {
    fn new(
        spec: &McpServerSpec,
        service: RunningService<RoleClient, ClientConfig>,
        catalog: Catalog,
        process: Option<ServerProcess>,
        stderr: Option<StderrDrain>,
    ) -> Self {
        Self {
            server: spec.name.clone(),
            peer: service.peer().clone(),
            catalog,
            broken: Mutex::new(None),
            stderr,
            teardown: tokio::sync::Mutex::new(Some(Teardown { service, process })),
        }
    }

    /// The tools the server offered when the connection was made.
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Why the connection is unusable, if it is.
    pub(crate) fn broken(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn mark_broken(&self, reason: &str) {
        let mut broken = self.broken.lock().unwrap_or_else(|e| e.into_inner());
        if broken.is_none() {
            *broken = Some(reason.to_owned());
        }
    }

    /// Whether the connection can serve another turn: not broken, the session running,
    /// the process (if any) alive, and not closed.
    pub(crate) async fn is_healthy(&self) -> bool {
        if self.broken().is_some() || self.peer.is_transport_closed() {
            return false;
        }
        let mut teardown = self.teardown.lock().await;
        match teardown.as_mut() {
            None => false,
            Some(t) => !t.process.as_mut().is_some_and(ServerProcess::has_exited),
        }
    }

    /// Calls the server's tool `tool` with `args`, within `timeout`, its result cut at
    /// `cap` bytes.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: JsonObject,
        timeout: Duration,
        cap: usize,
    ) -> Result<ToolOutput, ToolError> {
        if let Some(reason) = self.broken() {
            return Err(ToolError::new(ToolErrorKind::ExecutionFailed, reason));
        }
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        // The calling span's trace context, in `_meta` (SEP-414) and, over HTTP, as the
        // `traceparent` header (`bearer.rs`); nothing without an exporter.
        if let Some(traceparent) = agentplane_engine::ports::telemetry::current_traceparent() {
            let mut meta = RequestMetaObject::new();
            meta.set_traceparent(traceparent);
            params.meta = Some(meta);
        }
        // Dropping the call on timeout sends the server `notifications/cancelled`.
        let outcome = tokio::time::timeout(timeout, self.peer.call_tool(params)).await;
        match outcome {
            Err(_) => Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!(
                    "the MCP server `{}` did not answer `{tool}` within {} ms",
                    self.server,
                    timeout.as_millis()
                ),
            )),
            Ok(Ok(result)) if result.is_error == Some(true) => Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                content::error_text(&result, cap),
            )),
            Ok(Ok(result)) => Ok(content::to_output(&result, cap)),
            Ok(Err(ServiceError::McpError(error))) => Err(ToolError::new(
                ToolErrorKind::ExecutionFailed,
                format!(
                    "the MCP server `{}` refused the call: {}",
                    self.server, error.message
                ),
            )),
            Ok(Err(error)) => {
                let closed = matches!(
                    error,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) || self.peer.is_transport_closed();
                let error = service_error(&error);
                if !closed {
                    return Err(ToolError::new(
                        ToolErrorKind::ExecutionFailed,
                        format!("the MCP server `{}` failed the call: {error}", self.server),
                    ));
                }
                let tail = match &self.stderr {
                    Some(stderr) => stderr.settle(STDERR_GRACE).await,
                    None => String::new(),
                };
                let reason = with_stderr(
                    format!(
                        "the MCP server `{}` closed the connection ({error}); its tools are \
                         unavailable until the next turn",
                        self.server
                    ),
                    &tail,
                );
                self.mark_broken(&reason);
                Err(ToolError::new(ToolErrorKind::ExecutionFailed, reason))
            }
        }
    }

    /// Ends the session, then the process tree (SIGTERM, a short wait, SIGKILL). Later
    /// closes do nothing; later calls fail.
    pub(crate) async fn close(&self) {
        self.mark_broken(&format!(
            "the connection to the MCP server `{}` is closed",
            self.server
        ));
        let Some(mut teardown) = self.teardown.lock().await.take() else {
            return;
        };
        let _ = teardown
            .service
            .close_with_timeout(SESSION_CLOSE_GRACE)
            .await;
        if let Some(process) = teardown.process.as_mut() {
            process.terminate(TERMINATE_GRACE).await;
        }
    }
}
