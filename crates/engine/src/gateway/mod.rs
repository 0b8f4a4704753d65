//! The OpenAI-compatible gateway's one operation: a governed plain model call, made for
//! a client outside any thread or turn.
//!
//! A call is admitted first ([`crate::services::model_gateway::ModelGateway::call`]) under the configured agent
//! name and tags, exactly as a turn is (`governance::admission`): a policy denial (a
//! closed `time_window`), the rate limits that count turns, then a budget reservation
//! of the call's worst case (its input bytes as tokens plus its output cap, which is
//! always sent: the request's `max_tokens`, else `[gateway] max_output_tokens`); the
//! money is held until the call settles, so concurrent calls never pass a cap. Only then does the caller decide how to
//! answer (a stream or one document), and [`AdmittedCall::call`] makes the model call,
//! prices it, settles the budget and records it for cost reports in the background (the
//! client does not wait for the store). The tap (metrics) sees it too.
//!
//! The answer is screened whole before it is recorded or answered (`metered::Screen`,
//! `governance::outgoing`): its text, the tool calls' ids, names and arguments (every
//! string, keys included), the model that answered and the finish reason, by the
//! secrets and the `gateway_answer` policies. Streamed text passes the stream scanner
//! as it arrives; tool calls reach a streaming client only in the last chunk, after the
//! provider assembled their arguments, so their arguments are screened assembled,
//! never piece by piece.
//!
//! What lives here: admission, validation of what a request means, pricing and
//! recording. What must not: the OpenAI wire format (the server's) or any I/O but the
//! ports. Tools offered by a gateway client are never executed here; their calls go
//! back to the client, which is why `approval_required` policies do not apply.

mod aliases;
mod embeddings;
mod kept;
mod text_calls;

pub use aliases::ModelAlias;
pub(crate) use kept::Keep;
pub use kept::{KEPT_FOR_SECS, KeptResponses};

pub use text_calls::RECOVERED_ID;

use agentplane_core::{ChatRequest, ChatResponse, CompletionId, Role, ToolChoice, Usage};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::call_records::CallRecords;
use tracing::Instrument;

use crate::error::HubError;
use crate::governance::Refusal;
use crate::governance::content::ContentGuard;
use crate::governance::rules::RequestContext;
use crate::governance::{AdmissionError, Charge, Meter};
use crate::metered;
use crate::ports::{ModelCallRecord, ModelInfo, TextSink};
use crate::turn::TurnDeps;
use agentplane_core::EventPayload;
use agentplane_core::policy::{ContentAction, Surface};

/// The agent name gateway calls run under unless configured.
pub const DEFAULT_AGENT: &str = "gateway";
/// Most messages one request may carry (the body limit bounds their size).
pub const MAX_MESSAGES: usize = 10_000;
/// Most tools one request may offer.
pub const MAX_TOOLS: usize = 256;
/// The highest temperature OpenAI accepts.
const MAX_TEMPERATURE: f32 = 2.0;

/// The API a gateway call came in by. Each may run under an agent name of its own
/// (`[gateway.agents]`), so one policy governs Claude Code's model calls and another
/// an SDK's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GatewayRoute {
    /// OpenAI's `/openai/v1/chat/completions`.
    ChatCompletions,
    /// OpenAI's `/openai/v1/responses`.
    Responses,
    /// Anthropic's `/anthropic/v1/messages`.
    Messages,
    /// OpenAI's `/openai/v1/embeddings`.
    Embeddings,
}

impl GatewayRoute {
    /// Every route, in the order they are documented.
    pub const ALL: [Self; 4] = [
        Self::ChatCompletions,
        Self::Responses,
        Self::Messages,
        Self::Embeddings,
    ];

    /// The name `[gateway.agents]` and spans know it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat_completions",
            Self::Responses => "responses",
            Self::Messages => "messages",
            Self::Embeddings => "embeddings",
        }
    }

    /// The route a `[gateway.agents]` key names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// `[gateway]`: who gateway calls are, for policies, budgets, costs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The agent name policies select and cost reports group gateway calls by.
    pub agent: String,
    /// The agent name of a route that has its own (`[gateway.agents]`).
    pub route_agents: BTreeMap<GatewayRoute, String>,
    /// Tags policies may select gateway calls by.
    pub tags: Vec<String>,
    /// The output cap sent with a request that gives no `max_tokens`.
    pub max_output_tokens: u32,
    /// `[gateway.models]`: the model names clients send, mapped (`aliases.rs`).
    pub models: Vec<ModelAlias>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            agent: DEFAULT_AGENT.to_owned(),
            route_agents: BTreeMap::new(),
            tags: Vec::new(),
            max_output_tokens: agentplane_core::agent::DEFAULT_MAX_OUTPUT_TOKENS,
            models: Vec::new(),
        }
    }
}

impl GatewayConfig {
    /// The agent name calls of `route` run under.
    pub fn agent_of(&self, route: GatewayRoute) -> &str {
        self.route_agents.get(&route).unwrap_or(&self.agent)
    }
}

/// A finished embeddings call (`embeddings.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingReply {
    pub embeddings: crate::ports::Embeddings,
}

/// A finished gateway call.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayReply {
    /// The completion id sent to the client, also the recorded call's id.
    pub id: CompletionId,
    /// The model's answer; `model` is the name that answered (the requested one when
    /// the server named none).
    pub response: ChatResponse,
}

/// A call that passed admission and holds its budget reservation. Dropping it (or the
/// future of [`AdmittedCall::call`]) before the call settles charges the worst case and
/// records the call: a client that leaves does not make the model's work free
/// (`governance::meter`).
pub struct AdmittedCall {
    id: CompletionId,
    deps: TurnDeps,
    agent: String,
    /// The gateway agent's tags, for routing.
    tags: Vec<String>,
    client: String,
    /// The caller's roles (`context: roles` conditions).
    roles: Vec<String>,
    /// The providers a model alias pinned the call to; empty: `[routing]` decides.
    pinned: Vec<String>,
    request: ChatRequest,
    meter: Meter,
    records: Arc<CallRecords>,
    /// Set when the answer is kept for `previous_response_id` (`kept.rs`).
    keep: Option<Keep>,
}

impl std::fmt::Debug for AdmittedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmittedCall")
            .field("id", &self.id)
            .field("agent", &self.agent)
            .field("client", &self.client)
            .field("model", &self.request.model)
            .finish_non_exhaustive()
    }
}

/// Checks what a request means (the wire format was checked by the caller): a model
/// name, at least one message, sane tools, sampling values in OpenAI's ranges.
pub fn validate(request: &ChatRequest) -> Result<(), HubError> {
    let invalid = |m: String| Err(HubError::InvalidArgument(m));
    if request.model.trim().is_empty() {
        return invalid("`model` must name a model; GET /openai/v1/models lists them".into());
    }
    if request.messages.is_empty() {
        return invalid("`messages` must hold at least one message".into());
    }
    if request.messages.len() > MAX_MESSAGES {
        return invalid(format!(
            "`messages` holds more than {MAX_MESSAGES} messages"
        ));
    }
    for (i, message) in request.messages.iter().enumerate() {
        if message.role == Role::Tool && message.tool_call_id.as_deref().is_none_or(str::is_empty) {
            return invalid(format!(
                "messages[{i}]: a tool message needs `tool_call_id`"
            ));
        }
    }
    if request.tools.len() > MAX_TOOLS {
        return invalid(format!("`tools` holds more than {MAX_TOOLS} tools"));
    }
    for (i, tool) in request.tools.iter().enumerate() {
        if !valid_tool_name(&tool.name) {
            return invalid(format!(
                "tools[{i}].function.name must be 1 to 64 letters, digits, `_` or `-`"
            ));
        }
        if !tool.parameters.is_object() {
            return invalid(format!(
                "tools[{i}].function.parameters must be a JSON Schema object"
            ));
        }
    }
    match &request.tool_choice {
        Some(ToolChoice::Function(name)) if !request.tools.iter().any(|t| &t.name == name) => {
            return invalid(format!(
                "`tool_choice` names `{name}`, which is not among `tools`"
            ));
        }
        Some(ToolChoice::Required) if request.tools.is_empty() => {
            return invalid("`tool_choice` is `required` but no `tools` are offered".into());
        }
        _ => {}
    }
    if let Some(t) = request.temperature
        && !(t.is_finite() && (0.0..=MAX_TEMPERATURE).contains(&t))
    {
        return invalid(format!(
            "`temperature` must be between 0 and {MAX_TEMPERATURE}"
        ));
    }
    if request.max_tokens == Some(0) {
        return invalid("`max_tokens` must be at least 1".into());
    }
    Ok(())
}

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Leaves out of a forwarded request the tools policy denies outright for this
/// client, as a turn leaves them out of its model calls (list-time is call-time): the
/// upstream model never sees them. A `tool_choice` that named one falls back to the
/// model's choice.
fn withhold_denied_tools(
    policies: &agentplane_core::policy::PolicySet,
    ctx: &RequestContext<'_>,
    request: &mut ChatRequest,
) {
    if policies.is_empty() || request.tools.is_empty() {
        return;
    }
    request.tools.retain(|tool| {
        !crate::governance::rules::denied_outright(policies, &ctx.tool(tool.name.as_str()))
    });
    let choice_gone = match &request.tool_choice {
        Some(ToolChoice::Function(name)) => !request.tools.iter().any(|t| &t.name == name),
        Some(ToolChoice::Required) => request.tools.is_empty(),
        _ => false,
    };
    if choice_gone {
        request.tool_choice = None;
    }
}

/// The content policies watching gateway requests, over every message's text and the
/// arguments of the tool calls it carries (an assistant message of the conversation so
/// far: every string and key of the JSON, `ContentGuard::check_json`; arguments that
/// are not JSON as one text): redacted in place, or the call refused when a `deny`
/// policy found something. Findings are logged (a gateway call has no thread), never
/// the text found.
fn guard_request(
    policies: &agentplane_core::policy::PolicySet,
    ctx: &RequestContext<'_>,
    request: &mut ChatRequest,
    governance: &crate::governance::Governance,
) -> Result<(), HubError> {
    let guard = ContentGuard::new(policies, ctx, Surface::GatewayRequest);
    if guard.is_empty() {
        return Ok(());
    }
    for (i, message) in request.messages.iter_mut().enumerate() {
        let mut found = Vec::new();
        let mut denied_by = None;
        if let Some(text) = message.content.as_mut() {
            let checked = guard.check(text);
            found.extend(checked.found);
            denied_by = checked.denied_by;
            if let std::borrow::Cow::Owned(redacted) = checked.text {
                *text = redacted;
            }
        }
        for call in &mut message.tool_calls {
            let (call_found, call_denied) = guard_arguments(&guard, &mut call.arguments);
            found.extend(call_found);
            denied_by = denied_by.or(call_denied);
        }
        note_findings(governance, &guard.events(&found, None));
        if let Some(policy) = &denied_by {
            let refusal = Refusal::content(policies, policy, &found, "the messages");
            governance
                .telemetry
                .policy_denied(ctx.agent_name(), policy, "content");
            return Err(crate::error::refused(
                &refusal,
                &format!("a gateway call (message {i})"),
            ));
        }
    }
    Ok(())
}

/// One tool call's arguments in a gateway request, screened in place: as JSON (keys
/// included) when they parse, else as one text.
fn guard_arguments(
    guard: &ContentGuard<'_>,
    arguments: &mut String,
) -> (Vec<crate::governance::content::Found>, Option<String>) {
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(mut value) => {
            let (found, denied_by) = guard.check_json(&mut value);
            // Rewritten only when something changed: clean arguments keep their text.
            if found.iter().any(|f| f.action != ContentAction::Flag) {
                *arguments = value.to_string();
            }
            (found, denied_by)
        }
        Err(_) => {
            let checked = guard.check(arguments);
            let (found, denied_by) = (checked.found, checked.denied_by);
            if let std::borrow::Cow::Owned(redacted) = checked.text {
                *arguments = redacted;
            }
            (found, denied_by)
        }
    }
}

/// Counts and logs content findings of a gateway call (it has no thread to record
/// events in): policy, surface, detector, place, never the text.
fn note_findings(governance: &crate::governance::Governance, events: &[EventPayload]) {
    for event in events {
        if let EventPayload::ContentFinding {
            policy,
            surface,
            detector,
            action,
            start,
            end,
            ..
        } = event
        {
            governance
                .telemetry
                .content_finding(policy, surface, detector, action);
            tracing::info!(
                policy,
                surface,
                detector,
                action,
                start,
                end,
                "content policy finding"
            );
        }
    }
}

/// Admits one call of `client`: validation, then `governance::admission` under the
/// gateway's agent name with a reservation of the call's worst case. A refusal by a
/// policy is counted by the tap (a gateway call has no thread to record it in) and
/// logged.
pub(crate) async fn admit(
    deps: &TurnDeps,
    config: &GatewayConfig,
    records: &Arc<CallRecords>,
    (client, roles): (&str, Vec<String>),
    route: GatewayRoute,
    mut request: ChatRequest,
) -> Result<AdmittedCall, HubError> {
    validate(&request)?;
    let agent = config.agent_of(route);
    // A model alias decides the model and providers before anything is priced.
    let mut pinned = Vec::new();
    if let Some(alias) = aliases::lookup(&config.models, &request.model) {
        tracing::debug!(
            requested = request.model,
            alias = alias.pattern,
            "a gateway model alias applies"
        );
        if let Some(model) = &alias.model {
            request.model.clone_from(model);
        }
        pinned.clone_from(&alias.providers);
    }
    if route == GatewayRoute::Embeddings {
        // Embeddings have no output: the worst case is the input alone.
        request.max_tokens = Some(0);
    } else {
        // The output cap is always sent, so the worst case reserved is real.
        request.max_tokens.get_or_insert(config.max_output_tokens);
    }
    let governance = &deps.governance;
    let ctx = RequestContext::new(agent, &config.tags, client).roles(&roles);
    let policies = governance.policies.current();
    withhold_denied_tools(&policies, &ctx, &mut request);
    guard_request(&policies, &ctx, &mut request, governance)?;
    let admitted = metered::reserve(
        governance,
        deps.store.as_ref(),
        &ctx,
        &request,
        metered::Admit::Whole,
    )
    .await;
    let mut meter = match admitted {
        Ok(meter) => meter,
        Err(AdmissionError::Refused(refusal)) => {
            let what = format!("a gateway call as `{agent}` now");
            governance
                .telemetry
                .policy_denied(agent, refusal.policy(), refusal.policy_type());
            tracing::info!(
                client,
                policy = refusal.policy(),
                policy_type = refusal.policy_type(),
                "a gateway call was refused by a policy"
            );
            return Err(crate::error::refused(&refusal, &what));
        }
        Err(AdmissionError::RateLimitsUnavailable(e)) => return Err(e.into()),
        Err(AdmissionError::Store(e)) => return Err(e.into()),
    };
    let id = CompletionId::new();
    // Abandoned (the client left, the future was dropped): recorded at the worst case.
    let abandoned = Recorder {
        deps: deps.clone(),
        records: Arc::clone(records),
        id: id.clone(),
        client: client.to_owned(),
        agent: agent.to_owned(),
        model: request.model.clone(),
    };
    let first_pinned = pinned.first().cloned();
    meter.on_abandon(Box::new(move |charge| {
        let provider = first_pinned.unwrap_or_else(|| {
            let mut names = abandoned.deps.providers.names();
            names.next().unwrap_or_default().to_owned()
        });
        let model = abandoned.model.clone();
        abandoned.record(provider, model, None, &charge);
    }));
    Ok(AdmittedCall {
        id,
        deps: deps.clone(),
        agent: agent.to_owned(),
        tags: config.tags.clone(),
        client: client.to_owned(),
        roles,
        pinned,
        request,
        meter,
        records: Arc::clone(records),
        keep: None,
    })
}

impl AdmittedCall {
    /// The completion id the answer will carry.
    pub fn id(&self) -> &CompletionId {
        &self.id
    }

    /// The model the client asked for.
    pub fn model(&self) -> &str {
        &self.request.model
    }

    /// Keeps the answer for `previous_response_id` once it is made.
    pub(crate) fn keeping(mut self, keep: Keep) -> Self {
        self.keep = Some(keep);
        self
    }

    /// Whether the answer will be kept.
    pub fn keeps(&self) -> bool {
        self.keep.is_some()
    }

    /// Makes the call, streaming text deltas to `on_text`; prices it, settles the
    /// budget (`governance::meter`: at most the worst case), and records it (in the
    /// background: the answer does not wait for the store). A call that fails before
    /// any text arrived costs nothing and is not recorded; after text, it costs the
    /// worst case.
    pub async fn call(self, on_text: &mut TextSink<'_>) -> Result<GatewayReply, HubError> {
        let recorder = Recorder {
            deps: self.deps.clone(),
            records: Arc::clone(&self.records),
            id: self.id.clone(),
            client: self.client.clone(),
            agent: self.agent.clone(),
            model: self.request.model.clone(),
        };
        // Content policies on the answer: the stream passes what cannot become a
        // finding at once, the rest when it is known; the whole answer — text, tool
        // calls, model — is screened by the metered call before anything records it.
        let policies = self.deps.governance.policies.current();
        let ctx = RequestContext::new(&self.agent, &self.tags, &self.client).roles(&self.roles);
        let guard = ContentGuard::new(&policies, &ctx, Surface::GatewayAnswer);
        // Routed like a small task of the gateway agent (its name and tags select
        // `[routing]` rules); failovers are logged, a gateway call has no turn.
        let call = metered::Call {
            providers: &self.deps.providers,
            route: crate::models::RouteKey {
                agent: &self.agent,
                tags: &self.tags,
                size: crate::models::TaskSize::estimate(&self.request.messages),
                pinned: &self.pinned,
            },
            request: &self.request,
            screen: metered::Screen {
                guard: &guard,
                tool_calls: true,
            },
        };
        let mut on_failover = |failover: crate::models::Failover<'_>| {
            tracing::warn!(?failover, "a gateway call failed over to the next provider");
        };
        // Recorded before the settlement (a task of its own): a client leaving during
        // the settlement must not lose the record; the settlement completes on its own.
        let mut recorder = Some(recorder);
        let mut on_charged = |charged: &metered::Charged| {
            if let Some(recorder) = recorder.take() {
                recorder.record(
                    charged.provider.clone(),
                    charged.model.clone(),
                    charged.usage,
                    &charged.charge,
                );
            }
        };
        let span = crate::ports::telemetry::gateway_call_span(
            &self.client,
            &self.agent,
            &self.request.model,
            self.id.as_str(),
        );
        // Calls written as text (`text_calls.rs`): text that may be one waits.
        let text_calls = self
            .deps
            .providers
            .any_recovers_text_calls()
            .then(|| text_calls::TextCalls::new(&self.request.tools))
            .flatten();
        let mut hold = text_calls.as_ref().map(|_| text_calls::Hold::default());
        let mut emit = |text: &str| match hold.as_mut() {
            Some(hold) => hold.push(text, on_text),
            None => on_text(text),
        };
        let mut stream = guard.stream();
        let ended = {
            let mut guarded = |text: &str| match stream.as_mut() {
                Some(stream) => {
                    let passed = stream.push(text);
                    if !passed.is_empty() {
                        emit(&passed);
                    }
                }
                None => emit(text),
            };
            metered::call(
                self.meter,
                call,
                &mut guarded,
                &mut on_failover,
                &mut on_charged,
                &CancellationToken::new(),
            )
            .instrument(span.clone())
            .await
        };
        if let Some(stream) = stream.as_mut() {
            let rest = stream.finish();
            if !rest.is_empty() {
                emit(&rest);
            }
        }
        let governance = &self.deps.governance;
        note_findings(governance, &guard.events(&ended.found, None));
        // The answer and the error alike: a `deny` policy that found something in
        // either refuses it (both are screened by the metered call).
        if let Some(policy) = &ended.denied_by
            && !matches!(ended.outcome, Err(metered::Unanswered::Cancelled))
        {
            governance
                .telemetry
                .policy_denied(&self.agent, policy, "content");
            let (held, what) = match ended.outcome {
                Ok(_) => ("the answer", "the model's answer"),
                Err(_) => ("the error", "the model server's error"),
            };
            let refusal = Refusal::content(&policies, policy, &ended.found, held);
            return Err(crate::error::refused(&refusal, what));
        }
        match ended.outcome {
            Ok(routed) => {
                let mut response = routed.response;
                let recovered = text_calls.as_ref().is_some_and(|calls| {
                    self.deps.providers.recovers_text_calls(&routed.provider)
                        && calls.recover(&mut response, &self.id)
                });
                if recovered {
                    crate::ports::telemetry::record_recovered_calls(
                        &span,
                        response.tool_calls.len(),
                    );
                    tracing::info!(
                        id = self.id.as_str(),
                        provider = routed.provider,
                        "a call the model wrote as text was recovered for a gateway client"
                    );
                }
                if let Some(hold) = hold {
                    hold.finish(&response, recovered, on_text);
                }
                if let Some(keep) = self.keep {
                    let id = self.id.as_str();
                    keep.keep(id, &self.client, &self.request.messages, &response);
                }
                Ok(GatewayReply {
                    id: self.id,
                    response,
                })
            }
            Err(metered::Unanswered::Failed(e)) => Err(e.into()),
            // Its token never fires: only dropping the call ends it early.
            Err(metered::Unanswered::Cancelled) => Err(HubError::ShuttingDown),
        }
    }
}

/// Records a gateway call for cost reports and the tap, in the background
/// (`call_records`: in a batch with the calls around it).
struct Recorder {
    deps: TurnDeps,
    records: Arc<CallRecords>,
    id: CompletionId,
    client: String,
    agent: String,
    model: String,
}

impl Recorder {
    fn record(self, provider: String, model: String, usage: Option<Usage>, charge: &Charge) {
        let usage = usage.unwrap_or_default();
        let record = ModelCallRecord {
            id: self.id,
            client: self.client,
            agent: self.agent,
            provider,
            model,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            usd_micros: charge.usd_micros,
        };
        self.deps.governance.telemetry.model_call(&record);
        self.records.record(record);
    }
}

/// What the model server offers, for `GET /openai/v1/models`.
pub(crate) async fn models(
    deps: &TurnDeps,
    config: &GatewayConfig,
) -> Result<Vec<ModelInfo>, HubError> {
    let key = crate::models::RouteKey {
        agent: &config.agent,
        tags: &config.tags,
        size: crate::models::TaskSize::Small,
        pinned: &[],
    };
    let mut models = deps.providers.list_models(&key).await?;
    // The aliases a client can pick by name come first.
    let named = config.models.iter().filter(|alias| alias.is_exact());
    let aliases: Vec<ModelInfo> = named
        .filter(|alias| !models.iter().any(|m| m.id == alias.pattern))
        .map(|alias| ModelInfo {
            id: alias.pattern.clone(),
            parameter_size: None,
            families: Vec::new(),
        })
        .collect();
    models.splice(0..0, aliases);
    Ok(models)
}

#[cfg(test)]
mod tests {
    use agentplane_core::{ChatMessage, ToolSpec};
    use serde_json::json;

    use super::*;

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("hi")],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
                side_effects: false,
            }],
            temperature: None,
            max_tokens: None,
            tool_choice: None,
            response_schema: None,
        }
    }

    fn refused(change: impl FnOnce(&mut ChatRequest)) -> String {
        let mut r = request();
        change(&mut r);
        match validate(&r) {
            Err(HubError::InvalidArgument(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_plain_request_is_valid() {
        assert!(validate(&request()).is_ok());
    }

    #[test]
    fn meaningless_requests_are_refused_with_the_field() {
        assert!(refused(|r| r.model = " ".into()).contains("`model`"));
        assert!(refused(|r| r.messages.clear()).contains("`messages`"));
        assert!(
            refused(|r| r.messages = vec![ChatMessage {
                tool_call_id: None,
                ..ChatMessage::tool_result("x", "y")
            }])
            .contains("tool_call_id")
        );
        assert!(refused(|r| r.tools[0].name = "bad name".into()).contains("tools[0]"));
        assert!(refused(|r| r.tools[0].name = "x".repeat(65)).contains("tools[0]"));
        assert!(refused(|r| r.tools[0].parameters = json!("no")).contains("parameters"));
        assert!(
            refused(|r| r.tool_choice = Some(ToolChoice::Function("other".into())))
                .contains("other")
        );
        assert!(
            refused(|r| {
                r.tools.clear();
                r.tool_choice = Some(ToolChoice::Required);
            })
            .contains("required")
        );
        for t in [-0.1, 2.5, f32::NAN, f32::INFINITY] {
            assert!(refused(|r| r.temperature = Some(t)).contains("temperature"));
        }
        assert!(refused(|r| r.max_tokens = Some(0)).contains("max_tokens"));
    }
}
