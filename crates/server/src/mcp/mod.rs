//! agentplane as an MCP server: every agent of the hub is one MCP tool.
//!
//! A `tools/call` is one task: a new thread owned by the caller's client, one turn
//! started through the hub exactly as `POST /v1/threads` and `POST …/turns` start it,
//! progress notifications while it runs, and the turn's result as the tool's result.
//! Two transports share one handler ([`AgentTools`]): streamable HTTP at `/mcp` on the
//! hub's router (behind the same bearer token; the client is the request's
//! `X-Client-ID`, see `http.rs`) and stdio for `agentplane mcp serve` (one fixed client,
//! see `stdio.rs`).
//!
//! Like the HTTP routes, nothing here decides what a request means: the hub validates
//! agents, workspaces and inputs and owns tenancy. This module only maps MCP onto hub
//! calls and hub errors onto MCP errors. It never sends a tool call's arguments in a
//! progress message.

pub(crate) mod authorization;
mod call;
mod gateway;
mod http;
mod progress;
mod stdio;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use agentplane_engine::hub::Hub;
use agentplane_engine::identity::Access;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::auth::Identity;

/// The in-process caller of what rmcp asks without a request (`get_tool`).
const MCP_SERVER: &str = "mcp";

pub(crate) use http::{HttpOptions, gateway_service, service as http_service};
pub use stdio::{StdioError, StdioOptions, serve_gateway_stdio, serve_stdio};

/// Who owns the threads a call creates.
#[derive(Clone, Debug)]
enum Caller {
    /// One client for the whole connection (stdio: the local user).
    Fixed(String),
    /// The `Identity` the auth middleware put on each HTTP request.
    PerRequest,
}

/// The MCP handler: the hub's agents as tools. Cheap to clone (one per HTTP session).
#[derive(Clone)]
pub(crate) struct AgentTools {
    hub: Arc<Hub>,
    caller: Caller,
    /// The workspace of a call that names none.
    default_workspace: Option<PathBuf>,
}

impl AgentTools {
    fn new(hub: Arc<Hub>, caller: Caller, default_workspace: Option<PathBuf>) -> Self {
        Self {
            hub,
            caller,
            default_workspace,
        }
    }

    /// The caller of a request.
    fn client(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<agentplane_engine::identity::Caller, ErrorData> {
        self.caller.of(context)
    }
}

impl Caller {
    /// The caller of a request: the local client (stdio), or the one the auth
    /// middleware authenticated, whose roles the hub checks.
    fn of(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<agentplane_engine::identity::Caller, ErrorData> {
        match self {
            Caller::Fixed(client) => {
                Ok(agentplane_engine::identity::Caller::local(client.as_str()))
            }
            Caller::PerRequest => context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Identity>())
                .map(|identity| identity.0.clone())
                // Only reachable if the route were mounted without the auth middleware.
                .ok_or_else(|| {
                    ErrorData::invalid_request("the X-Client-ID header is required", None)
                }),
        }
    }
}

impl ServerHandler for AgentTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("agentplane", env!("CARGO_PKG_VERSION"))
                    .with_description("agentplane's agents as MCP tools"),
            )
            .with_instructions(
                "Each tool is an agentplane agent. Call it with a `task` (and optionally the \
                 absolute `workspace` directory it works in); it runs one turn in a new thread \
                 and returns the agent's result.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let client = self.client(&context)?;
        let agents = self.hub.agents(&client).map_err(call::error_data)?;
        Ok(ListToolsResult::with_all_items(tools::all(agents)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // rmcp asks this without a request (a tool's definition, no agent runs): the
        // HTTP layer proved the caller already, and every role may list agents.
        self.hub
            .agents(MCP_SERVER)
            .ok()?
            .get(name)
            .map(tools::of_agent)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let client = self.client(&context)?;
        // Authorization before validation: a caller who may not start turns is refused
        // whatever it names or sends, as on `/v1`.
        if let Err(refused) = self
            .hub
            .authorize(&client, Access::Operate, "calling an agent")
        {
            return call::failure(refused).map(CallToolResponse::Complete);
        }
        let agents = self.hub.agents(&client).map_err(call::error_data)?;
        let agent = agents.get(request.name.as_ref()).ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; the tools are: {}",
                    request.name,
                    agents.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
                None,
            )
        })?;
        let arguments = tools::Arguments::parse(request.arguments)?;
        let workspace = match arguments.workspace {
            Some(workspace) => workspace,
            None => self
                .default_workspace
                .clone()
                .or_else(|| std::env::current_dir().ok())
                .map(|dir| dir.display().to_string())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        "no `workspace` given and the server has no working directory",
                        None,
                    )
                })?,
        };
        let progress =
            progress::Progress::new(context.peer.clone(), context.meta.get_progress_token());
        let result = call::run(
            &self.hub,
            call::Call {
                client,
                agent,
                task: arguments.task,
                workspace,
            },
            progress,
            context.ct.clone(),
        )
        .await?;
        Ok(CallToolResponse::Complete(result))
    }
}
