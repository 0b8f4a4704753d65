//! The telemetry seam: everything the engine reports about what it does, in one place.
//!
//! Two kinds of report leave the engine here:
//!
//! - **Signals** to [`TelemetrySink`]s through one [`Telemetry`] handle: every stored
//!   event of a turn, a model call outside any turn (the gateway's), a refusal outside
//!   any thread, usage a server over-reported, each provider call, failover and circuit
//!   change, the executions' queue and outcomes. The Prometheus metrics adapter is one
//!   sink; another (an audit sink, an OpenTelemetry metrics exporter) is one more sink
//!   given to [`Telemetry::new`] by the composition root, without an engine edit.
//! - **Spans** from `tracing`, opened by the functions below at the turn, the model call,
//!   the tool call, the gateway call and the execution, with stable names and
//!   OpenTelemetry's GenAI attribute names where one exists (`gen_ai.request.model`,
//!   `gen_ai.usage.input_tokens`…). A `tracing` layer (the log formatter today, an
//!   OpenTelemetry exporter tomorrow) sees them; with no layer interested (the default
//!   filter is `warn`) a span costs one cached check.
//!
//! Sinks are called on the reporting task: each must be quick and must never block.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentplane_core::{ChatMessage, ChatResponse, Event, Role, ThreadId, ToolStatus, TurnId};
use serde_json::{Value, json};
use tracing::Span;

use super::executions::ExecutionStatus;
use super::store::ModelCallRecord;

/// How one provider call ended, for its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// An upstream failure: counted by the circuit, may fail over.
    UpstreamError,
    /// A capability or request error: returned as it is.
    Error,
}

impl CallOutcome {
    /// The `outcome` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::UpstreamError => "upstream_error",
            Self::Error => "error",
        }
    }
}

/// What a telemetry adapter sees. Every method has a default that ignores it, so a sink
/// implements only what it uses.
pub trait TelemetrySink: Send + Sync {
    /// A stored event of a turn of `agent`.
    fn on_event(&self, _agent: &str, _event: &Event) {}

    /// A model call made outside any turn (the gateway's), priced, before it is stored.
    fn on_model_call(&self, _call: &ModelCallRecord) {}

    /// A tool call through the MCP gateway ended (it has no `tool_call_result` event
    /// to count): its tool as offered (`SERVER__TOOL`), `ok` or `error`, how long.
    fn on_mcp_gateway_call(&self, _tool: &str, _status: ToolStatus, _latency_ms: u64) {}

    /// A refusal by a policy outside any thread (a gateway call), which has no
    /// `policy_denied` event to count.
    fn on_policy_denied(&self, _agent: &str, _policy: &str, _policy_type: &str) {}

    /// What an audit-mode policy would have decided of a call outside any thread (a
    /// gateway call), which has no `policy_audited` event to count.
    fn on_policy_audited(&self, _agent: &str, _policy: &str, _would: &str) {}

    /// A content policy found something outside any thread (a gateway call; a turn's
    /// findings are `content_finding` events, which `on_event` sees).
    fn on_content_finding(&self, _policy: &str, _surface: &str, _detector: &str, _action: &str) {}

    /// A model server reported more usage than the call could have used: charged the
    /// worst case (`governance/meter.rs`).
    fn on_usage_over_reported(&self, _agent: &str, _provider: &str) {}

    /// One call to one provider ended.
    fn on_provider_call(&self, _provider: &str, _outcome: CallOutcome) {}

    /// A model call moved from one provider to the next after an upstream failure.
    fn on_failover(&self, _from: &str, _to: &str) {}

    /// A provider's circuit closed (`up`) or opened; also once per provider at start.
    fn on_provider_health(&self, _provider: &str, _up: bool) {}

    /// The number of queued executions, after any change.
    fn on_execution_queue(&self, _queued: u64) {}

    /// An execution reached a terminal status.
    fn on_execution_finished(&self, _agent: &str, _status: ExecutionStatus) {}
}

/// The engine's one telemetry handle: tells every sink. Cheap to clone; the default has
/// no sink.
#[derive(Clone, Default)]
pub struct Telemetry {
    sinks: Arc<[Arc<dyn TelemetrySink>]>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Telemetry {
    /// A handle telling each of `sinks`, in order.
    pub fn new(sinks: Vec<Arc<dyn TelemetrySink>>) -> Self {
        Self {
            sinks: sinks.into(),
        }
    }

    /// Whether no sink listens: a report that costs work to gather can be skipped.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    fn each(&self, f: impl Fn(&dyn TelemetrySink)) {
        for sink in self.sinks.iter() {
            f(sink.as_ref());
        }
    }

    /// See [`TelemetrySink::on_event`].
    pub fn event(&self, agent: &str, event: &Event) {
        self.each(|s| s.on_event(agent, event));
    }

    /// See [`TelemetrySink::on_model_call`].
    pub fn model_call(&self, call: &ModelCallRecord) {
        self.each(|s| s.on_model_call(call));
    }

    /// See [`TelemetrySink::on_mcp_gateway_call`].
    pub fn mcp_gateway_call(&self, tool: &str, status: ToolStatus, latency_ms: u64) {
        self.each(|s| s.on_mcp_gateway_call(tool, status, latency_ms));
    }

    /// See [`TelemetrySink::on_policy_denied`].
    pub fn policy_denied(&self, agent: &str, policy: &str, policy_type: &str) {
        self.each(|s| s.on_policy_denied(agent, policy, policy_type));
    }

    /// See [`TelemetrySink::on_policy_audited`].
    pub fn policy_audited(&self, agent: &str, policy: &str, would: &str) {
        self.each(|s| s.on_policy_audited(agent, policy, would));
    }

    /// See [`TelemetrySink::on_content_finding`].
    pub fn content_finding(&self, policy: &str, surface: &str, detector: &str, action: &str) {
        self.each(|s| s.on_content_finding(policy, surface, detector, action));
    }

    /// See [`TelemetrySink::on_usage_over_reported`].
    pub fn usage_over_reported(&self, agent: &str, provider: &str) {
        self.each(|s| s.on_usage_over_reported(agent, provider));
    }

    /// See [`TelemetrySink::on_provider_call`].
    pub fn provider_call(&self, provider: &str, outcome: CallOutcome) {
        self.each(|s| s.on_provider_call(provider, outcome));
    }

    /// See [`TelemetrySink::on_failover`].
    pub fn failover(&self, from: &str, to: &str) {
        self.each(|s| s.on_failover(from, to));
    }

    /// See [`TelemetrySink::on_provider_health`].
    pub fn provider_health(&self, provider: &str, up: bool) {
        self.each(|s| s.on_provider_health(provider, up));
    }

    /// See [`TelemetrySink::on_execution_queue`].
    pub fn execution_queue(&self, queued: u64) {
        self.each(|s| s.on_execution_queue(queued));
    }

    /// See [`TelemetrySink::on_execution_finished`].
    pub fn execution_finished(&self, agent: &str, status: ExecutionStatus) {
        self.each(|s| s.on_execution_finished(agent, status));
    }
}

// ----- spans ----------------------------------------------------------------------------

/// The span of one turn, from its plan to its `turn_completed`.
pub fn turn_span(thread: &ThreadId, turn: &TurnId, agent: &str, client: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.turn",
        "otel.name" = %format_args!("invoke_agent {agent}"),
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.conversation.id" = %thread,
        "agentplane.thread" = %thread,
        "agentplane.turn" = %turn,
        "gen_ai.agent.name" = agent,
        "agentplane.client" = client,
        "agentplane.stop_reason" = tracing::field::Empty,
    )
}

/// The span of one model call (a turn's or the gateway's): the provider that answered,
/// the usage and the charge are recorded on it by [`record_model_call`].
pub fn model_call_span(agent: &str, model: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "gen_ai.chat",
        "otel.name" = %format_args!("chat {model}"),
        "otel.kind" = "client",
        "gen_ai.operation.name" = "chat",
        "gen_ai.agent.name" = agent,
        "gen_ai.request.model" = model,
        "gen_ai.provider.name" = tracing::field::Empty,
        "gen_ai.response.model" = tracing::field::Empty,
        "gen_ai.usage.input_tokens" = tracing::field::Empty,
        "gen_ai.usage.output_tokens" = tracing::field::Empty,
        "agentplane.cost_usd_micros" = tracing::field::Empty,
        "agentplane.outcome" = tracing::field::Empty,
        "gen_ai.input.messages" = tracing::field::Empty,
        "gen_ai.output.messages" = tracing::field::Empty,
    )
}

/// What a model call ended with, on its span.
pub struct ModelCallEnd<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub usd_micros: Option<u64>,
    /// `answered`, `failed`, `cancelled`.
    pub outcome: &'static str,
    /// Why the model stopped, as the server said (`stop`, `tool_calls`, `length`…).
    pub finish_reason: Option<&'a str>,
}

/// Records how a model call ended on its span.
pub fn record_model_call(span: &Span, end: &ModelCallEnd<'_>) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.provider.name", end.provider);
    span.record("gen_ai.response.model", end.model);
    // Signed: exporters write unsigned integers as text.
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if let Some(tokens) = end.input_tokens {
        span.record("gen_ai.usage.input_tokens", signed(tokens));
    }
    if let Some(tokens) = end.output_tokens {
        span.record("gen_ai.usage.output_tokens", signed(tokens));
    }
    if let Some(micros) = end.usd_micros {
        span.record("agentplane.cost_usd_micros", signed(micros));
    }
    span.record("agentplane.outcome", end.outcome);
    if let (Some(reason), Some(hooks)) = (end.finish_reason, TRACE_HOOKS.get()) {
        (hooks.set_strings)(span, "gen_ai.response.finish_reasons", &[reason]);
    }
}

/// The span of one tool call through the gate: its status is recorded on it.
pub fn tool_call_span(tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.tool_call",
        "otel.name" = %format_args!("execute_tool {tool}"),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = call_id,
        "agentplane.status" = tracing::field::Empty,
        "gen_ai.tool.call.arguments" = tracing::field::Empty,
        "gen_ai.tool.call.result" = tracing::field::Empty,
    )
}

// ----- contents (off unless switched on) -------------------------------------------------

/// Whether message and argument contents go on spans: off unless the operator switched
/// it on (`[telemetry] capture_content`); set once at start.
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// The most bytes of content one attribute carries; the rest is cut at a character
/// boundary and marked.
pub const CONTENT_CAP: usize = 16 * 1024;

/// Switches content capture on or off for the process.
pub fn capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether contents are recorded on `span`: capture is on and the span is exported.
fn capturing(span: &Span) -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed) && !span.is_disabled()
}

/// `text` as a span carries it: every known secret replaced (the process's redactor,
/// the same that guards logs and events), then cut at [`CONTENT_CAP`].
fn content(text: &str) -> String {
    let redacted = agentplane_core::secret::redact(text);
    if redacted.len() <= CONTENT_CAP {
        return redacted.into_owned();
    }
    let mut end = CONTENT_CAP;
    while !redacted.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated]", &redacted[..end])
}

/// The messages of a model request on its span (`gen_ai.input.messages`, in the GenAI
/// conventions' shape: role and parts), when capture is on.
pub fn record_model_input(span: &Span, messages: &[ChatMessage]) {
    if !capturing(span) {
        return;
    }
    let messages: Vec<Value> = messages.iter().map(genai_message).collect();
    span.record(
        "gen_ai.input.messages",
        content(&Value::Array(messages).to_string()),
    );
}

/// The answer of a model call on its span (`gen_ai.output.messages`), when capture is on.
pub fn record_model_output(span: &Span, response: &ChatResponse) {
    if !capturing(span) {
        return;
    }
    let mut message = genai_message(&ChatMessage {
        role: Role::Assistant,
        content: Some(response.content.clone()),
        tool_calls: response.tool_calls.clone(),
        tool_call_id: None,
    });
    if let (Some(reason), Some(object)) = (&response.finish_reason, message.as_object_mut()) {
        object.insert("finish_reason".into(), json!(reason));
    }
    span.record(
        "gen_ai.output.messages",
        content(&json!([message]).to_string()),
    );
}

/// A tool call's arguments on its span (`gen_ai.tool.call.arguments`), when capture is on.
pub fn record_tool_arguments(span: &Span, arguments: &Value) {
    if capturing(span) {
        span.record(
            "gen_ai.tool.call.arguments",
            content(&arguments.to_string()),
        );
    }
}

/// A tool call's result on its span (`gen_ai.tool.call.result`), when capture is on.
pub fn record_tool_result(span: &Span, result: &str) {
    if capturing(span) {
        span.record("gen_ai.tool.call.result", content(result));
    }
}

/// One message in the GenAI conventions' shape: `{"role", "parts": [...]}` with `text`,
/// `tool_call` and `tool_call_response` parts.
fn genai_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut parts = Vec::new();
    match (&message.tool_call_id, &message.content) {
        (Some(id), content) => parts.push(json!({
            "type": "tool_call_response",
            "id": id,
            "response": content.as_deref().unwrap_or(""),
        })),
        (None, Some(text)) if !text.is_empty() => {
            parts.push(json!({"type": "text", "content": text}));
        }
        (None, _) => {}
    }
    for call in &message.tool_calls {
        parts.push(json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }));
    }
    json!({"role": role, "parts": parts})
}

/// The span of one OpenAI-compatible gateway call, around its model call.
pub fn gateway_call_span(client: &str, agent: &str, model: &str, id: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.gateway_call",
        "otel.name" = %format_args!("gateway {model}"),
        "otel.kind" = "server",
        "agentplane.client" = client,
        "gen_ai.agent.name" = agent,
        "gen_ai.request.model" = model,
        "agentplane.completion" = id,
        "agentplane.tool_calls_recovered" = tracing::field::Empty,
    )
}

/// Marks a gateway call's span: the model wrote its tool calls as text and the gateway
/// recovered them for the client (`crate::gateway`).
pub fn record_recovered_calls(span: &Span, calls: usize) {
    span.record("agentplane.tool_calls_recovered", calls);
}

/// The span of a `content` policy check on one surface (`apply_guardrail`), around it;
/// its findings and decision are recorded by [`record_guardrail`].
pub fn guardrail_span(surface: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.guardrail",
        "otel.name" = %format_args!("apply_guardrail {surface}"),
        "gen_ai.operation.name" = "apply_guardrail",
        "agentplane.surface" = surface,
        "agentplane.findings" = tracing::field::Empty,
        "agentplane.denied_by" = tracing::field::Empty,
    )
}

/// How a guardrail check ended, on its span.
pub fn record_guardrail(span: &Span, findings: usize, denied_by: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    span.record(
        "agentplane.findings",
        i64::try_from(findings).unwrap_or(i64::MAX),
    );
    if let Some(policy) = denied_by {
        span.record("agentplane.denied_by", policy);
    }
}

/// A governance moment of the current span (a tool call's): `policy_denied`,
/// `approval_requested`, `permission_requested`, `permission_resolved`; exported as a
/// span event with the policy (or decision) named, never an argument.
pub fn governance_event(what: &'static str, policy: &str) {
    tracing::info!(target: "agentplane::trace", policy, "{}", what);
}

/// The span of one HTTP request (`otel.name` `METHOD ROUTE`): the parent of the turns
/// it starts, and the child of the caller's `traceparent` when it sent one
/// ([`adopt_parent`]).
pub fn request_span(method: &str, route: &str) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.request",
        "otel.name" = %format_args!("{method} {route}"),
        "otel.kind" = "server",
        "http.request.method" = method,
        "http.route" = route,
        "http.response.status_code" = tracing::field::Empty,
    )
}

/// How spans cross the process (the W3C `traceparent`), when an exporter is installed:
/// the engine knows no tracing backend, the exporter adapter gives these.
#[derive(Clone, Copy)]
pub struct TraceHooks {
    /// Makes a `traceparent` (and `tracestate`) the parent of a span.
    pub adopt: fn(&Span, &str, Option<&str>),
    /// The `traceparent` of the current span.
    pub current: fn() -> Option<String>,
    /// Sets a string-array attribute on a span (tracing's fields hold no arrays).
    pub set_strings: fn(&Span, &'static str, &[&str]),
}

static TRACE_HOOKS: std::sync::OnceLock<TraceHooks> = std::sync::OnceLock::new();

/// Installs the hooks (once per process; later calls change nothing).
pub fn install_trace_hooks(hooks: TraceHooks) {
    let _ = TRACE_HOOKS.set(hooks);
}

/// Makes an incoming `traceparent` the parent of `span`; nothing without an exporter.
pub fn adopt_parent(span: &Span, traceparent: &str, tracestate: Option<&str>) {
    if let Some(hooks) = TRACE_HOOKS.get()
        && !span.is_disabled()
    {
        (hooks.adopt)(span, traceparent, tracestate);
    }
}

/// The `traceparent` an outgoing request (a model call, an MCP request, a webhook)
/// carries: the current span's; `None` without an exporter.
pub fn current_traceparent() -> Option<String> {
    TRACE_HOOKS.get().and_then(|hooks| (hooks.current)())
}

/// The span of one attempt to deliver an execution's webhook (`POST webhook`, a client
/// span): the `traceparent` its POST carries.
pub fn webhook_span(execution: &str, delivery: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.webhook",
        "otel.name" = "POST webhook",
        "otel.kind" = "client",
        "agentplane.execution" = execution,
        "agentplane.delivery" = delivery,
        "agentplane.attempt" = attempt,
        "http.response.status_code" = tracing::field::Empty,
    )
}

/// The span of one attempt of an asynchronous execution, around its turn.
pub fn execution_span(execution: &str, agent: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: "agentplane::trace",
        "agentplane.execution",
        "agentplane.execution" = execution,
        "gen_ai.agent.name" = agent,
        "agentplane.attempt" = attempt,
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Counting(Mutex<Vec<String>>);

    impl TelemetrySink for Counting {
        fn on_failover(&self, from: &str, to: &str) {
            if let Ok(mut seen) = self.0.lock() {
                seen.push(format!("{from}->{to}"));
            }
        }
    }

    #[test]
    fn every_sink_is_told_in_order_and_the_default_ignores() {
        let a = Arc::new(Counting::default());
        let b = Arc::new(Counting::default());
        let telemetry = Telemetry::new(vec![a.clone(), b.clone()]);
        telemetry.failover("p1", "p2");
        // A signal a sink does not implement is ignored, not an error.
        telemetry.provider_health("p1", false);
        for sink in [a, b] {
            assert_eq!(*sink.0.lock().expect("lock"), vec!["p1->p2".to_owned()]);
        }
        Telemetry::default().failover("x", "y");
    }
}
