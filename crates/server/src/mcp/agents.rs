//! The MCP handler of agentplane's agents ([`AgentTools`]): `tools/list` lists the
//! caller's agents, `tools/call` runs one as a task (`super::call`). Both transports
//! serve it (`super::http`, `super::stdio`).

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

use super::caller::Caller;
use super::{call, progress, tools};

/// The in-process caller of what rmcp asks without a request (`get_tool`).
const MCP_SERVER: &str = "mcp";

/// The MCP handler: the hub's agents as tools. Cheap to clone (one per HTTP session).
#[derive(Clone)]
pub(crate) struct AgentTools {
    hub: Arc<Hub>,
    caller: Caller,
    /// The workspace of a call that names none.
    default_workspace: Option<PathBuf>,
}

impl AgentTools {
    pub(super) fn new(hub: Arc<Hub>, caller: Caller, default_workspace: Option<PathBuf>) -> Self {
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
        if let Err(refused) =
            self.hub
                .identity()
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
