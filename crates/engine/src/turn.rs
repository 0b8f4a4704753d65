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

use agentplane_core::{
    AgentSpec, ChatMessage, ChatRequest, ErrorCode, Event, EventPayload, PermissionDecision,
    PermissionId, StopReason, ThreadId, ToolCall, ToolErrorKind, ToolSpec, ToolStatus, TurnId,
    Usage, args_preview_hash,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::governance::Governance;
use crate::harmony;
use crate::permissions::{self, PermissionBroker};
use crate::ports::{
    ChatModel, Ensemble, EventStore, NewPermission, StoreError, ToolContext, ToolError,
};
use crate::schema::Schema;

/// The name of the terminal tool every agent gets.
pub const FINISH_TASK: &str = "finish_task";

/// Longer than any marker `harmony::contains_harmony` looks for (`<|channel|>`).
const HARMONY_MARKER_MAX: usize = 16;

/// Coalesce streamed text into one `message_delta` event per this many bytes…
const DELTA_FLUSH_BYTES: usize = 512;
/// …or per this much time, whichever comes first.
const DELTA_FLUSH_AFTER: Duration = Duration::from_millis(50);

/// The ports a turn uses.
#[derive(Clone)]
pub struct TurnDeps {
    pub store: Arc<dyn EventStore>,
    pub model: Arc<dyn ChatModel>,
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
    /// Tokens of all model calls of the turn.
    pub usage: Usage,
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
    let mut turn = ActiveTurn {
        deps,
        thread: begun.thread,
        turn: begun.turn,
        observer,
        usage: Usage::default(),
    };
    turn.record(EventPayload::TurnStarted {
        agent: request.agent.name.clone(),
        input: request.input.clone(),
        model: request.model.clone(),
        workspace: request.workspace.display().to_string(),
    })
    .await?;

    let ensembles = request.ensembles.clone();
    let ended = turn.drive(&request, &cancel).await;
    // Close every ensemble whatever happened; a close never fails the turn.
    for ensemble in &ensembles {
        ensemble.close().await;
    }

    let ending = match ended {
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
            }
        }
    };
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
    })
}

/// How the loop ended when it ended normally.
struct Ending {
    stop_reason: StopReason,
    result: Value,
    error: Option<TurnError>,
}

impl Ending {
    fn plain(stop_reason: StopReason, result: Value) -> Self {
        Self {
            stop_reason,
            result,
            error: None,
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
}

/// A turn that has begun in the store: the only way to record its events.
struct ActiveTurn<'a> {
    deps: &'a TurnDeps,
    thread: ThreadId,
    turn: TurnId,
    observer: &'a dyn TurnObserver,
    usage: Usage,
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

        let mut messages = Vec::with_capacity(request.history.len() + 2);
        messages.push(ChatMessage::system(agent.system_prompt.clone()));
        messages.extend(request.history.iter().cloned());
        messages.push(ChatMessage::user(request.input.clone()));
        let ctx = ToolContext {
            workspace: request.workspace.clone(),
            timeout: Duration::from_millis(agent.limits.tool_timeout_ms),
            output_cap: agent.limits.tool_output_cap_bytes,
            scope: None,
        };

        for step in 0..agent.limits.max_steps {
            let chat = ChatRequest {
                model: request.model.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
                temperature: None,
            };
            let response = self.call_model(&chat, cancel).await?;
            let (text, calls) = split_harmony(step, response.content, response.tool_calls);
            if calls.is_empty() {
                return Ok(Ending::plain(
                    StopReason::TextAnswer,
                    json!({ "text": text }),
                ));
            }
            let assistant_calls = calls.iter().map(|c| c.call().clone()).collect();
            messages.push(ChatMessage::assistant(
                (!text.is_empty()).then_some(text),
                assistant_calls,
            ));
            for call in calls {
                match self
                    .handle_call(call, &tools, request, &ctx, cancel)
                    .await?
                {
                    CallEnd::Finished(result) => {
                        return Ok(Ending::plain(StopReason::Finished, result));
                    }
                    CallEnd::Answer { call_id, text } => {
                        messages.push(ChatMessage::tool_result(call_id, text));
                    }
                }
            }
        }
        Ok(Ending::plain(StopReason::StepLimit, Value::Null))
    }

    /// One model call: streams text into coalesced `message_delta` events while the
    /// call runs, then records its usage.
    async fn call_model(
        &mut self,
        chat: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<agentplane_core::ChatResponse, Stop> {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let model = self.deps.model.clone();
        let call = async move {
            let mut on_text = move |text: &str| {
                // The receiver lives until this future ends; a send can only fail after.
                let _ = tx.send(text.to_owned());
            };
            model.chat(chat, &mut on_text).await
        };
        let this = &*self;
        let stream_text = async move {
            let mut pending = String::new();
            let mut seen = String::new();
            let mut markup = false;
            let mut last_flush = Instant::now();
            while let Some(text) = rx.recv().await {
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
        let response = response.map_err(|e| failed(e.code(), e.to_string()))?;
        let usage = response.usage.unwrap_or_default();
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.record(EventPayload::Usage {
            provider: self.deps.model.provider().to_owned(),
            model: if response.model.is_empty() {
                chat.model.clone()
            } else {
                response.model.clone()
            },
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reported: response.usage.is_some(),
        })
        .await?;
        Ok(response)
    }

    /// Validates, runs and records one tool call.
    async fn handle_call(
        &self,
        call: PlannedCall,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
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
            arguments: arguments.clone(),
            args_preview_hash: hash.clone(),
        })
        .await?;

        let started = Instant::now();
        let outcome = match (parsed, early_error) {
            (_, Some(error)) => Err(ToolError::new(error.kind, error.message)),
            (Err(message), None) => Err(ToolError::new(ToolErrorKind::InvalidArguments, message)),
            (Ok(args), None) => {
                self.execute(&call, args, tools, request, ctx, cancel)
                    .await?
            }
        };
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

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
                let text = format!("error ({}): {}", error.kind.as_str(), error.message);
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
                arguments: args.clone(),
                options: permissions::OPTIONS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .collect(),
            })
            .await?;
        self.observer.on_event(&event);

        let reason = match (settings, wake) {
            (Some(settings), Some(wake)) => {
                tokio::select! {
                    _ = cancel.cancelled() => "the turn was cancelled".to_owned(),
                    _ = wake.notified() => String::new(),
                    _ = tokio::time::sleep(settings.timeout) => format!(
                        "no decision within {} s", settings.timeout.as_secs()
                    ),
                }
            }
            _ => "nobody can answer permission requests here".to_owned(),
        };
        let broker = settings.map(|s| s.broker.clone()).unwrap_or_default();
        let (record, ours) = permissions::settle(
            self.deps.store.as_ref(),
            &broker,
            &id,
            PermissionDecision::Declined,
            if reason.is_empty() {
                "declined"
            } else {
                &reason
            },
        )
        .await?;
        broker.forget(&id);
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

    /// Checks a parsed call against its schema and runs it with the timeout.
    async fn execute(
        &self,
        call: &ToolCall,
        args: Value,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
    ) -> Result<Result<Executed, ToolError>, Stop> {
        let Some(entry) = tools.get(&call.name) else {
            let mut known: Vec<&str> = tools.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Ok(Err(ToolError::new(
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
            return Ok(Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("{what}: {problems}"),
            )));
        }
        let index = match entry.source {
            ToolSource::Finish => return Ok(Ok(Executed::Finished(args))),
            ToolSource::Ensemble(index) => index,
        };
        let Some(ensemble) = request.ensembles.get(index) else {
            return Err(failed(ErrorCode::Internal, "tool table out of date"));
        };
        if request.agent.requires_permission.contains(&call.name)
            && let Err(denied) = self.ask_permission(call, &args, request, cancel).await?
        {
            return Ok(Err(denied));
        }
        let run = tokio::time::timeout(ctx.timeout, ensemble.call(&call.name, args, ctx));
        let result = tokio::select! {
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            result = run => result,
        };
        Ok(match result {
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
    Answer { call_id: String, text: String },
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
            .insert(spec.name.clone(), ToolEntry { source, schema })
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
