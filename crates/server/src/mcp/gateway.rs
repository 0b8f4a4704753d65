//! The MCP gateway: the tools of the MCP servers named in `[mcp.gateway] servers`, as
//! one MCP server, at `/mcp/gateway` (streamable HTTP, behind the same authentication
//! as `/mcp`) and on stdio (`agentplane mcp gateway`). Tools are named `SERVER__TOOL`.
//!
//! Every `tools/call` is a governed call (`McpGateway::call`); `tools/list` shows
//! exactly the tools the caller may call. A call that waits for a person's approval
//! becomes a task (the MCP tasks extension) when the request declares that extension:
//! the client polls `tasks/get`, whose id is the approval's, and the task survives the
//! client's timeout and a restart of agentplane. Otherwise the request waits, sending a
//! progress notification at each poll while nobody decided, and the approval's expiry
//! answers with a tool error. Like the rest of the server, nothing here decides what a
//! call may do; it maps MCP onto the MCP gateway service.

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::ApprovalId;
use agentplane_engine::services::mcp_gateway::{
    Answer, GatewayCall, GatewayTask, GatewayTool, McpGateway,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
    DetailedTask, GetTaskParams, GetTaskResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Task,
    TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::call;
use super::caller::Caller;

/// The `_meta` key of a tool list naming the offered servers that could not be reached.
const UNAVAILABLE_META: &str = "io.agentplane/unavailable";

/// How often a waiting request looks for the decision, and a task's suggested poll.
const POLL: Duration = Duration::from_millis(250);
/// Progress is sent at most this often while a request waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The MCP handler of the gateway. Cheap to clone (one per HTTP session).
#[derive(Clone)]
pub(crate) struct GatewayTools {
    gateway: Arc<McpGateway>,
    caller: Caller,
}

impl GatewayTools {
    pub(super) fn new(gateway: Arc<McpGateway>, caller: Caller) -> Self {
        Self { gateway, caller }
    }
}

/// A gateway tool as MCP lists it.
fn tool_of(tool: &GatewayTool) -> Tool {
    let schema: JsonObject = match &tool.spec.parameters {
        serde_json::Value::Object(object) => object.clone(),
        _ => JsonObject::new(),
    };
    Tool::new(
        tool.name.clone(),
        tool.spec.description.clone(),
        Arc::new(schema),
    )
}

fn result_of(answer: Answer) -> CallToolResult {
    let content = vec![ContentBlock::text(answer.text)];
    if answer.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

fn task_id(id: &str) -> Result<ApprovalId, ErrorData> {
    ApprovalId::parse(id)
        .map_err(|_| ErrorData::invalid_params(format!("unknown task `{id}`"), None))
}

/// What the gateway says of itself, on HTTP, on stdio and through the stdio bridge.
pub(super) fn gateway_info() -> ServerConfig {
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build(),
    )
    .with_server_info(
        Implementation::new("agentplane-mcp-gateway", env!("CARGO_PKG_VERSION"))
            .with_description("MCP servers behind agentplane's policies, approvals and budgets"),
    )
    .with_instructions(
        "Each tool is a tool of an MCP server agentplane fronts, named SERVER__TOOL. \
         Calls are governed: a refusal is a tool error naming the policy; a call that \
         needs a person's approval waits for it (as a task when the client supports \
         the tasks extension).",
    )
}

impl ServerHandler for GatewayTools {
    fn get_info(&self) -> ServerConfig {
        gateway_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let client = self.caller.of(&context)?;
        let tools = self
            .gateway
            .tools(&client)
            .await
            .map_err(call::error_data)?;
        let mut listed = ListToolsResult::with_all_items(tools.iter().map(tool_of).collect());
        // A list that shrank says why: the servers that could not be reached.
        let failing: Vec<serde_json::Value> = self
            .gateway
            .servers(&client)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.state == "failing")
            .map(|s| serde_json::json!({"server": s.server, "error": s.error}))
            .collect();
        if !failing.is_empty() {
            let mut meta = JsonObject::new();
            meta.insert(
                UNAVAILABLE_META.to_owned(),
                serde_json::Value::Array(failing),
            );
            listed.meta = Some(rmcp::model::MetaObject(meta));
        }
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let client = self.caller.of(&context)?;
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let called = self
            .gateway
            .call(&client, request.name.as_ref(), arguments)
            .await;
        let approval = match called {
            Err(refused) => return call::failure(refused).map(CallToolResponse::Complete),
            Ok(GatewayCall::Answered(answer)) => {
                return Ok(CallToolResponse::Complete(result_of(answer)));
            }
            Ok(GatewayCall::Pending(approval)) => approval,
        };
        let declared_tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if declared_tasks {
            let task = self
                .gateway
                .task(&client, &approval)
                .await
                .map_err(call::error_data)?;
            return Ok(CallToolResponse::Task(CreateTaskResult::new(
                task_header(&approval, &task).0,
            )));
        }
        // No tasks: wait here, within the client's own timeout.
        let token = context.meta.get_progress_token();
        let mut steps = 0u32;
        let mut last_progress: Option<tokio::time::Instant> = None;
        loop {
            let task = self
                .gateway
                .task(&client, &approval)
                .await
                .map_err(call::error_data)?;
            match task {
                GatewayTask::Answered { answer, .. } => {
                    return Ok(CallToolResponse::Complete(result_of(answer)));
                }
                GatewayTask::Waiting { .. }
                    if token.is_some()
                        && last_progress.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) =>
                {
                    steps += 1;
                    last_progress = Some(tokio::time::Instant::now());
                    if let Some(token) = &token {
                        let note = ProgressNotificationParam::new(token.clone(), f64::from(steps))
                            .with_message(format!("waiting for approval {approval}"));
                        if let Err(e) = context.peer.notify_progress(note).await {
                            tracing::debug!(error = %e, "a progress notification could not be sent");
                        }
                    }
                }
                _ => {}
            }
            tokio::select! {
                () = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error(
                        format!("the request was cancelled; approval {approval} stays pending"),
                        None,
                    ));
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let client = self.caller.of(&context)?;
        let approval = task_id(&request.task_id)?;
        let task = self
            .gateway
            .task(&client, &approval)
            .await
            .map_err(|e| match e {
                agentplane_engine::hub::HubError::NotFound(_) => {
                    ErrorData::invalid_params(format!("unknown task `{}`", request.task_id), None)
                }
                other => call::error_data(other),
            })?;
        let (header, payload) = task_header(&approval, &task);
        Ok(GetTaskResult::new(DetailedTask::new(header, payload)))
    }
}

/// The task's header and its status payload.
fn task_header(approval: &ApprovalId, task: &GatewayTask) -> (Task, TaskPayload) {
    let now = agentplane_core::policy::Timestamp::now().to_string();
    let (status, payload, message, created) = match task {
        GatewayTask::Waiting { created_at, .. } => (
            TaskStatus::Working,
            TaskPayload::Working,
            format!("waiting for a person to decide approval {approval}"),
            created_at,
        ),
        GatewayTask::Working { created_at } => (
            TaskStatus::Working,
            TaskPayload::Working,
            format!("approval {approval} decided; the call runs"),
            created_at,
        ),
        GatewayTask::Answered { answer, created_at } => {
            let result = serde_json::to_value(result_of(answer.clone()))
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            (
                TaskStatus::Completed,
                TaskPayload::Completed { result },
                "done".to_owned(),
                created_at,
            )
        }
    };
    let header = Task::new(approval.to_string(), status, created.clone(), now)
        .with_status_message(message)
        .with_poll_interval_ms(u64::try_from(POLL.as_millis()).unwrap_or(250));
    (header, payload)
}
