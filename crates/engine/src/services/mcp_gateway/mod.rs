//! The MCP gateway service: the tools a caller may call, one governed call
//! (`govern.rs`), the approvals such a call waits for, and the gateway's log.
//!
//! A call a policy wants approved waits durably, as an agent's does: it gets a thread
//! of its own (the gateway's agent, owned by the caller's client) with one turn
//! suspended on an approval, so listing, deciding, four eyes, approvers and expiry are
//! those of every approval. The approval's snapshot says it is a gateway call
//! (`kind: mcp_gateway`). A decision (or the expiry) resumes it here, exactly once
//! through the store's claim, in whichever process takes it (after a restart too):
//! the call is decided again (deny wins), run, and recorded in the gateway's log with
//! its answer. Callers waiting for it (a client still connected, or one polling its
//! task) read that record; nothing waits in memory that a restart could lose.

pub mod govern;

use std::sync::Arc;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, ApprovalOutcome, EventPayload, McpCallId, StopReason, ThreadId, ToolErrorKind,
    TurnId,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::task::TaskTracker;

use crate::error::HubError;
use crate::governance::rules::PolicyExplanation;
use crate::identity::{Access, AsCaller, Caller};
use crate::ports::{
    ApprovalRecord, ApprovalStatus, McpCallQuery, McpCallRecord, McpUpstreams, NewApproval,
    NewThread, ToolError, UpstreamState,
};
use crate::services::identity::Identity;
use crate::turn::{self, TurnDeps};
pub use govern::{Answer, GatewayTool, McpGatewayConfig, SchemaCache};
use govern::{Finished, Gated, Gateway, Who};

/// The snapshot kind of a gateway call's approval.
const KIND: &str = "mcp_gateway";

/// What a gateway call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayCall {
    /// Answered now.
    Answered(Answer),
    /// It waits for a person: the approval (and the MCP task) id.
    Pending(ApprovalId),
}

/// Where a call waiting on an approval stands (an MCP task).
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayTask {
    /// Nobody decided yet.
    Waiting {
        approval: ApprovalId,
        created_at: String,
    },
    /// Decided; the call runs.
    Working { created_at: String },
    /// It ended: its answer.
    Answered { answer: Answer, created_at: String },
}

/// What a gateway call's approval keeps to run it after the decision.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Snapshot {
    kind: String,
    call: McpCallId,
    server: String,
    /// The offered name (`SERVER__TOOL`).
    tool: String,
    roles: Vec<String>,
    policy_set: String,
    #[serde(default)]
    separate_approver: bool,
    /// The tool's input schema, to check edited arguments against.
    schema: Value,
}

/// The MCP gateway: the servers of `[mcp.gateway] servers` behind agentplane's
/// governance. Built by `HubBuilder::build`; the hub holds it too, to resume the calls
/// whose approvals it decides.
pub struct McpGateway {
    deps: TurnDeps,
    identity: Arc<Identity>,
    /// The servers offered; `None`: none (`[mcp.gateway] servers` is empty).
    upstreams: Option<Arc<dyn McpUpstreams>>,
    config: McpGatewayConfig,
    /// The tools' compiled input schemas.
    schemas: SchemaCache,
    /// Where a decided call runs, so that shutdown waits for it.
    tasks: TaskTracker,
}

impl McpGateway {
    pub(crate) fn new(
        deps: TurnDeps,
        identity: Arc<Identity>,
        upstreams: Option<Arc<dyn McpUpstreams>>,
        config: McpGatewayConfig,
        tasks: TaskTracker,
    ) -> Self {
        Self {
            deps,
            identity,
            upstreams,
            config,
            schemas: SchemaCache::default(),
            tasks,
        }
    }

    fn offered(&self) -> Result<&Arc<dyn McpUpstreams>, HubError> {
        self.upstreams.as_ref().ok_or_else(|| {
            HubError::NotFound("the MCP gateway (no `[mcp.gateway] servers` are offered)".into())
        })
    }

    fn gateway_of<'a>(&'a self, upstreams: &'a Arc<dyn McpUpstreams>) -> Gateway<'a> {
        Gateway {
            store: self.deps.store.as_ref(),
            governance: &self.deps.governance,
            upstreams: upstreams.as_ref(),
            config: &self.config,
            schemas: &self.schemas,
        }
    }

    /// Whether the MCP gateway offers any server.
    pub fn offers(&self) -> bool {
        self.upstreams.is_some()
    }

    /// The tools `caller` may call through the MCP gateway: those of the offered
    /// servers that the policies do not deny it whatever the arguments (the same
    /// evaluation as a call's). A caller that may not call tools at all sees none.
    pub async fn tools(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<Vec<GatewayTool>, HubError> {
        let caller = self
            .identity
            .require(caller, Access::List, "listing MCP gateway tools")?;
        let Some(upstreams) = self.upstreams.as_ref() else {
            return Ok(Vec::new());
        };
        if self
            .identity
            .require(
                caller.as_ref(),
                Access::Operate,
                "calling MCP gateway tools",
            )
            .is_err()
        {
            return Ok(Vec::new());
        }
        let roles = caller.roles().names();
        let who = Who {
            client: caller.client(),
            roles: &roles,
        };
        Ok(self.callable(upstreams, &who).await)
    }

    /// The offered tools that the policies do not deny `who` whatever the arguments:
    /// what `tools/list` shows, and the only names an unknown tool's error may list.
    async fn callable(&self, upstreams: &Arc<dyn McpUpstreams>, who: &Who<'_>) -> Vec<GatewayTool> {
        let tools = upstreams
            .tools(who.client)
            .await
            .into_iter()
            .map(GatewayTool::of)
            .collect();
        self.gateway_of(upstreams).callable(who, tools)
    }

    /// Where each offered server stands (connected, failing and why, quarantined
    /// tools), in configuration order; empty when the gateway offers none.
    pub async fn servers(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<Vec<UpstreamState>, HubError> {
        self.identity
            .require(caller, Access::Read, "reading the MCP gateway's servers")?;
        Ok(match &self.upstreams {
            Some(upstreams) => upstreams.states().await,
            None => Vec::new(),
        })
    }

    /// Calls the gateway tool `name` for `caller`, governed as an agent's tool call.
    /// A refusal or a failure of the tool is an answer with `is_error`; a call that
    /// needs an approval is `Pending` on it.
    pub async fn call(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        name: &str,
        arguments: Value,
    ) -> Result<GatewayCall, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "calling MCP gateway tools")?;
        let upstreams = self.offered()?;
        let roles = caller.roles().names();
        let who = Who {
            client: caller.client(),
            roles: &roles,
        };
        let found = match find_tool(upstreams.as_ref(), caller.client(), name).await {
            Ok(found) => found,
            Err(why) => {
                // A tool that cannot be called now (quarantined: refused; its server
                // unreachable: failed), recorded as every call is, naming why.
                let server = name.split_once("__").map_or(name, |(server, _)| server);
                let status = if why.kind == ToolErrorKind::NotAllowed {
                    "denied"
                } else {
                    "error"
                };
                let finished = unanswered(status, why.message);
                self.record_mcp_call(
                    &McpCallId::new(),
                    &who,
                    (server, &format!("mcp__{name}")),
                    &finished,
                    None,
                    false,
                )
                .await?;
                return Ok(GatewayCall::Answered(finished.answer));
            }
        };
        let Some(tool) = found else {
            // The names `tools/list` shows, no more: a tool denied outright is not
            // named here either.
            let callable = self.callable(upstreams, &who).await;
            return Err(HubError::InvalidArgument(format!(
                "unknown tool `{name}`; the tools are: {}",
                callable
                    .into_iter()
                    .map(|t| t.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let tool = &tool;
        let id = McpCallId::new();
        match self
            .gateway_of(upstreams)
            .govern(&who, tool, arguments, None)
            .await
        {
            Gated::Done(finished) => {
                self.record_mcp_call(
                    &id,
                    &who,
                    (&tool.server, &tool.name),
                    &finished,
                    None,
                    false,
                )
                .await?;
                Ok(GatewayCall::Answered(finished.answer))
            }
            Gated::Approval(ask) => {
                let approval = self
                    .suspend_mcp_call(&id, &caller, tool, &roles, *ask)
                    .await?;
                Ok(GatewayCall::Pending(approval))
            }
        }
    }

    /// Where the call waiting on approval `id` stands. `NotFound` for an approval that
    /// is not a gateway call of the caller's client.
    pub async fn task(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ApprovalId,
    ) -> Result<GatewayTask, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "reading MCP gateway tasks")?;
        let not_found = || HubError::NotFound(format!("task {id}"));
        let approval = self.deps.store.approval(id).await?.ok_or_else(not_found)?;
        if approval.client_id != caller.client() || snapshot_of(&approval).is_none() {
            return Err(not_found());
        }
        let created_at = approval.created_at.clone();
        if approval.status == ApprovalStatus::Pending {
            return Ok(GatewayTask::Waiting {
                approval: approval.id,
                created_at,
            });
        }
        // The turn is read before the record: the process running the call records it
        // and only then ends the turn, so a turn seen ended here means the record, if
        // any, is there to read. The other order raced a replica that ran the call
        // between the two reads, and reported its success as unknown.
        let ended = if approval.resumed {
            self.deps
                .store
                .turn(&approval.turn_id)
                .await?
                .is_some_and(|turn| turn.status != crate::ports::TurnStatus::Running)
        } else {
            false
        };
        let query = McpCallQuery {
            approval: Some(id.clone()),
            limit: 1,
            ..McpCallQuery::default()
        };
        if let Some(record) = self.deps.store.mcp_calls(&query).await?.pop() {
            let answer = record
                .result
                .as_ref()
                .and_then(Answer::from_json)
                .unwrap_or_else(|| Answer {
                    text: record.detail.clone().unwrap_or_default(),
                    is_error: record.status != "ok",
                });
            return Ok(GatewayTask::Answered { answer, created_at });
        }
        // Taken, its turn ended, and never recorded: the process that took it ended
        // mid-call (its turn was interrupted at the next start). Whether the server
        // ran it is unknown.
        if ended {
            return Ok(GatewayTask::Answered {
                answer: Answer {
                    text: format!(
                        "agentplane stopped while `{}` ran after its approval; whether the \
                         server finished it is unknown",
                        approval.tool
                    ),
                    is_error: true,
                },
                created_at,
            });
        }
        Ok(GatewayTask::Working { created_at })
    }

    async fn record_mcp_call(
        &self,
        id: &McpCallId,
        who: &Who<'_>,
        (server, tool): (&str, &str),
        finished: &Finished,
        approval: Option<&ApprovalId>,
        keep_answer: bool,
    ) -> Result<(), HubError> {
        self.deps
            .store
            .record_mcp_call(McpCallRecord {
                id: id.clone(),
                ts: String::new(),
                client: who.client.to_owned(),
                agent: self.config.agent.clone(),
                server: server.to_owned(),
                tool: tool.to_owned(),
                status: finished.status.to_owned(),
                detail: finished.detail.clone(),
                policy: finished.policy.clone(),
                approval: approval.cloned(),
                duration_ms: finished.duration_ms,
                usd_micros: finished.usd_micros,
                result: keep_answer.then(|| finished.answer.to_json()),
            })
            .await?;
        Ok(())
    }

    /// Stores the approval a call waits for, in a thread and turn of its own.
    async fn suspend_mcp_call(
        &self,
        id: &McpCallId,
        caller: &Caller,
        tool: &GatewayTool,
        roles: &[String],
        ask: govern::ApprovalAsk,
    ) -> Result<ApprovalId, HubError> {
        let governance = &self.deps.governance;
        let thread = self
            .deps
            .store
            .create_thread(NewThread {
                id: ThreadId::new(),
                client_id: caller.client().to_owned(),
                agent: self.config.agent.clone(),
                cwd: "/".to_owned(),
                title: Some(format!("MCP gateway: {}", tool.name)),
                agent_version: None,
            })
            .await?;
        let started = EventPayload::TurnStarted {
            agent: self.config.agent.clone(),
            input: tool.name.clone(),
            model: String::new(),
            workspace: thread.cwd.clone(),
            agent_version: None,
            shadow_of: None,
        };
        let begun = turn::begin_turn(&self.deps, &thread.id, &tool.name, false, started).await?;
        let snapshot = Snapshot {
            kind: KIND.to_owned(),
            call: id.clone(),
            server: tool.server.clone(),
            tool: tool.name.clone(),
            roles: roles.to_vec(),
            policy_set: ask.explanation.policy_set.clone(),
            separate_approver: ask.separate,
            schema: tool.spec.parameters.clone(),
        };
        let snapshot = serde_json::to_value(&snapshot)
            .map_err(|e| HubError::InvalidArgument(format!("an MCP call's state: {e}")))?;
        let approval = ApprovalId::new();
        let expires = Timestamp::now()
            .checked_add(governance.approval_ttl)
            .unwrap_or(Timestamp::MAX);
        let explanation: PolicyExplanation = ask.explanation;
        self.deps
            .store
            .create_approval(NewApproval {
                id: approval.clone(),
                thread_id: thread.id.clone(),
                turn_id: begun.turn().clone(),
                call_id: id.to_string(),
                tool: tool.governed().to_owned(),
                args_preview_hash: agentplane_core::args_preview_hash(&ask.arguments),
                arguments: ask.arguments,
                arguments_in_event: governance.retention == crate::governance::ArgsRetention::Full,
                policy: ask.policy,
                approvers: ask.approvers,
                expires_at: expires.to_string(),
                explanation: Some(explanation),
                snapshot,
            })
            .await?;
        Ok(approval)
    }

    /// Resumes the gateway call of a decided approval: `true` when it was one (taken
    /// here or by someone else), `false` for an agent's approval.
    pub(crate) async fn resume(self: &Arc<Self>, id: &ApprovalId) -> bool {
        let Ok(Some(record)) = self.deps.store.approval(id).await else {
            return false;
        };
        let Some(snapshot) = snapshot_of(&record) else {
            return false;
        };
        let gateway = self.clone();
        let id = id.clone();
        self.tasks.spawn(async move {
            if let Err(e) = gateway.run_decided(&id, snapshot).await {
                tracing::error!(%id, error = %e, "a decided MCP gateway call could not be recorded");
            }
        });
        true
    }

    async fn run_decided(&self, id: &ApprovalId, snapshot: Snapshot) -> Result<(), HubError> {
        let Ok(approval) = self.deps.store.claim_approval(id).await else {
            // Pending, or taken by another process.
            return Ok(());
        };
        let roles = snapshot.roles.clone();
        let who = Who {
            client: &approval.client_id,
            roles: &roles,
        };
        let tool = self.decided_tool(&approval, &snapshot).await;
        let finished = match (&approval.status, tool) {
            (ApprovalStatus::Decided(ApprovalOutcome::Approved), Ok((upstreams, tool))) => {
                self.run_approved(
                    &upstreams,
                    &who,
                    &tool,
                    approval.arguments.clone(),
                    &snapshot,
                )
                .await
            }
            (ApprovalStatus::Decided(ApprovalOutcome::Edited), Ok((upstreams, tool))) => {
                let arguments = approval
                    .edited_arguments
                    .clone()
                    .unwrap_or_else(|| approval.arguments.clone());
                self.run_approved(&upstreams, &who, &tool, arguments, &snapshot)
                    .await
            }
            (ApprovalStatus::Decided(outcome), _)
                if matches!(
                    outcome,
                    ApprovalOutcome::Rejected | ApprovalOutcome::Expired
                ) =>
            {
                let (status, text) = if *outcome == ApprovalOutcome::Expired {
                    (
                        "expired",
                        format!(
                            "approval {id} for `{}` expired before anyone decided; the call \
                             did not run",
                            snapshot.tool
                        ),
                    )
                } else {
                    let feedback = approval
                        .feedback
                        .as_deref()
                        .map(|f| format!(": {f}"))
                        .unwrap_or_default();
                    (
                        "rejected",
                        format!(
                            "`{}` was rejected by {}{feedback}; the call did not run",
                            snapshot.tool,
                            approval.decided_by.as_deref().unwrap_or("a person")
                        ),
                    )
                };
                unanswered(status, text)
            }
            (_, Err(reason)) => unanswered("error", reason),
            (ApprovalStatus::Pending | ApprovalStatus::Decided(_), Ok(_)) => {
                unanswered("error", format!("approval {id} is in no state to run"))
            }
        };
        let recorded = (snapshot.server.as_str(), snapshot.tool.as_str());
        self.record_mcp_call(&snapshot.call, &who, recorded, &finished, Some(id), true)
            .await?;
        let stop = if finished.answer.is_error {
            StopReason::Error
        } else {
            StopReason::Finished
        };
        self.end_gateway_turn(&approval.thread_id, &approval.turn_id, stop, &finished)
            .await
    }

    async fn decided_tool(
        &self,
        approval: &ApprovalRecord,
        snapshot: &Snapshot,
    ) -> Result<(Arc<dyn McpUpstreams>, GatewayTool), String> {
        let upstreams = self
            .upstreams
            .clone()
            .ok_or_else(|| "the MCP gateway offers no servers any more".to_owned())?;
        let tool = find_tool(upstreams.as_ref(), &approval.client_id, &snapshot.tool)
            .await
            .map_err(|why| why.message)?
            .filter(|t| t.governed() == approval.tool)
            .ok_or_else(|| format!("`{}` is no longer offered", snapshot.tool))?;
        Ok((upstreams, tool))
    }

    async fn run_approved(
        &self,
        upstreams: &Arc<dyn McpUpstreams>,
        who: &Who<'_>,
        tool: &GatewayTool,
        arguments: Value,
        snapshot: &Snapshot,
    ) -> Finished {
        match self
            .gateway_of(upstreams)
            .govern(who, tool, arguments, Some(&snapshot.policy_set))
            .await
        {
            Gated::Done(finished) => finished,
            Gated::Approval(_) => unanswered(
                "error",
                "the approved call asked for an approval again".to_owned(),
            ),
        }
    }

    async fn end_gateway_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop: StopReason,
        finished: &Finished,
    ) -> Result<(), HubError> {
        let result = serde_json::json!({
            "status": finished.status,
            "detail": finished.detail,
        });
        self.deps
            .store
            .complete_turn(thread, turn, stop, result)
            .await?;
        Ok(())
    }
}

/// The offered tool `name` (`SERVER__TOOL`) for `client`. Server names never hold
/// `__`, so the server is what precedes the first one.
async fn find_tool(
    upstreams: &dyn McpUpstreams,
    client: &str,
    name: &str,
) -> Result<Option<GatewayTool>, ToolError> {
    let Some((server, _)) = name.split_once("__") else {
        return Ok(None);
    };
    let governed = format!("mcp__{name}");
    Ok(upstreams
        .tool(client, server, &governed)
        .await?
        .map(GatewayTool::of))
}

fn unanswered(status: &'static str, text: String) -> Finished {
    Finished {
        answer: Answer {
            text: text.clone(),
            is_error: true,
        },
        status,
        detail: Some(text),
        policy: None,
        usd_micros: 0,
        duration_ms: 0,
    }
}

/// The gateway call an approval waits for; `None` for an agent's approval.
fn snapshot_of(approval: &ApprovalRecord) -> Option<Snapshot> {
    if approval.snapshot.get("kind").and_then(Value::as_str) != Some(KIND) {
        return None;
    }
    serde_json::from_value(approval.snapshot.clone()).ok()
}
