//! The turn loop: one user input, model calls and tool calls until `finish_task`, a
//! plain answer, the step limit, an error or cancellation.
//!
//! Every step is an event, appended to the store before anyone else sees it; the
//! observer is told only about stored events (and, for live display, raw text). The
//! loop owns the ensembles' lifecycle: each one opened is closed, whatever happens.
//! Cancellation is checked at every await point by racing the token, so Ctrl-C or a
//! cancel request ends the turn within one poll, recorded as `cancelled`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use agentplane_core::policy::{Rule, Timestamp};
use agentplane_core::secret;
use agentplane_core::{
    AgentSpec, ApprovalId, ApprovalOutcome, ChatMessage, ChatRequest, ErrorCode, Event,
    EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, ToolCall, ToolErrorKind,
    ToolSpec, ToolStatus, TurnId, Usage, args_preview_hash, usd_of_micros,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::governance::{ArgsRetention, BudgetError, Governance, RateFacts};
use crate::harmony;
use crate::permissions::{self, PermissionBroker};
use crate::policy::{self, Decision, RequestContext};
use crate::ports::{
    ApprovalRecord, ApprovalStatus, Ensemble, EventStore, NewApproval, NewPermission, StoreError,
    ToolContext, ToolError,
};
use crate::providers::{Providers, RouteKey, TaskSize};
use crate::schema::Schema;

/// What the model call passes to the task recording its stream.
enum Streamed {
    Text(String),
    /// A `provider_failover` event.
    Failover(Box<EventPayload>),
}

/// The name of the terminal tool every agent gets.
pub const FINISH_TASK: &str = "finish_task";

/// Longer than any marker `harmony::contains_harmony` looks for (`<|channel|>`).
const HARMONY_MARKER_MAX: usize = 16;

/// Coalesce streamed text into one `message_delta` event per this many bytes…
pub(crate) const DELTA_FLUSH_BYTES: usize = 512;
/// …or per this much time, whichever comes first.
const DELTA_FLUSH_AFTER: Duration = Duration::from_millis(50);

/// The ports a turn uses.
#[derive(Clone)]
pub struct TurnDeps {
    pub store: Arc<dyn EventStore>,
    /// The model providers, their routing and health: every model call goes through
    /// [`Providers::chat`]. One model server: [`Providers::single`].
    pub providers: Arc<Providers>,
    pub governance: Arc<Governance>,
}

/// Permission handling of a turn: who wakes it and how long it waits.
#[derive(Clone)]
pub struct PermissionSettings {
    pub broker: Arc<PermissionBroker>,
    pub timeout: Duration,
}

/// Everything one turn needs, already resolved by the caller.
pub struct TurnRequest {
    pub agent: AgentSpec,
    /// The client the turn runs for (policies, budgets and rate limits select on it).
    pub client: String,
    /// The model id to call, as resolved against the server.
    pub model: String,
    pub input: String,
    /// Messages before the input: the thread's summary and recent turns.
    pub history: Vec<ChatMessage>,
    /// `None`: nobody can answer permission requests, so they are declined at once.
    pub permissions: Option<PermissionSettings>,
    /// The canonical workspace root.
    pub workspace: PathBuf,
    /// The agent's ensembles, not yet opened.
    pub ensembles: Vec<Arc<dyn Ensemble>>,
    /// The caller's task-size hint for routing; `None`: estimated from the user text
    /// of the conversation ([`TaskSize::estimate`]).
    pub size: Option<TaskSize>,
    /// The agent version the turn runs, recorded in `turn_started` (ADR 0016).
    pub agent_version: Option<String>,
    /// Set for a shadow run: the thread whose turn this copies. Side-effecting tools
    /// (and calls that would need a person) are recorded as not executed.
    pub shadow_of: Option<ThreadId>,
}

/// Sees a turn as it happens. Called from the turn's task: keep it quick.
pub trait TurnObserver: Send + Sync {
    /// A stored event.
    fn on_event(&self, event: &Event);

    /// Raw text as the model streams it, before it is coalesced into events.
    fn on_text(&self, _text: &str) {}
}

/// An observer that ignores everything.
pub struct NoObserver;

impl TurnObserver for NoObserver {
    fn on_event(&self, _event: &Event) {}
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub thread: ThreadId,
    pub turn: TurnId,
    pub stop_reason: StopReason,
    /// `finish_task`'s arguments, `{"text": …}` for a plain answer, `null` otherwise.
    pub result: Value,
    /// Set when `stop_reason` is `Error`.
    pub error: Option<TurnError>,
    /// Tokens of all model calls of the turn (of this run, when resumed).
    pub usage: Usage,
    /// Set when the turn did not end but is suspended on this approval: it resumes on
    /// the decision, and `stop_reason` means nothing yet.
    pub suspended: Option<ApprovalId>,
}

/// A failure that ended a turn, as recorded in its `error` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnError {
    pub code: ErrorCode,
    pub message: String,
}

/// Why a turn could not be run or recorded at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Store(e) => e.code(),
        }
    }
}

/// A turn the store has begun: proof that it is the thread's one running turn.
/// Only `begin_turn` makes one, and `run_turn` consumes it, so a turn runs once.
#[derive(Debug)]
pub struct BegunTurn {
    thread: ThreadId,
    turn: TurnId,
}

impl BegunTurn {
    pub fn thread(&self) -> &ThreadId {
        &self.thread
    }

    pub fn turn(&self) -> &TurnId {
        &self.turn
    }
}

/// Begins a turn on a thread. `NotFound` without the thread, `Conflict` while another
/// turn of the thread runs.
pub async fn begin_turn(
    deps: &TurnDeps,
    thread: &ThreadId,
    input: &str,
    internal: bool,
) -> Result<BegunTurn, EngineError> {
    let turn = TurnId::new();
    deps.store
        .begin_turn(thread, &turn, input, internal)
        .await?;
    Ok(BegunTurn {
        thread: thread.clone(),
        turn,
    })
}

/// Runs a begun turn to its end.
///
/// Returns `Err` only when the store fails; everything else, model errors included,
/// ends the turn with a recorded stop reason and comes back as `Ok(TurnOutcome)`.
pub async fn run_turn(
    deps: &TurnDeps,
    begun: BegunTurn,
    request: TurnRequest,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    run(deps, begun, request, None, observer, cancel).await
}

/// Takes a decided approval for its suspended turn: the proof that this caller, and
/// nobody else, resumes it. `Conflict` while it is pending or once it was taken.
pub async fn claim_approval(
    deps: &TurnDeps,
    id: &ApprovalId,
) -> Result<(BegunTurn, ApprovalRecord), EngineError> {
    let record = deps.store.claim_approval(id).await?;
    let begun = BegunTurn {
        thread: record.thread_id.clone(),
        turn: record.turn_id.clone(),
    };
    Ok((begun, record))
}

/// Continues a suspended turn from its claimed approval: the waiting call runs (as
/// approved or edited) or is answered with the rejection, then the loop goes on where
/// it stopped. `request.input` and `request.history` are not used; the state comes
/// from the approval's snapshot.
pub async fn resume_turn(
    deps: &TurnDeps,
    begun: BegunTurn,
    request: TurnRequest,
    approval: ApprovalRecord,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    run(deps, begun, request, Some(approval), observer, cancel).await
}

async fn run(
    deps: &TurnDeps,
    begun: BegunTurn,
    request: TurnRequest,
    approval: Option<ApprovalRecord>,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    let mut turn = ActiveTurn {
        deps,
        thread: begun.thread,
        turn: begun.turn,
        observer,
        usage: Usage::default(),
        scope: None,
        size: request.size,
    };
    if approval.is_none() {
        turn.record(EventPayload::TurnStarted {
            agent: request.agent.name.clone(),
            input: request.input.clone(),
            model: request.model.clone(),
            workspace: request.workspace.display().to_string(),
            agent_version: request.agent_version.clone(),
            shadow_of: request.shadow_of.as_ref().map(|t| t.to_string()),
        })
        .await?;
    }

    let ensembles = request.ensembles.clone();
    let ended = turn.drive(&request, approval, &cancel).await;
    // Close every ensemble whatever happened; a close never fails the turn.
    for ensemble in &ensembles {
        ensemble.close().await;
    }

    let ending = match ended {
        Ok(Ending {
            suspended: Some(id),
            ..
        }) => {
            return Ok(TurnOutcome {
                thread: turn.thread,
                turn: turn.turn,
                stop_reason: StopReason::Interrupted,
                result: Value::Null,
                error: None,
                usage: turn.usage,
                suspended: Some(id),
            });
        }
        Ok(ending) => ending,
        Err(Stop::Store(e)) => return Err(e.into()),
        Err(Stop::Cancelled) => Ending::plain(StopReason::Cancelled, Value::Null),
        Err(Stop::Failed(error)) => {
            turn.record(EventPayload::Error {
                code: error.code,
                message: error.message.clone(),
            })
            .await?;
            Ending {
                stop_reason: StopReason::Error,
                result: Value::Null,
                error: Some(error),
                suspended: None,
            }
        }
    };
    turn.audit(&request).await?;
    let event = deps
        .store
        .complete_turn(
            &turn.thread,
            &turn.turn,
            ending.stop_reason,
            ending.result.clone(),
        )
        .await?;
    observer.on_event(&event);
    Ok(TurnOutcome {
        thread: turn.thread,
        turn: turn.turn,
        stop_reason: ending.stop_reason,
        result: ending.result,
        error: ending.error,
        usage: turn.usage,
        suspended: None,
    })
}

/// How the loop ended when it ended normally.
struct Ending {
    stop_reason: StopReason,
    result: Value,
    error: Option<TurnError>,
    /// The loop stopped to wait for this approval; the turn has not ended.
    suspended: Option<ApprovalId>,
}

impl Ending {
    fn plain(stop_reason: StopReason, result: Value) -> Self {
        Self {
            stop_reason,
            result,
            error: None,
            suspended: None,
        }
    }
}

/// What a suspended turn needs to go on, stored in its approval. Versioned so a
/// snapshot written by an older build is refused clearly rather than misread.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Snapshot {
    version: u32,
    model: String,
    /// Model calls made so far.
    step: u32,
    messages: Vec<ChatMessage>,
    /// The call waiting for the decision, with its parsed arguments.
    pending: ToolCall,
    arguments: Value,
    /// The tool's parameter schema, to check edited arguments against.
    schema: Value,
    /// The calls of the same step after the waiting one.
    queue: Vec<QueuedCall>,
    /// The caller's task-size hint, kept so the resumed turn routes as it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<String>,
}

const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct QueuedCall {
    call: ToolCall,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refused: Option<(ToolErrorKind, String)>,
}

impl QueuedCall {
    fn of(call: &PlannedCall) -> Self {
        match call {
            PlannedCall::Ready(call) => Self {
                call: call.clone(),
                refused: None,
            },
            PlannedCall::Refused(call, error) => Self {
                call: call.clone(),
                refused: Some((error.kind, error.message.clone())),
            },
        }
    }

    fn planned(self) -> PlannedCall {
        match self.refused {
            None => PlannedCall::Ready(self.call),
            Some((kind, message)) => {
                let tool = Some(self.call.name.clone());
                PlannedCall::Refused(
                    self.call,
                    harmony::HarmonyError {
                        kind,
                        tool,
                        message,
                    },
                )
            }
        }
    }
}

/// The schema of the tool a suspended turn waits to call: what an edit must satisfy.
/// `None` when the approval's snapshot is not one this build wrote.
pub fn approval_schema(approval: &ApprovalRecord) -> Option<Value> {
    let snapshot: Snapshot = serde_json::from_value(approval.snapshot.clone()).ok()?;
    (snapshot.version == SNAPSHOT_VERSION).then_some(snapshot.schema)
}

/// The model a suspended turn was using.
pub fn approval_model(approval: &ApprovalRecord) -> Option<String> {
    let snapshot: Snapshot = serde_json::from_value(approval.snapshot.clone()).ok()?;
    Some(snapshot.model)
}

/// Where the loop stands: model calls made, the conversation, calls still to handle.
struct Progress {
    step: u32,
    messages: Vec<ChatMessage>,
    queue: VecDeque<PlannedCall>,
}

impl Progress {
    /// Takes a handled call's end: its answer joins the conversation, or the loop ends
    /// (finished, or suspended on an approval).
    fn answer(&mut self, end: CallEnd) -> Option<Ending> {
        match end {
            CallEnd::Finished(result) => Some(Ending::plain(StopReason::Finished, result)),
            CallEnd::Answer { call_id, text } => {
                self.messages.push(ChatMessage::tool_result(call_id, text));
                None
            }
            CallEnd::Suspended(id) => Some(suspended(id)),
        }
    }
}

/// Why the loop stopped early.
enum Stop {
    Cancelled,
    Failed(TurnError),
    Store(StoreError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

fn failed(code: ErrorCode, message: impl Into<String>) -> Stop {
    Stop::Failed(TurnError {
        code,
        message: message.into(),
    })
}

/// Where a tool of this turn comes from.
enum ToolSource {
    Finish,
    Ensemble(usize),
}

struct ToolEntry {
    source: ToolSource,
    schema: Schema,
    /// The schema as JSON, kept for approvals.
    parameters: Value,
    /// From the tool's spec: a shadow run never executes it.
    side_effects: bool,
}

/// A turn that has begun in the store: the only way to record its events.
struct ActiveTurn<'a> {
    deps: &'a TurnDeps,
    thread: ThreadId,
    turn: TurnId,
    observer: &'a dyn TurnObserver,
    usage: Usage,
    /// The agent's data scopes in force, given to every tool call.
    scope: Option<Arc<Vec<agentplane_core::policy::DataScope>>>,
    /// The task-size hint for routing (the request's, or the suspended turn's).
    size: Option<TaskSize>,
}

impl ActiveTurn<'_> {
    async fn record(&self, payload: EventPayload) -> Result<Event, StoreError> {
        let event = self
            .deps
            .store
            .append(&self.thread, &self.turn, payload)
            .await?;
        self.observer.on_event(&event);
        Ok(event)
    }

    async fn drive(
        &mut self,
        request: &TurnRequest,
        approval: Option<ApprovalRecord>,
        cancel: &CancellationToken,
    ) -> Result<Ending, Stop> {
        let agent = &request.agent;
        for ensemble in &request.ensembles {
            let opened = tokio::select! {
                _ = cancel.cancelled() => return Err(Stop::Cancelled),
                opened = ensemble.open() => opened,
            };
            opened.map_err(|e| {
                failed(
                    ErrorCode::Internal,
                    format!("tool ensemble `{}` could not start: {e}", ensemble.name()),
                )
            })?;
        }
        let (specs, tools) = collect_tools(agent, &request.ensembles)?;
        let policies = self.deps.governance.policies.current();
        let scopes: Vec<_> = policy::data_scopes(&policies, &self.policy_ctx(request, None))
            .into_iter()
            .map(|(_, scope)| scope.clone())
            .collect();
        self.scope = (!scopes.is_empty()).then(|| Arc::new(scopes));
        let ctx = ToolContext {
            workspace: request.workspace.clone(),
            timeout: Duration::from_millis(agent.limits.tool_timeout_ms),
            output_cap: agent.limits.tool_output_cap_bytes,
            scope: self.scope.clone(),
        };

        let mut progress = match approval {
            None => {
                let mut messages = Vec::with_capacity(request.history.len() + 2);
                messages.push(ChatMessage::system(agent.system_prompt.clone()));
                messages.extend(request.history.iter().cloned());
                messages.push(ChatMessage::user(request.input.clone()));
                Progress {
                    step: 0,
                    messages,
                    queue: VecDeque::new(),
                }
            }
            Some(approval) => {
                // The suspended turn's size hint, so it routes as it began.
                if let Some(size) = approval.snapshot["size"].as_str().and_then(TaskSize::parse) {
                    self.size = Some(size);
                }
                let (mut progress, end) = self
                    .take_decision(approval, &tools, request, &ctx, cancel)
                    .await?;
                if let Some(ending) = progress.answer(end) {
                    return Ok(ending);
                }
                progress
            }
        };

        loop {
            while let Some(call) = progress.queue.pop_front() {
                let end = self
                    .handle_call(call, &tools, request, &ctx, cancel, &progress)
                    .await?;
                if let Some(ending) = progress.answer(end) {
                    return Ok(ending);
                }
            }
            if progress.step >= agent.limits.max_steps {
                return Ok(Ending::plain(StopReason::StepLimit, Value::Null));
            }
            let chat = ChatRequest {
                model: request.model.clone(),
                messages: progress.messages.clone(),
                tools: specs.clone(),
                temperature: None,
                max_tokens: None,
                tool_choice: None,
            };
            let response = self.call_model(&chat, request, cancel).await?;
            let (text, calls) = split_harmony(progress.step, response.content, response.tool_calls);
            progress.step += 1;
            if calls.is_empty() {
                return Ok(Ending::plain(
                    StopReason::TextAnswer,
                    json!({ "text": text }),
                ));
            }
            let assistant_calls = calls.iter().map(|c| c.call().clone()).collect();
            progress.messages.push(ChatMessage::assistant(
                (!text.is_empty()).then_some(text),
                assistant_calls,
            ));
            progress.queue = calls.into();
        }
    }

    /// The facts policies select on, for this turn and `tool`, now.
    fn policy_ctx<'r>(
        &self,
        request: &'r TurnRequest,
        tool: Option<&'r str>,
    ) -> RequestContext<'r> {
        RequestContext {
            agent: &request.agent.name,
            tags: &request.agent.tags,
            tool,
            client: &request.client,
            at: Timestamp::now(),
        }
    }

    /// Restores a suspended turn from its claimed approval and settles the waiting
    /// call by the decision: run as approved or edited, or answered with the rejection.
    async fn take_decision(
        &self,
        approval: ApprovalRecord,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
    ) -> Result<(Progress, CallEnd), Stop> {
        let snapshot: Snapshot = serde_json::from_value(approval.snapshot.clone())
            .ok()
            .filter(|s: &Snapshot| s.version == SNAPSHOT_VERSION)
            .ok_or_else(|| {
                failed(
                    ErrorCode::Internal,
                    format!(
                        "approval {} holds a turn state this agentplane cannot read",
                        approval.id
                    ),
                )
            })?;
        let progress = Progress {
            step: snapshot.step,
            messages: snapshot.messages,
            queue: snapshot
                .queue
                .into_iter()
                .map(QueuedCall::planned)
                .collect(),
        };
        let call = snapshot.pending;
        let started = Instant::now();
        let outcome = match approval.status {
            ApprovalStatus::Decided(outcome) if outcome.runs() => {
                let args = match outcome {
                    ApprovalOutcome::Edited => approval
                        .edited_arguments
                        .clone()
                        .unwrap_or(snapshot.arguments),
                    _ => snapshot.arguments,
                };
                match self
                    .execute(&call, args, tools, request, ctx, cancel, true)
                    .await?
                {
                    Gated::Done(outcome) => outcome,
                    // Approved calls are not sent back for approval.
                    Gated::Suspend { .. } => Err(ToolError::new(
                        ToolErrorKind::Rejected,
                        "the approval could not be applied",
                    )),
                }
            }
            status => {
                let why = match status {
                    ApprovalStatus::Decided(ApprovalOutcome::Expired) => {
                        "nobody decided before the approval expired".to_owned()
                    }
                    _ => "a reviewer rejected it".to_owned(),
                };
                let feedback = approval
                    .feedback
                    .as_deref()
                    .map(|f| format!("; feedback: {f}"))
                    .unwrap_or_default();
                Err(ToolError::new(
                    ToolErrorKind::Rejected,
                    format!("`{}` was not run: {why}{feedback}", call.name),
                ))
            }
        };
        let end = self.finish_call(call, outcome, started, ctx).await?;
        Ok((progress, end))
    }

    /// Stores the approval a call waits for, with the turn's state: the turn is
    /// suspended from here until the decision.
    #[allow(clippy::too_many_arguments)]
    async fn suspend(
        &self,
        call: &ToolCall,
        arguments: Value,
        schema: Value,
        policy: String,
        approvers: Vec<String>,
        request: &TurnRequest,
        progress: &Progress,
    ) -> Result<ApprovalId, Stop> {
        let governance = &self.deps.governance;
        let expires = Timestamp::now()
            .checked_add(governance.approval_ttl)
            .unwrap_or(Timestamp::MAX);
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            model: request.model.clone(),
            step: progress.step,
            messages: progress.messages.clone(),
            pending: call.clone(),
            arguments: arguments.clone(),
            schema,
            queue: progress.queue.iter().map(QueuedCall::of).collect(),
            size: self.size.map(|s| s.as_str().to_owned()),
        };
        let snapshot = serde_json::to_value(&snapshot)
            .map_err(|e| failed(ErrorCode::Internal, format!("turn state: {e}")))?;
        let id = ApprovalId::new();
        let (_, event) = self
            .deps
            .store
            .create_approval(NewApproval {
                id: id.clone(),
                thread_id: self.thread.clone(),
                turn_id: self.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                args_preview_hash: args_preview_hash(&arguments),
                arguments,
                arguments_in_event: governance.retention == ArgsRetention::Full,
                policy,
                approvers,
                expires_at: expires.to_string(),
                snapshot,
            })
            .await?;
        self.observer.on_event(&event);
        Ok(id)
    }

    /// After the turn: compares the tool calls it ran with the policies in force and
    /// records each mismatch as a `policy_violation` (policies may have changed while
    /// the turn ran or waited, and a call may have bypassed a check).
    async fn audit(&self, request: &TurnRequest) -> Result<(), StoreError> {
        let set = self.deps.governance.policies.current();
        if set.is_empty() {
            return Ok(());
        }
        let events = self.deps.store.turn_events(&self.turn).await?;
        let mut approved_calls = std::collections::HashSet::new();
        let mut approval_calls = HashMap::new();
        for event in &events {
            match &event.payload {
                EventPayload::ApprovalRequested {
                    approval_id,
                    call_id,
                    ..
                } => {
                    approval_calls.insert(approval_id.clone(), call_id.clone());
                }
                EventPayload::ApprovalDecided {
                    approval_id,
                    outcome,
                    ..
                } if outcome.runs() => {
                    if let Some(call) = approval_calls.get(approval_id) {
                        approved_calls.insert(call.clone());
                    }
                }
                _ => {}
            }
        }
        for event in &events {
            let EventPayload::ToolCallResult {
                call_id,
                tool,
                status,
                error_type,
                ..
            } = &event.payload
            else {
                continue;
            };
            let ran = *status == ToolStatus::Ok
                || matches!(
                    error_type,
                    Some(ToolErrorKind::ExecutionFailed | ToolErrorKind::Timeout)
                );
            if !ran || tool == FINISH_TASK {
                continue;
            }
            let at = event
                .ts
                .parse::<Timestamp>()
                .unwrap_or_else(|_| Timestamp::now());
            let ctx = RequestContext {
                at,
                ..self.policy_ctx(request, Some(tool))
            };
            let violation = match policy::evaluate(&set, &ctx) {
                Decision::Deny { policy, reason } => Some((
                    policy.to_owned(),
                    format!("`{tool}` ran although denied: {reason}"),
                )),
                Decision::RequireApproval { policy } if !approved_calls.contains(call_id) => {
                    Some((policy.to_owned(), format!("`{tool}` ran without approval")))
                }
                _ => None,
            };
            if let Some((policy, detail)) = violation {
                self.record(EventPayload::PolicyViolation {
                    policy,
                    tool: Some(tool.clone()),
                    call_id: Some(call_id.clone()),
                    detail,
                })
                .await?;
            }
        }
        Ok(())
    }

    /// One model call: streams text into coalesced `message_delta` events while the
    /// call runs, then records its usage.
    async fn call_model(
        &mut self,
        chat: &ChatRequest,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<agentplane_core::ChatResponse, Stop> {
        let governance = self.deps.governance.clone();
        let policies = governance.policies.current();
        // About four characters a token: enough to hold back a call the budget clearly
        // cannot pay for; the settled cost is exact.
        let chars: usize = chat
            .messages
            .iter()
            .map(|m| m.content.as_deref().map_or(0, str::len))
            .sum();
        let estimate = governance
            .prices
            .cost_micros(&chat.model, (chars / 4) as u64, 0);
        let reservation = match governance
            .budgets
            .reserve(
                self.deps.store.as_ref(),
                &policies,
                &self.policy_ctx(request, None),
                &governance.agent_tags,
                estimate,
            )
            .await
        {
            Ok(reservation) => reservation,
            Err(BudgetError::Exceeded(exceeded)) => {
                return Err(failed(ErrorCode::BudgetExceeded, exceeded.message()));
            }
            Err(BudgetError::Store(e)) => return Err(Stop::Store(e)),
        };
        let answered = self.stream_model(chat, request, cancel).await;
        let (response, provider) = match answered {
            Ok(routed) => (routed.response, routed.provider),
            Err(stop) => {
                governance.budgets.settle(reservation, 0);
                return Err(stop);
            }
        };
        let usage = response.usage.unwrap_or_default();
        let model = if response.model.is_empty() {
            chat.model.clone()
        } else {
            response.model.clone()
        };
        let usd_micros =
            governance
                .prices
                .cost_micros(&model, usage.input_tokens, usage.output_tokens);
        governance.budgets.settle(reservation, usd_micros);
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.record(EventPayload::Usage {
            provider: provider.clone(),
            model: model.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reported: response.usage.is_some(),
        })
        .await?;
        self.record(EventPayload::Cost {
            provider,
            model,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            usd_micros,
            usd: usd_of_micros(usd_micros),
        })
        .await?;
        Ok(response)
    }

    /// The model call itself, through the providers' routing and failover, streaming
    /// text into coalesced `message_delta` events. A failover is recorded as a
    /// `provider_failover` event after the text the failed attempt streamed (which
    /// stays in the log): the deltas after it restart the answer.
    async fn stream_model(
        &self,
        chat: &ChatRequest,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<crate::providers::Routed, Stop> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Streamed>();
        let providers = self.deps.providers.clone();
        let key = RouteKey {
            agent: &request.agent.name,
            tags: &request.agent.tags,
            size: self
                .size
                .unwrap_or_else(|| TaskSize::estimate(&chat.messages)),
        };
        let call = async move {
            let failovers = tx.clone();
            let mut on_text = move |text: &str| {
                // The receiver lives until this future ends; a send can only fail after.
                let _ = tx.send(Streamed::Text(text.to_owned()));
            };
            let mut on_failover = move |failover: crate::providers::Failover<'_>| {
                let _ = failovers.send(Streamed::Failover(Box::new(
                    EventPayload::ProviderFailover {
                        from: failover.from.to_owned(),
                        to: failover.to.to_owned(),
                        code: failover.error.code(),
                        message: failover.error.to_string(),
                    },
                )));
            };
            providers
                .chat(&key, chat, &mut on_text, &mut on_failover)
                .await
        };
        let this = self;
        let stream_text = async move {
            let mut pending = String::new();
            let mut seen = String::new();
            let mut markup = false;
            let mut last_flush = Instant::now();
            while let Some(streamed) = rx.recv().await {
                let text = match streamed {
                    Streamed::Text(text) => text,
                    Streamed::Failover(failover) => {
                        if !pending.is_empty() {
                            let text = std::mem::take(&mut pending);
                            this.record(EventPayload::MessageDelta { text }).await?;
                        }
                        this.record(*failover).await?;
                        // The next provider's answer starts from nothing.
                        seen.clear();
                        markup = false;
                        last_flush = Instant::now();
                        continue;
                    }
                };
                this.observer.on_text(&text);
                // Harmony markup is parsed after the call; never stream it as text. Only
                // the new text and a marker's length before it are searched, so a long
                // answer is not rescanned on every delta.
                let from = seen.len().saturating_sub(HARMONY_MARKER_MAX);
                seen.push_str(&text);
                let from = (0..=from)
                    .rev()
                    .find(|&i| seen.is_char_boundary(i))
                    .unwrap_or(0);
                markup = markup
                    || seen.trim_start().starts_with("<|")
                    || harmony::contains_harmony(&seen[from..]);
                if markup {
                    pending.clear();
                    continue;
                }
                pending.push_str(&text);
                if pending.len() >= DELTA_FLUSH_BYTES || last_flush.elapsed() >= DELTA_FLUSH_AFTER {
                    let text = std::mem::take(&mut pending);
                    this.record(EventPayload::MessageDelta { text }).await?;
                    last_flush = Instant::now();
                }
            }
            if !pending.is_empty() {
                this.record(EventPayload::MessageDelta { text: pending })
                    .await?;
            }
            Ok::<(), StoreError>(())
        };
        let (response, streamed) = tokio::select! {
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            both = async { tokio::join!(call, stream_text) } => both,
        };
        streamed?;
        response.map_err(|e| failed(e.code(), e.to_string()))
    }

    /// Validates, runs and records one tool call, or suspends the turn on it.
    async fn handle_call(
        &self,
        call: PlannedCall,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> Result<CallEnd, Stop> {
        let (call, early_error) = match call {
            PlannedCall::Ready(call) => (call, None),
            PlannedCall::Refused(call, error) => (call, Some(error)),
        };
        let parsed: Result<Value, String> = match &early_error {
            Some(error) => Err(error.message.clone()),
            None => serde_json::from_str(&call.arguments)
                .map_err(|e| format!("arguments are not valid JSON: {e}")),
        };
        let arguments = parsed.as_ref().cloned().unwrap_or(Value::Null);
        let hash = args_preview_hash(&arguments);
        self.record(EventPayload::ToolCallPlanned {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: self.retained(arguments),
            args_preview_hash: hash,
        })
        .await?;

        let started = Instant::now();
        let outcome = match (parsed, early_error) {
            (_, Some(error)) => Err(ToolError::new(error.kind, error.message)),
            (Err(message), None) => Err(ToolError::new(ToolErrorKind::InvalidArguments, message)),
            (Ok(args), None) => {
                match self
                    .execute(&call, args.clone(), tools, request, ctx, cancel, false)
                    .await?
                {
                    Gated::Done(outcome) => outcome,
                    Gated::Suspend {
                        policy,
                        approvers,
                        schema,
                    } => {
                        let id = self
                            .suspend(&call, args, schema, policy, approvers, request, progress)
                            .await?;
                        return Ok(CallEnd::Suspended(id));
                    }
                }
            }
        };
        self.finish_call(call, outcome, started, ctx).await
    }

    /// What events keep of arguments under `retention.tool_args`.
    fn retained(&self, arguments: Value) -> Value {
        match self.deps.governance.retention {
            ArgsRetention::Full => arguments,
            ArgsRetention::Hash => Value::Null,
        }
    }

    /// Records a call's result and turns it into what the model is told.
    async fn finish_call(
        &self,
        call: ToolCall,
        outcome: Result<Executed, ToolError>,
        started: Instant,
        ctx: &ToolContext,
    ) -> Result<CallEnd, Stop> {
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let hash = args_preview_hash(
            &serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::Null),
        );
        // (status, error type, what the model is told, truncated, whether the turn ends)
        let (status, error_type, output, truncated, finished) = match outcome {
            Ok(Executed::Finished(result)) => (
                ToolStatus::Ok,
                None,
                "accepted".to_owned(),
                false,
                Some(result),
            ),
            Ok(Executed::Output { content, truncated }) => {
                // A secret a tool printed reaches neither the model nor the log.
                let content = match secret::redact(&content) {
                    std::borrow::Cow::Borrowed(_) => content,
                    std::borrow::Cow::Owned(redacted) => redacted,
                };
                let (content, cut) = cap_output(content, ctx.output_cap);
                (ToolStatus::Ok, None, content, truncated || cut, None)
            }
            Err(error) => {
                if let Some(violation) = &error.security {
                    self.record(EventPayload::SecurityEvent {
                        event_type: violation.event_type.clone(),
                        tool: Some(call.name.clone()),
                        detail: violation.detail.clone(),
                    })
                    .await?;
                }
                let text = format!(
                    "error ({}): {}",
                    error.kind.as_str(),
                    secret::redact(&error.message)
                );
                let (text, _) = cap_output(text, ctx.output_cap);
                (ToolStatus::Error, Some(error.kind), text, false, None)
            }
        };
        self.record(EventPayload::ToolCallResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status,
            latency_ms,
            error_type,
            output: output.clone(),
            truncated,
            args_preview_hash: hash,
        })
        .await?;
        Ok(match finished {
            Some(result) => CallEnd::Finished(result),
            None => CallEnd::Answer {
                call_id: call.id,
                text: output,
            },
        })
    }

    /// Waits for a person to allow a call: stored and announced as
    /// `permission_required`, then resolved by a decision, the timeout, a disconnect or
    /// cancellation. Anything but an approval is a `PermissionDenied` tool error.
    async fn ask_permission(
        &self,
        call: &ToolCall,
        args: &Value,
        runs: Option<String>,
        request: &TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<Result<(), ToolError>, Stop> {
        let id = PermissionId::new();
        let settings = request.permissions.as_ref();
        let wake = settings.map(|s| s.broker.register(&id, &self.turn));
        let (_, event) = self
            .deps
            .store
            .create_permission(NewPermission {
                id: id.clone(),
                thread_id: self.thread.clone(),
                turn_id: self.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: self.retained(args.clone()),
                options: permissions::OPTIONS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .collect(),
                // The preview repeats the arguments: only where they are retained.
                runs: match self.deps.governance.retention {
                    ArgsRetention::Full => runs,
                    ArgsRetention::Hash => None,
                },
            })
            .await?;
        self.observer.on_event(&event);

        let (record, ours) = permissions::await_decision(
            self.deps.store.as_ref(),
            settings,
            wake,
            &id,
            None,
            cancel,
        )
        .await?;
        // When this turn resolved it (timeout, cancel, nobody to ask), show the event;
        // a decision from outside was shown by whoever wrote it.
        if let Some(event) = ours {
            self.observer.on_event(&event);
        }
        if cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        Ok(match permissions::decision_of(&record) {
            PermissionDecision::Approved => Ok(()),
            PermissionDecision::Declined => Err(ToolError::new(
                ToolErrorKind::PermissionDenied,
                format!(
                    "permission to run `{}` was declined: {}",
                    call.name,
                    record.reason.as_deref().unwrap_or("declined")
                ),
            )),
        })
    }

    /// Checks a parsed call against its schema and the policies, then runs it with the
    /// timeout. `approved`: a person already approved this exact call, so approval
    /// policies are satisfied (denials still hold: deny wins, even after approval).
    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        call: &ToolCall,
        args: Value,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        approved: bool,
    ) -> Result<Gated, Stop> {
        let done = |outcome| Ok(Gated::Done(outcome));
        let Some(entry) = tools.get(&call.name) else {
            let mut known: Vec<&str> = tools.keys().map(String::as_str).collect();
            known.sort_unstable();
            return done(Err(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!(
                    "there is no tool `{}`; the tools are: {}",
                    call.name,
                    known.join(", ")
                ),
            )));
        };
        if let Err(problems) = entry.schema.check(&args) {
            let what = match entry.source {
                ToolSource::Finish => "the result does not match the required output schema",
                ToolSource::Ensemble(_) => "the arguments do not match the tool's schema",
            };
            return done(Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("{what}: {problems}"),
            )));
        }
        let index = match entry.source {
            ToolSource::Finish => return done(Ok(Executed::Finished(args))),
            ToolSource::Ensemble(index) => index,
        };
        let Some(ensemble) = request.ensembles.get(index) else {
            return Err(failed(ErrorCode::Internal, "tool table out of date"));
        };
        let shadow = request.shadow_of.is_some();
        if shadow && entry.side_effects {
            return done(Err(not_executed_in_shadow(
                &call.name,
                "it has side effects",
            )));
        }
        let governance = &self.deps.governance;
        let policies = governance.policies.current();
        let policy_ctx = self.policy_ctx(request, Some(&call.name));
        let gate = policy::gate(&policies, &policy_ctx);
        match gate.decision {
            Decision::Deny { policy, reason } => {
                return done(Err(ToolError::new(
                    ToolErrorKind::PolicyDenied,
                    format!("policy `{policy}` forbids `{}`: {reason}", call.name),
                )));
            }
            Decision::RequireApproval { .. } if shadow => {
                return done(Err(not_executed_in_shadow(
                    &call.name,
                    "it needs a person's approval",
                )));
            }
            Decision::RequireApproval { policy } if !approved => {
                let approvers = match policies.get(policy).map(|p| p.rule()) {
                    Some(Rule::ApprovalRequired(rule)) => rule.approvers.clone(),
                    _ => Vec::new(),
                };
                return Ok(Gated::Suspend {
                    policy: policy.to_owned(),
                    approvers,
                    schema: entry.parameters.clone(),
                });
            }
            Decision::RequireApproval { .. } | Decision::Allow => {}
        }
        if shadow && request.agent.requires_permission.contains(&call.name) {
            return done(Err(not_executed_in_shadow(
                &call.name,
                "it needs a person's permission",
            )));
        }
        if request.agent.requires_permission.contains(&call.name)
            && let Err(denied) = self
                .ask_permission(
                    call,
                    &args,
                    ensemble.preview(&call.name, &args, ctx),
                    request,
                    cancel,
                )
                .await?
        {
            return done(Err(denied));
        }
        // A shadow run must never use up the rate limits of the turns it copies.
        if !shadow
            && let Err(refused) = governance
                .limiter
                .admit(
                    &gate.rate_limits,
                    RateFacts {
                        agent: &request.agent.name,
                        tool: Some(&call.name),
                        client: &request.client,
                    },
                )
                .await
        {
            return done(Err(ToolError::new(
                ToolErrorKind::RateLimited,
                refused.to_string(),
            )));
        }
        let run = tokio::time::timeout(ctx.timeout, ensemble.call(&call.name, args, ctx));
        let result = tokio::select! {
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            result = run => result,
        };
        done(match result {
            Err(_) => Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!(
                    "`{}` did not finish within {} ms and was stopped",
                    call.name,
                    ctx.timeout.as_millis()
                ),
            )),
            Ok(Err(error)) => Err(error),
            Ok(Ok(output)) => Ok(Executed::Output {
                content: output.content,
                truncated: output.truncated,
            }),
        })
    }
}

/// The answer to a call a shadow run records but does not execute.
fn not_executed_in_shadow(tool: &str, why: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotExecutedInShadow,
        format!("`{tool}` was not executed in shadow mode: {why}"),
    )
}

/// What the policy gate made of a call.
enum Gated {
    /// Handled here: ran, or refused.
    Done(Result<Executed, ToolError>),
    /// It waits for a person: the turn suspends on an approval.
    Suspend {
        policy: String,
        approvers: Vec<String>,
        schema: Value,
    },
}

fn suspended(id: ApprovalId) -> Ending {
    Ending {
        stop_reason: StopReason::Interrupted,
        result: Value::Null,
        error: None,
        suspended: Some(id),
    }
}

/// A call as the model made it: well-formed, or refused before parsing (Harmony
/// payload errors), which still get planned/result events and a tool answer.
enum PlannedCall {
    Ready(ToolCall),
    Refused(ToolCall, harmony::HarmonyError),
}

impl PlannedCall {
    fn call(&self) -> &ToolCall {
        match self {
            Self::Ready(call) | Self::Refused(call, _) => call,
        }
    }
}

enum Executed {
    Finished(Value),
    Output { content: String, truncated: bool },
}

enum CallEnd {
    Finished(Value),
    Answer {
        call_id: String,
        text: String,
    },
    /// The turn waits for this approval.
    Suspended(ApprovalId),
}

/// Native tool calls win; Harmony markup in the text is parsed only when the server
/// returned none, so a model is never asked to use two protocols at once.
fn split_harmony(step: u32, content: String, native: Vec<ToolCall>) -> (String, Vec<PlannedCall>) {
    if !native.is_empty() || !harmony::contains_harmony(&content) {
        return (
            content,
            native.into_iter().map(PlannedCall::Ready).collect(),
        );
    }
    let parsed = harmony::parse(&content);
    let calls = parsed
        .calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| match call {
            // The parser numbers calls per response; the step makes ids unique per turn.
            Ok(call) => PlannedCall::Ready(ToolCall {
                id: format!("{}_s{step}", call.id),
                ..call
            }),
            Err(error) => {
                let placeholder = ToolCall {
                    id: format!("harmony_error_{i}_s{step}"),
                    name: error.tool.clone().unwrap_or_else(|| "unknown".to_owned()),
                    arguments: String::new(),
                };
                PlannedCall::Refused(placeholder, error)
            }
        })
        .collect();
    (parsed.text, calls)
}

/// The tools of a turn: the ensembles' tools plus `finish_task` when the agent has an
/// output schema; names unique.
fn collect_tools(
    agent: &AgentSpec,
    ensembles: &[Arc<dyn Ensemble>],
) -> Result<(Vec<ToolSpec>, HashMap<String, ToolEntry>), Stop> {
    let mut specs = Vec::new();
    let mut tools = HashMap::new();
    let finish = agent.output_schema.as_ref().map(|schema| ToolSpec {
        name: FINISH_TASK.to_owned(),
        description: "Call this exactly once when the task is done. Its arguments are the \
                      final result of the task."
            .to_owned(),
        parameters: schema.clone(),
        side_effects: false,
    });
    let sources = ensembles
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            e.tools()
                .into_iter()
                .map(move |t| (ToolSource::Ensemble(i), t))
        })
        .chain(finish.map(|f| (ToolSource::Finish, f)));
    for (source, spec) in sources {
        let schema = Schema::compile(&spec.parameters).map_err(|e| {
            failed(
                ErrorCode::InvalidArgument,
                format!("tool `{}` of agent `{}`: {e}", spec.name, agent.name),
            )
        })?;
        if tools
            .insert(
                spec.name.clone(),
                ToolEntry {
                    source,
                    schema,
                    parameters: spec.parameters.clone(),
                    side_effects: spec.side_effects,
                },
            )
            .is_some()
        {
            return Err(failed(
                ErrorCode::InvalidArgument,
                format!("agent `{}` has two tools named `{}`", agent.name, spec.name),
            ));
        }
        specs.push(spec);
    }
    Ok((specs, tools))
}

/// Cuts `text` to at most `cap` bytes on a character boundary, with a note.
fn cap_output(mut text: String, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!(
        "\n[output truncated: {end} of {total} bytes shown]"
    ));
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_capped_on_a_char_boundary() {
        let (text, cut) = cap_output("ééé".to_owned(), 3);
        assert!(cut);
        assert!(text.starts_with('é'));
        assert!(text.contains("2 of 6 bytes"));
        let (text, cut) = cap_output("short".to_owned(), 10);
        assert_eq!((text.as_str(), cut), ("short", false));
    }
}
