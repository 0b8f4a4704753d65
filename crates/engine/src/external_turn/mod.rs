//! The turn of an external agent (kind `acp` or `a2a`): the agent runs its own loop in
//! its own process or on a remote host; this driver records what it reports as our events and answers what it asks.
//!
//! The same invariants as `turn.rs`: every event is stored before anyone sees it, and a
//! begun turn ends with exactly one `turn_completed`. What the agent reports (text,
//! tool calls, outputs, plans, errors) passes the outgoing screen first (`screen.rs`);
//! permissions it asks for go through the permission broker and fail closed, and
//! client capabilities it uses (file reads and writes, commands) pass the policy gate
//! under our own tool names (`asks.rs`). No protocol detail lives here: the adapter
//! behind `ExternalAgent` speaks it.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tracing::Instrument;

use agentplane_core::{
    ErrorCode, EventPayload, Role, StopReason, ToolStatus, Usage, args_preview_hash, usd_of_micros,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::governance::ceiling::{
    self, CeilingCharge, CeilingError, CeilingMeter, USAGE_OVER_REPORTED,
};
use crate::governance::rules::RequestContext;
use crate::governance::{BudgetError, Refusal};
use crate::ports::StoreError;
use crate::ports::external::{
    ExternalAgent, ExternalEnd, ExternalError, ExternalPrompt, ExternalStop, ExternalToolStatus,
    ExternalUpdate, ToTurn,
};
use crate::turn::{
    BegunTurn, DELTA_FLUSH_BYTES, EngineError, TurnDeps, TurnError, TurnObserver, TurnOutcome,
    TurnRequest,
};

mod asks;
mod screen;

use screen::{ScreenedCall, Screens};

/// How long the adapter gets, after a cancel, to end the agent before the driver stops
/// waiting for it (the adapter's own deadline is 2 s; dropping it kills the tree).
const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// Bytes of a tool call's output kept in its `tool_call_result` event.
const OUTPUT_CAP: usize = 64 * 1024;

/// Runs a begun turn on an external agent to its end.
///
/// Returns `Err` only when the store fails; an agent that cannot start, breaks the
/// protocol or goes away ends the turn with an `error` event and `stop_reason: error`.
pub async fn run_external_turn(
    deps: &TurnDeps,
    begun: BegunTurn,
    request: TurnRequest,
    agent: &dyn ExternalAgent,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    let span = crate::ports::telemetry::turn_span(
        begun.thread(),
        begun.turn(),
        &request.agent.name,
        &request.client,
    );
    let outcome = run_external(deps, begun, request, agent, observer, cancel)
        .instrument(span.clone())
        .await;
    if let Ok(outcome) = &outcome {
        span.record("agentplane.stop_reason", outcome.stop_reason.as_str());
    }
    outcome
}

async fn run_external(
    deps: &TurnDeps,
    mut begun: BegunTurn,
    request: TurnRequest,
    agent: &dyn ExternalAgent,
    observer: &dyn TurnObserver,
    cancel: CancellationToken,
) -> Result<TurnOutcome, EngineError> {
    let label = agent.label();
    let started = begun.take_started();
    let policies = deps.governance.policies.current();
    let ctx = RequestContext::new(&request.agent.name, &request.agent.tags, &request.client);
    let mut turn = ExternalTurn {
        screens: Screens::new(&policies, &ctx),
        deps,
        begun,
        request: &request,
        observer,
        label: label.clone(),
        calls: HashMap::new(),
        text: String::new(),
        pending: String::new(),
        usage: Usage::default(),
        heard: false,
    };
    // The plan stored it with the turn (its model is this agent's label).
    match started {
        Some(started) => observer.on_event(&started),
        None => {
            turn.record(crate::turn::turn_started(&request)).await?;
        }
    }
    // An external agent uses no ensembles of ours; close any the toolbox opened.
    for ensemble in &request.ensembles {
        ensemble.close().await;
    }

    // The agent's cost is known only once it reports it: its ceiling is reserved up
    // front on every budget that applies, and the turn settles within it
    // (`governance::ceiling`).
    let meter = {
        let ctx = RequestContext::new(&request.agent.name, &request.agent.tags, &request.client);
        match ceiling::reserve(
            &deps.governance,
            deps.store.as_ref(),
            &ctx,
            request.agent.limits.max_cost_micros,
        )
        .await
        {
            Ok(meter) => meter,
            Err(CeilingError::Budget(BudgetError::Exceeded(exceeded))) => {
                let refusal = Refusal::BudgetExceeded(exceeded);
                turn.record(refusal.event("a turn", None, None)).await?;
                return turn
                    .end_early(ErrorCode::BudgetExceeded, refusal.message("a turn"))
                    .await;
            }
            Err(CeilingError::Unbounded { policy }) => {
                let message = CeilingError::unbounded_message(&policy, &request.agent.name);
                turn.record(EventPayload::PolicyDenied {
                    policy,
                    policy_type: "budget".to_owned(),
                    tool: None,
                    call_id: None,
                    detail: message.clone(),
                    explanation: None,
                })
                .await?;
                return turn.end_early(ErrorCode::BudgetExceeded, message).await;
            }
            Err(CeilingError::Budget(BudgetError::Store(e))) => return Err(e.into()),
        }
    };

    let prompt = ExternalPrompt {
        thread: turn.begun.thread().clone(),
        workspace: request.workspace.clone(),
        input: request.input.clone(),
        context: context_text(&request),
    };
    let before = deps.scan_workspace(&request.workspace).await;
    let (to_turn, mut from_agent) = mpsc::channel::<ToTurn>(64);
    let agent_cancel = cancel.child_token();
    let run = agent.prompt(prompt, to_turn, agent_cancel.clone());
    tokio::pin!(run);

    let mut cancelled_at: Option<Instant> = None;
    let mut listening = true;
    let ended: Result<ExternalEnd, ExternalError> = loop {
        let grace = async {
            match cancelled_at {
                Some(at) => tokio::time::sleep_until((at + CANCEL_GRACE).into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            // Once every sender is gone (the adapter is ending the process), stop
            // polling the channel: a closed channel is always ready.
            message = from_agent.recv(), if listening => match message {
                Some(message) => {
                    turn.handle(message, &cancel).await?;
                    // Text queued behind this message joins it in one event.
                    if turn.pending.len() >= DELTA_FLUSH_BYTES || from_agent.is_empty() {
                        turn.flush_text().await?;
                    }
                }
                None => listening = false,
            },
            ended = &mut run => break ended,
            _ = cancel.cancelled(), if cancelled_at.is_none() => {
                agent_cancel.cancel();
                cancelled_at = Some(Instant::now());
            }
            _ = grace => break Ok(ExternalEnd { stop: ExternalStop::Cancelled, usage: None }),
        }
    };
    // Reports sent before the prompt's answer are still queued: record them first.
    while let Ok(message) = from_agent.try_recv() {
        turn.handle(message, &cancel).await?;
        if turn.pending.len() >= DELTA_FLUSH_BYTES {
            turn.flush_text().await?;
        }
    }
    turn.end_text().await?;
    turn.settle_open_calls(cancel.is_cancelled()).await?;

    // Cancelled, the agent was asked and may have spent; failed, it spent only if it
    // had started (see `governance::ceiling`).
    let (usage, worked) = match &ended {
        Ok(end) => (end.usage, true),
        Err(_) => (None, cancel.is_cancelled() || turn.heard),
    };
    let charge = turn.record_usage(&meter, usage, worked).await?;
    meter
        .settle(&charge, &request.agent.name, &provider_of(&label))
        .await;
    let (stop_reason, result, error) = match ended {
        Ok(_) | Err(_) if cancel.is_cancelled() => (StopReason::Cancelled, Value::Null, None),
        // A `deny` policy found something in what the agent reported: refused whole.
        _ if turn.screens.denied().is_some() => {
            let error = turn.refuse_denied().await?;
            (StopReason::Error, Value::Null, Some(error))
        }
        Ok(end) => match end.stop {
            ExternalStop::Cancelled => (StopReason::Cancelled, Value::Null, None),
            ExternalStop::EndTurn => (StopReason::TextAnswer, json!({ "text": turn.text }), None),
            ExternalStop::Limit(why) => {
                let why = turn.screened_words(why).await?;
                (
                    StopReason::StepLimit,
                    json!({ "text": turn.text, "agent_stop_reason": why }),
                    None,
                )
            }
        },
        Err(e) => {
            let message = turn.screened_words(e.to_string()).await?;
            let error = TurnError {
                code: e.code(),
                message,
            };
            turn.record(EventPayload::Error {
                code: error.code,
                message: error.message.clone(),
            })
            .await?;
            (StopReason::Error, Value::Null, Some(error))
        }
    };
    // What the agent changed, also what it did on its own, never through us.
    if let Some(changed) = deps
        .workspace_changes(&request.workspace, before.as_ref())
        .await
    {
        turn.record(changed).await?;
    }
    let event = deps
        .store
        .complete_turn(
            turn.begun.thread(),
            turn.begun.turn(),
            stop_reason,
            result.clone(),
        )
        .await?;
    observer.on_event(&event);
    Ok(TurnOutcome {
        thread: turn.begun.thread().clone(),
        turn: turn.begun.turn().clone(),
        stop_reason,
        result,
        error,
        usage: turn.usage,
        suspended: None,
    })
}

/// The thread's earlier conversation as text, for an agent that cannot resume its own
/// session (the adapter sends it before the input only then).
fn context_text(request: &TurnRequest) -> Option<String> {
    if request.history.is_empty() {
        return None;
    }
    let mut text = String::from("[Earlier in this conversation]\n");
    for message in &request.history {
        let who = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System | Role::Tool => continue,
        };
        if let Some(content) = &message.content {
            text.push_str(&format!("{who}: {content}\n"));
        }
    }
    text.push_str("\n[Current request]\n");
    Some(text)
}

/// Whether an adapter's [`ToTurn::Record`] is a kind the driver appends: records of the
/// adapter's own protocol traffic, never a turn's lifecycle, text or tool events.
fn recordable(payload: &EventPayload) -> bool {
    matches!(payload, EventPayload::A2aRequest { .. })
}

/// The `provider` of an external agent's usage and cost events: its label's protocol
/// (`acp` of `acp:codex`, `a2a` of `a2a:NAME`).
fn provider_of(label: &str) -> String {
    label.split(':').next().unwrap_or(label).to_owned()
}

/// `null` or `{}`: arguments not sent yet.
fn is_empty(arguments: &Value) -> bool {
    arguments.is_null() || arguments.as_object().is_some_and(|o| o.is_empty())
}

/// A tool call the agent announced and has not finished.
struct OpenCall {
    tool: String,
    hash: String,
    arguments: Value,
    started: Instant,
}

struct ExternalTurn<'a> {
    deps: &'a TurnDeps,
    /// The outgoing screen of what the agent reports.
    screens: Screens<'a>,
    begun: BegunTurn,
    request: &'a TurnRequest,
    observer: &'a dyn TurnObserver,
    label: String,
    calls: HashMap<String, OpenCall>,
    /// The answer so far, as streamed (screened); at the end, the whole answer
    /// screened: the turn's result.
    text: String,
    /// Text received and not yet recorded: chunks that arrive faster than the store
    /// writes share one `message_delta` (up to `DELTA_FLUSH_BYTES`), as model text does,
    /// so an agent that floods small chunks costs a write per batch, not per chunk.
    pending: String,
    /// Tokens the agent reported (zero when it reported none).
    usage: Usage,
    /// Whether the agent sent anything of its own work (text, a tool call, a plan, a
    /// question): a prompt that fails after that was charged (`governance::ceiling`).
    heard: bool,
}

impl ExternalTurn<'_> {
    async fn record(&self, payload: EventPayload) -> Result<(), StoreError> {
        let event = self
            .deps
            .store
            .append(self.begun.thread(), self.begun.turn(), payload)
            .await?;
        self.observer.on_event(&event);
        Ok(())
    }

    /// Records the text received since the last `message_delta`, if any.
    async fn flush_text(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.pending);
        self.record(EventPayload::MessageDelta { text }).await
    }

    async fn record_all(&self, events: Vec<EventPayload>) -> Result<(), StoreError> {
        for event in events {
            self.record(event).await?;
        }
        Ok(())
    }

    /// The end of the answer: what the stream scanner still held is streamed, then the
    /// whole answer is screened (its findings recorded) and becomes the turn's result.
    async fn end_text(&mut self) -> Result<(), StoreError> {
        let rest = self.screens.chunks_end();
        if !rest.is_empty() {
            self.observer.on_text(&rest);
            self.pending.push_str(&rest);
        }
        self.flush_text().await?;
        let (answer, events) = self.screens.answer();
        self.text = answer;
        self.record_all(events).await
    }

    /// Words the agent ended with (an error, a stop reason), screened.
    async fn screened_words(&mut self, words: String) -> Result<String, StoreError> {
        let (words, events) = self.screens.words(words);
        self.record_all(events).await?;
        Ok(words)
    }

    /// The refusal of a turn in whose reports a `deny` policy found something: a
    /// `policy_denied` of type `content` and an `error` (`FORBIDDEN`).
    async fn refuse_denied(&mut self) -> Result<TurnError, StoreError> {
        let Some(denied) = self.screens.take_denied() else {
            unreachable!("refused only when denied");
        };
        let policies = self.deps.governance.policies.current();
        let refusal = Refusal::content(&policies, &denied.policy, &denied.found, denied.held);
        let what = "what the external agent reported";
        self.record(refusal.event(what, None, None)).await?;
        let error = TurnError {
            code: ErrorCode::Forbidden,
            message: refusal.message(what),
        };
        self.record(EventPayload::Error {
            code: error.code,
            message: error.message.clone(),
        })
        .await?;
        Ok(error)
    }

    async fn handle(
        &mut self,
        message: ToTurn,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
        self.heard |= matches!(
            message,
            ToTurn::Update(_) | ToTurn::Permission { .. } | ToTurn::Capability { .. }
        );
        // Anything else is recorded after the text that came before it.
        if !matches!(message, ToTurn::Update(ExternalUpdate::Text(_))) {
            self.flush_text().await?;
        }
        match message {
            ToTurn::Update(update) => self.update(update).await,
            ToTurn::Permission { mut ask, answer } => {
                ask.call_id = self.screens.id(ask.call_id);
                if let Some(title) = ask.title.take() {
                    let (title, events) = self.screens.title(title, &ask.call_id);
                    self.record_all(events).await?;
                    ask.title = Some(title);
                }
                let mut events = self.screens.arguments(&mut ask.arguments, &ask.call_id);
                if let Some(input) = ask.input.as_mut() {
                    events.extend(self.screens.arguments(input, &ask.call_id));
                }
                self.record_all(events).await?;
                let approved = self.permission(ask, cancel).await?;
                let _ = answer.send(approved);
                Ok(())
            }
            ToTurn::Capability { request, answer } => {
                let verdict = self.capability(request, cancel).await?;
                let _ = answer.send(verdict);
                Ok(())
            }
            ToTurn::CapabilityOutput {
                tool,
                output,
                answer,
            } => {
                let screened = self.capability_output(&tool, output).await?;
                let _ = answer.send(screened);
                Ok(())
            }
            ToTurn::Security { event_type, detail } => {
                let detail = self.screens.detail(detail);
                self.record(EventPayload::SecurityEvent {
                    event_type,
                    tool: None,
                    detail,
                })
                .await
            }
            ToTurn::Record(payload) if recordable(&payload) => {
                let payload = self.screens.record(payload);
                self.record(payload).await
            }
            ToTurn::Record(payload) => {
                tracing::warn!(
                    event = payload.kind(),
                    "an external agent's adapter sent a record of a kind the driver does not keep"
                );
                Ok(())
            }
        }
    }

    async fn update(&mut self, update: ExternalUpdate) -> Result<(), StoreError> {
        match update {
            ExternalUpdate::Text(text) => {
                let text = self.screens.chunk(&text);
                if text.is_empty() {
                    return Ok(());
                }
                self.observer.on_text(&text);
                self.text.push_str(&text);
                self.pending.push_str(&text);
                Ok(())
            }
            ExternalUpdate::ToolCall {
                call_id,
                tool,
                title,
                arguments,
            } => {
                let (
                    ScreenedCall {
                        call_id,
                        tool,
                        title,
                        arguments,
                    },
                    found,
                ) = self.screens.call(call_id, tool, title, arguments);
                if self.calls.contains_key(&call_id) {
                    return Ok(());
                }
                self.record_all(found).await?;
                let hash = args_preview_hash(&arguments);
                self.calls.insert(
                    call_id.clone(),
                    OpenCall {
                        tool: tool.clone(),
                        hash: hash.clone(),
                        arguments: arguments.clone(),
                        started: Instant::now(),
                    },
                );
                self.record(EventPayload::ToolCallPlanned {
                    call_id,
                    tool,
                    arguments,
                    args_preview_hash: hash,
                    title,
                    recovered: false,
                })
                .await
            }
            ExternalUpdate::ToolCallUpdate {
                call_id,
                status,
                output,
                arguments,
            } => {
                let call_id = self.screens.id(call_id);
                if let Some(mut arguments) = arguments {
                    let found = self.screens.arguments(&mut arguments, &call_id);
                    self.record_all(found).await?;
                    self.late_arguments(&call_id, arguments).await?;
                }
                let status = match status {
                    Some(ExternalToolStatus::Completed) => ToolStatus::Ok,
                    Some(ExternalToolStatus::Failed) => ToolStatus::Error,
                    _ => return Ok(()),
                };
                // An update for a call never announced, or already finished, is ignored:
                // the agent does not get to write results for calls we never saw.
                let Some(call) = self.calls.remove(&call_id) else {
                    return Ok(());
                };
                let (output, found) = self.screens.result(
                    output.unwrap_or_default(),
                    status == ToolStatus::Error,
                    &call_id,
                );
                self.record_all(found).await?;
                let (output, truncated) = crate::turn::cap_output(output, OUTPUT_CAP);
                self.record(EventPayload::ToolCallResult {
                    call_id,
                    tool: call.tool,
                    status,
                    latency_ms: call.started.elapsed().as_millis() as u64,
                    error_type: None,
                    output,
                    truncated,
                    args_preview_hash: call.hash,
                })
                .await
            }
            ExternalUpdate::Plan(mut entries) => {
                let found = self.screens.plan(&mut entries);
                self.record_all(found).await?;
                self.record(EventPayload::Plan { entries }).await
            }
        }
    }

    /// Arguments an agent sends after announcing the call (opencode: `rawInput: {}` in
    /// the `tool_call`, the real ones in the next update) replace the planned ones,
    /// with an event that says so, before the call's result or any permission
    /// decision. Unchanged or empty arguments, or a call never announced, change nothing.
    async fn late_arguments(&mut self, call_id: &str, arguments: Value) -> Result<(), StoreError> {
        let Some(call) = self.calls.get_mut(call_id) else {
            return Ok(());
        };
        if is_empty(&arguments) || call.arguments == arguments {
            return Ok(());
        }
        call.hash = args_preview_hash(&arguments);
        call.arguments = arguments.clone();
        let event = EventPayload::ToolCallArguments {
            call_id: call_id.to_owned(),
            tool: call.tool.clone(),
            arguments,
            args_preview_hash: call.hash.clone(),
        };
        self.record(event).await
    }

    /// Calls still open when the prompt ended get a result, so every planned call has one.
    async fn settle_open_calls(&mut self, cancelled: bool) -> Result<(), StoreError> {
        let mut open: Vec<(String, OpenCall)> = self.calls.drain().collect();
        open.sort_by_key(|a| a.1.started);
        for (call_id, call) in open {
            let why = if cancelled {
                "the turn was cancelled before the agent finished this call"
            } else {
                "the agent ended its turn without reporting this call's end"
            };
            self.record(EventPayload::ToolCallResult {
                call_id,
                tool: call.tool,
                status: ToolStatus::Error,
                latency_ms: call.started.elapsed().as_millis() as u64,
                error_type: None,
                output: why.to_owned(),
                truncated: false,
                args_preview_hash: call.hash,
            })
            .await?;
        }
        Ok(())
    }

    /// Tokens the agent reported (in the prompt's answer, gemini's `_meta.quota` or
    /// `usage_update` notifications: the adapter picks; an A2A agent's `usage`
    /// metadata) become `usage` and `cost` events, priced under the label
    /// (`acp:PROFILE`, `a2a:NAME`); when the agent also reports what the prompt
    /// cost in dollars, the larger of the two is its report, so a budget never sees
    /// less than the agent says it spent. The cost is what `meter` charges for that
    /// report (at most the agent's ceiling; above it, a `security_event` says so).
    /// None reported is recorded as `usage` with `reported: false`, so the gap is
    /// visible; a prompt that failed records usage only when it was charged.
    async fn record_usage(
        &mut self,
        meter: &CeilingMeter,
        usage: Option<crate::ports::external::ExternalUsage>,
        worked: bool,
    ) -> Result<CeilingCharge, StoreError> {
        let reported = usage.map(|usage| {
            self.deps
                .governance
                .prices
                .cost_micros(&self.label, usage.input_tokens, usage.output_tokens)
                .max(usage.cost_usd_micros.unwrap_or(0))
        });
        let charge = meter.price(reported, worked);
        let usage = usage.unwrap_or_default();
        // A failed prompt without a charge records nothing (it never ran).
        if !worked && charge.usd_micros == 0 {
            return Ok(charge);
        }
        if charge.over_reported() {
            self.record(EventPayload::SecurityEvent {
                event_type: USAGE_OVER_REPORTED.to_owned(),
                tool: None,
                detail: format!(
                    "the agent reported ${} for this turn, more than its max_cost_usd \
                     (${}); charged the ceiling",
                    usd_of_micros(charge.reported_micros.unwrap_or_default()),
                    usd_of_micros(charge.ceiling_micros.unwrap_or_default()),
                ),
            })
            .await?;
        }
        self.record(EventPayload::Usage {
            provider: provider_of(&self.label),
            model: self.label.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reported: reported.is_some(),
        })
        .await?;
        if reported.is_some() || charge.usd_micros > 0 {
            self.record(EventPayload::Cost {
                provider: provider_of(&self.label),
                model: self.label.clone(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                usd_micros: charge.usd_micros,
                usd: usd_of_micros(charge.usd_micros),
            })
            .await?;
        }
        self.usage = Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        };
        Ok(charge)
    }

    /// Ends the turn before the agent started: an `error` event, then `turn_completed`.
    async fn end_early(self, code: ErrorCode, message: String) -> Result<TurnOutcome, EngineError> {
        self.record(EventPayload::Error {
            code,
            message: message.clone(),
        })
        .await?;
        let event = self
            .deps
            .store
            .complete_turn(
                self.begun.thread(),
                self.begun.turn(),
                StopReason::Error,
                Value::Null,
            )
            .await?;
        self.observer.on_event(&event);
        Ok(TurnOutcome {
            thread: self.begun.thread().clone(),
            turn: self.begun.turn().clone(),
            stop_reason: StopReason::Error,
            result: Value::Null,
            error: Some(TurnError { code, message }),
            usage: Usage::default(),
            suspended: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_record_only_their_protocol_traffic() {
        let request = EventPayload::A2aRequest {
            direction: "out".into(),
            method: "SendMessage".into(),
            task: None,
            context: None,
            protocol_version: "1.0".into(),
            outcome: "completed".into(),
        };
        assert!(recordable(&request));
        let forged = EventPayload::TurnCompleted {
            stop_reason: StopReason::TextAnswer,
            result: Value::Null,
        };
        assert!(!recordable(&forged));
        assert!(!recordable(&EventPayload::MessageDelta {
            text: "x".into()
        }));
    }

    #[test]
    fn the_provider_is_the_labels_protocol() {
        assert_eq!(provider_of("acp:codex"), "acp");
        assert_eq!(provider_of("a2a:researcher"), "a2a");
    }
}
