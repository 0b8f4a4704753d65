//! The stdio gateway beside a running server: `agentplane mcp gateway` started by a
//! desktop client (Claude Desktop, Cursor, VS Code) while `agentplane serve` holds the
//! store passes every request to that server's `/gateway/mcp`, so listing, calls,
//! approvals, records and costs are the server's, decided from its UI and CLI.
//!
//! The session upstream is opened at the client's first request, with the client's own
//! capabilities (a client that declares the tasks extension gets tasks), and opened
//! again after it breaks. Whatever fails upstream reaches the client as an MCP error
//! naming the server and what to do, never as a closed pipe. Nothing here decides
//! anything: the server governs each call as it governs one over HTTP.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientConfig, ClientRequest,
    GetTaskParams, GetTaskRequest, GetTaskResult, ListToolsRequest, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, RequestParamsMeta, ResultType, ServerConfig,
    ServerResult,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RunningService, ServiceError};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler};

use super::gateway::gateway_info;

/// A session to the running server's gateway, relayed through [`Relay`].
pub type Upstream = RunningService<RoleClient, Relay>;

/// Opens the session upstream with the given handler; the error says why it failed.
pub type Connect = Arc<
    dyn Fn(Relay) -> Pin<Box<dyn Future<Output = Result<Upstream, String>> + Send>> + Send + Sync,
>;

/// The handler of the upstream session: it introduces itself with the stdio client's
/// own capabilities and passes the server's progress and list changes down.
#[derive(Clone)]
pub struct Relay {
    info: ClientConfig,
    downstream: Peer<RoleServer>,
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Err(e) = self.downstream.notify_progress(params).await {
            tracing::debug!(error = %e, "a progress notification could not be passed on");
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Err(e) = self.downstream.notify_tool_list_changed().await {
            tracing::debug!(error = %e, "a tool list change could not be passed on");
        }
    }
}

/// The MCP handler of `agentplane mcp gateway` in front of a running server.
#[derive(Clone)]
pub(crate) struct GatewayBridge {
    /// The server's gateway URL, as messages name it.
    target: String,
    connect: Connect,
    upstream: Arc<tokio::sync::Mutex<Option<Upstream>>>,
}

impl GatewayBridge {
    pub(super) fn new(target: String, connect: Connect) -> Self {
        Self {
            target,
            connect,
            upstream: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// The live session upstream, opened (again) when there is none.
    async fn peer(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Peer<RoleClient>, ErrorData> {
        let mut upstream = self.upstream.lock().await;
        if let Some(session) = upstream.as_ref().filter(|s| !s.is_closed()) {
            return Ok(session.peer().clone());
        }
        let mut info = ClientConfig::default();
        if let Some(client) = context.peer.peer_info() {
            info.capabilities = client.capabilities.clone();
            info.client_info = client.client_info.clone();
        }
        let relay = Relay {
            info,
            downstream: context.peer.clone(),
        };
        let session = (self.connect)(relay)
            .await
            .map_err(|why| self.unreachable(&why))?;
        let peer = session.peer().clone();
        *upstream = Some(session);
        Ok(peer)
    }

    fn unreachable(&self, why: &str) -> ErrorData {
        ErrorData::internal_error(
            format!(
                "the MCP gateway of the agentplane server at {} cannot be reached ({why}); \
                 the server holds this configuration's store, so this gateway relays to it: \
                 check that `agentplane serve` runs, and the key or AGENTPLANE_AUTH_TOKEN \
                 given to this command",
                self.target
            ),
            None,
        )
    }

    /// A failed request: the server's own MCP error as it is; a broken session is
    /// dropped (the next request opens a new one) and named.
    async fn failed(&self, e: ServiceError) -> ErrorData {
        match e {
            ServiceError::McpError(data) => data,
            other => {
                self.upstream.lock().await.take();
                self.unreachable(&other.to_string())
            }
        }
    }

    async fn send(
        &self,
        context: &RequestContext<RoleServer>,
        request: ClientRequest,
    ) -> Result<ServerResult, ErrorData> {
        let peer = self.peer(context).await?;
        tokio::select! {
            sent = peer.send_request(request) => match sent {
                Ok(result) => Ok(result),
                Err(e) => Err(self.failed(e).await),
            },
            () = context.ct.cancelled() => Err(ErrorData::internal_error(
                "the request was cancelled",
                None,
            )),
        }
    }
}

/// A result read on the upstream session (whichever version it negotiated) carries
/// no result type when that version has none; the stdio client's may need one, and
/// rmcp drops it again for a client of an older version.
fn complete(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

fn unexpected() -> ErrorData {
    ErrorData::internal_error(
        "the agentplane server answered with another result type",
        None,
    )
}

impl ServerHandler for GatewayBridge {
    fn get_info(&self) -> ServerConfig {
        gateway_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let list = ListToolsRequest {
            params: request,
            ..Default::default()
        };
        match self
            .send(&context, ClientRequest::ListToolsRequest(list))
            .await?
        {
            ServerResult::ListToolsResult(mut result) => {
                complete(&mut result.result_type);
                Ok(result)
            }
            _ => Err(unexpected()),
        }
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The client's progress token goes upstream, so the server's progress (a call
        // waiting for its approval) comes back down under it.
        if let Some(token) = context.meta.get_progress_token() {
            request.set_progress_token(token);
        }
        let call = CallToolRequest::new(request);
        match self
            .send(&context, ClientRequest::CallToolRequest(call))
            .await?
        {
            ServerResult::CallToolResult(mut result) => {
                complete(&mut result.result_type);
                Ok(CallToolResponse::Complete(result))
            }
            ServerResult::CreateTaskResult(task) => Ok(CallToolResponse::Task(task)),
            _ => Err(unexpected()),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        match self
            .send(
                &context,
                ClientRequest::GetTaskRequest(GetTaskRequest::new(request)),
            )
            .await?
        {
            ServerResult::GetTaskResult(result) => Ok(result),
            _ => Err(unexpected()),
        }
    }
}
