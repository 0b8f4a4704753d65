//! The turn loop: one user input, model calls and tool calls until `finish_task`, a
//! plain answer, the step limit, an error or cancellation.
//!
//! Every step is an event, appended to the store before anyone else sees it; the
//! observer is told only about stored events (and, for live display, raw text). The
//! loop owns the ensembles' lifecycle: each one opened is closed, whatever happens.
//! Cancellation is checked at every await point by racing the token, so Ctrl-C or a
//! cancel request ends the turn within one poll, recorded as `cancelled`.
//!
//! This file is the loop; what it carries lives in files the steps share and that name
//! nothing back: `request.rs` (what a turn is given), `outcome.rs` (what it gives
//! back), `active.rs` (the begun and the running turn), `progress.rs` (where the loop
//! stands, the calls it carries, how it stops), `tools.rs` (the turn's tools). The steps
//! are the other files, each adding its methods to `ActiveTurn`.

use std::sync::Arc;
use std::time::Duration;

use std::collections::VecDeque;

use agentplane_core::{
    ApprovalId, ChatMessage, ChatRequest, ErrorCode, EventPayload, StopReason, ThreadId,
    ToolCallMode, TurnId, Usage,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::governance::rules;
use crate::models::TaskSize;
use crate::ports::telemetry;
use crate::ports::{ApprovalRecord, StoreError, ToolContext};

mod active;
mod approval;
mod model_call;
mod outcome;
mod progress;
mod record;
mod request;
mod spending;
mod text_calls;
mod tool_call;
mod tool_gate;
mod tools;

use active::ActiveTurn;
pub use active::BegunTurn;
pub use approval::{approval_model, approval_roles, approval_schema, approval_separate};
pub(crate) use model_call::DELTA_FLUSH_BYTES;
use model_call::*;
pub use outcome::{NoObserver, TurnError, TurnObserver, TurnOutcome};
use progress::*;
pub use request::{TurnDeps, TurnRequest};
use text_calls::*;
pub(crate) use tool_call::cap_output;
use tools::collect_tools;

pub use agentplane_core::FINISH_TASK;

pub use crate::permissions::PermissionSettings;

pub use crate::error::EngineError;

/// Begins a turn on a thread with its first event, `started` (a `turn_started`),
/// stored in the same transaction, so a crash never leaves a turn without it. `input`
/// is what the turn row keeps. `NotFound` without the thread, `Conflict` while another
/// turn of the thread runs.
pub async fn begin_turn(
    deps: &TurnDeps,
    thread: &ThreadId,
    input: &str,
    internal: bool,
    started: EventPayload,
) -> Result<BegunTurn, EngineError> {
    let turn = TurnId::new();
    let (_, started) = deps
        .store
        .start_turn(thread, &turn, input, internal, started)
        .await?;
    Ok(BegunTurn {
        thread: thread.clone(),
        turn,
        started: Some(started),
    })
}

/// [`begin_turn`] for `request`, whose agent, model and workspace its `turn_started`
/// names.
pub async fn start_turn(
    deps: &TurnDeps,
    thread: &ThreadId,
    input: &str,
    internal: bool,
    request: &TurnRequest,
) -> Result<BegunTurn, EngineError> {
    begin_turn(deps, thread, input, internal, turn_started(request)).await
}

/// A turn's first event, as its request says.
pub(crate) fn turn_started(request: &TurnRequest) -> EventPayload {
    EventPayload::TurnStarted {
        agent: request.agent.name.clone(),
        input: request.input.clone(),
        model: request.model.clone(),
        workspace: request.workspace.display().to_string(),
        agent_version: request.agent_version.clone(),
        shadow_of: request.shadow_of.as_ref().map(|t| t.to_string()),
    }
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
        started: None,
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

/// [`run_inner`] inside the turn's span (`ports::telemetry`), its stop reason recorded.
async fn run(
    deps: &TurnDeps,
    begun: BegunTurn,
    request: TurnRequest,
    approval: Option<ApprovalRecord>,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    let span = telemetry::turn_span(
        &begun.thread,
        &begun.turn,
        &request.agent.name,
        &request.client,
    );
    let outcome = run_inner(deps, begun, request, approval, observer, cancel)
        .instrument(span.clone())
        .await;
    if let Ok(outcome) = &outcome {
        span.record("agentplane.stop_reason", outcome.stop_reason.as_str());
    }
    outcome
}

async fn run_inner(
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
        scope_policies: String::new(),
        size: request.size,
        held: std::sync::Mutex::new(Vec::new()),
    };
    if approval.is_none() {
        match begun.started {
            Some(started) => observer.on_event(&started),
            None => {
                turn.record(turn_started(&request)).await?;
            }
        }
        for note in &request.notes {
            turn.record(note.clone()).await?;
        }
    }

    let ensembles = request.ensembles.clone();
    // Only an ensemble's tools can change the workspace: a turn without any is not
    // scanned, so changes someone else makes meanwhile are not put down to it.
    let before = if ensembles.is_empty() {
        None
    } else {
        deps.scan_workspace(&request.workspace).await
    };
    let ended = turn.drive(&request, approval, &cancel).await;
    // Nothing slow runs while events are held: closing tools and scanning the
    // workspace may take a while. (A suspended turn wrote them before its approval.)
    if !ensembles.is_empty() {
        turn.flush().await?;
    }
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
    if let Some(changed) = deps
        .workspace_changes(&request.workspace, before.as_ref())
        .await
    {
        turn.record(changed).await?;
    }
    turn.audit(&request).await?;
    // The turn's last events and its end are one write.
    let (last, event) = deps
        .store
        .complete_turn_after(
            &turn.thread,
            &turn.turn,
            turn.take_held(),
            ending.stop_reason,
            ending.result.clone(),
        )
        .await?;
    for held in &last {
        observer.on_event(held);
    }
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

impl ActiveTurn<'_> {
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
        let (mut specs, tools) = collect_tools(agent, &request.ensembles)?;
        let policies = self.deps.governance.policies.current();
        // List-time is call-time: a tool policy denies outright (whatever its
        // arguments) is not offered; one denied only for some arguments stays listed
        // and is refused per call. The same `gate` decides both.
        specs.retain(|spec| self.offers(&policies, request, &spec.name));
        let in_force = rules::data_scopes(&policies, &self.policy_ctx(request, None));
        self.scope_policies = in_force
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ");
        let scopes: Vec<_> = in_force
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
                messages.push(ChatMessage::system(system_prompt(agent, &specs)));
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

        let mode = agent.tool_calls;
        // The turn's state of text calls: corrective messages sent, and whether the
        // model failed to make native calls (which turns `auto` into constraining).
        let mut nudges = 0;
        let mut native_failed = false;
        // Whether the model made a native call in this turn (a resumed turn's earlier
        // steps included): then a text answer is its answer, not a failed call.
        let mut made_native = progress.messages.iter().any(|message| {
            message
                .tool_calls
                .iter()
                .any(|call| !call.id.starts_with(RECOVERED_ID))
        });
        // The previous step's calls, and whether this step's repeat them exactly: a
        // small model that lost track of its progress is told so once it saw the result.
        let mut previous: Vec<(String, Value)> = Vec::new();
        let mut repeated = false;
        let mut notes = 0;
        // A model stuck on one answer (the same text or calls again, or nothing) is
        // asked next at a higher temperature, so a near-greedy sampler can leave it.
        let mut previous_text: Option<String> = None;
        let mut stuck = false;
        // The tools as a constrained step lists them (ADR 0039): written once per turn.
        let mut listing: Option<String> = None;
        loop {
            while let Some(call) = progress.queue.pop_front() {
                let end = self
                    .handle_call(call, &tools, request, &ctx, cancel, &progress)
                    .await?;
                if let Some(ending) = progress.answer(end) {
                    return Ok(ending);
                }
            }
            if std::mem::take(&mut repeated) {
                notes += 1;
                progress
                    .messages
                    .push(ChatMessage::user(repeat_nudge(&tools)));
            }
            if progress.step >= agent.limits.max_steps {
                return Ok(Ending::plain(StopReason::StepLimit, Value::Null));
            }
            // Constrained only with `finish_task` among the calls: a model forced to
            // call a tool must have a way to end.
            let constrain = tools.contains_key(FINISH_TASK)
                && match mode {
                    ToolCallMode::Constrained => true,
                    ToolCallMode::Auto => native_failed || request.native_tools == Some(false),
                    ToolCallMode::Native | ToolCallMode::Recover => false,
                };
            // Recovered calls are shown as the model wrote them (ADR 0038); a
            // constrained step lists the tools in its system message, not as native
            // tools (ADR 0039).
            let messages = as_written(&progress.messages);
            let (messages, native_specs) = if constrain {
                let listing = listing.get_or_insert_with(|| tools_listing(&specs));
                (tools_listed(messages, listing), Vec::new())
            } else {
                (messages, specs.clone())
            };
            let chat = ChatRequest {
                model: request.model.clone(),
                messages,
                tools: native_specs,
                temperature: temperature(agent.temperature, std::mem::take(&mut stuck)),
                max_tokens: Some(agent.limits.max_output_tokens),
                tool_choice: None,
                response_schema: constrain.then(|| call_schema(&specs)),
            };
            let response = self.call_model(&chat, request, cancel).await?;
            let (text, mut calls) =
                split_harmony(progress.step, response.content, response.tool_calls);
            let step = progress.step;
            progress.step += 1;
            made_native = made_native || !calls.is_empty();
            let native = !calls.is_empty();
            let mut text = text;
            if calls.is_empty() && mode != ToolCallMode::Native {
                (text, calls) = recover_calls(step, text, &specs, &tools);
                if calls.is_empty()
                    && let Some(result) = result_call(step, &text, &tools)
                {
                    calls.push(result);
                }
                native_failed = native_failed || !calls.is_empty();
            }
            if !native && mode == ToolCallMode::Auto && !constrain && !made_native {
                // `auto`, and a model that has made no native call in this turn answered
                // without one: when it wrote a call as text, later turns of this model
                // start constrained (`Hub` asks); when it is empty or a call that could
                // not be read, the same step is asked again under the constraint (the
                // free answer stays in the log as text). Prose goes the way of `recover`.
                // A result written as text is not a call that failed: not remembered.
                if calls.iter().all(|c| c.call().name != FINISH_TASK) {
                    self.deps.providers.note_text_calls(&chat.model);
                }
                if calls.is_empty()
                    && tools.contains_key(FINISH_TASK)
                    && (text.trim().is_empty() || unreadable_call(&text, &specs, &tools))
                {
                    native_failed = true;
                    continue;
                }
            }
            if calls.is_empty() {
                if mode != ToolCallMode::Native
                    && tools.contains_key(FINISH_TASK)
                    && nudges < agent.limits.max_nudges
                {
                    nudges += 1;
                    native_failed = true;
                    stuck = text.trim().is_empty() || previous_text.as_deref() == Some(&text);
                    previous_text = Some(text.clone());
                    let correction = nudge(&text, &specs, &tools);
                    progress
                        .messages
                        .push(ChatMessage::assistant(Some(text), Vec::new()));
                    progress.messages.push(ChatMessage::user(correction));
                    continue;
                }
                return Ok(Ending::plain(
                    StopReason::TextAnswer,
                    json!({ "text": text }),
                ));
            }
            let signature = signature(&calls);
            repeated = mode != ToolCallMode::Native
                && signature == previous
                && notes < agent.limits.max_nudges;
            stuck = repeated;
            previous = signature;
            let assistant_calls = calls.iter().map(|c| c.call().clone()).collect();
            progress.messages.push(ChatMessage::assistant(
                (!text.is_empty()).then_some(text),
                assistant_calls,
            ));
            progress.queue = calls.into();
        }
    }

    /// The facts policies select on, for this turn and `tool`, now.
    /// The post-turn audit (`governance::audit`): each mismatch between what the turn
    /// ran and the policies in force now is recorded as a `policy_violation`.
    async fn audit(&self, request: &TurnRequest) -> Result<(), StoreError> {
        let set = self.deps.governance.policies.current();
        if set.is_empty() {
            return Ok(());
        }
        self.flush().await?;
        let events = self.deps.store.turn_events(&self.turn).await?;
        let ctx = self.policy_ctx(request, None);
        for violation in crate::governance::audit::violations(&set, &events, &ctx) {
            self.record(violation).await?;
        }
        Ok(())
    }
}
