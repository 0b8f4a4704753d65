//! The MCP gateway's governed tool call: what an agent's tool call passes through, for
//! a call that comes from an MCP client instead of a model.
//!
//! In order: the tool's input schema; the policies under `[mcp.gateway] agent`, the
//! caller's client and roles, the tool's `mcp__SERVER__TOOL` name and its arguments
//! (deny wins, also over an approval); `content` policies on the arguments; an
//! approval when a policy asks for one (the service makes it durable, `mod.rs`);
//! the rate limits; the budgets (a reservation of the tool's `[prices.tools]` price);
//! the call within its timeout; `content` policies and secret redaction on what the
//! server answered, a result or an error alike (`governance::outgoing`).
//! [`Gateway::govern`] decides and runs; what it cost and how it ended comes back as a
//! [`Finished`] for the service to record in the gateway's log. Listing shares the call's
//! evaluation ([`Gateway::callable`], `rules::denied_outright`), so a tool is listed
//! exactly when some arguments could be called.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_core::policy::{PolicySet, Surface};
use agentplane_core::{EventPayload, ToolSpec, ToolStatus};
use serde_json::{Value, json};

use crate::governance::content::ContentGuard;
use crate::governance::outgoing::{self, Returned};
use crate::governance::rules::{self, PolicyExplanation, RequestContext};
use crate::governance::{Governance, RateFacts, Refusal};
use crate::governance::{admission, call};
use crate::ports::{EventStore, McpUpstreams, RateError, UpstreamTool};
use crate::schema::Schema;
use tracing::Instrument as _;

/// The agent name gateway tool calls are governed and priced under by default.
pub const DEFAULT_AGENT: &str = "mcp-gateway";
/// The prefix of the name policies know an MCP server's tool by.
const GOVERNED_PREFIX: &str = "mcp__";

/// Who MCP gateway calls are, and what they cost.
#[derive(Debug, Clone, PartialEq)]
pub struct McpGatewayConfig {
    /// The agent name policies select and budgets and costs count gateway calls by.
    pub agent: String,
    /// Tags policies may select gateway calls by.
    pub tags: Vec<String>,
    /// Longest tool call.
    pub call_timeout: Duration,
    /// The price of one call, in micro-dollars, by offered name (`[prices.tools]`).
    pub tool_prices: BTreeMap<String, u64>,
}

impl Default for McpGatewayConfig {
    fn default() -> Self {
        Self {
            agent: DEFAULT_AGENT.to_owned(),
            tags: Vec::new(),
            call_timeout: Duration::from_secs(60),
            tool_prices: BTreeMap::new(),
        }
    }
}

/// A tool as the gateway offers it.
#[derive(Clone)]
pub struct GatewayTool {
    /// `SERVER__TOOL`.
    pub name: String,
    pub server: String,
    /// Named `mcp__SERVER__TOOL`, as policies know it.
    pub spec: ToolSpec,
}

impl GatewayTool {
    /// The offered form of an upstream tool.
    pub fn of(tool: UpstreamTool) -> Self {
        let name = tool
            .spec
            .name
            .strip_prefix(GOVERNED_PREFIX)
            .unwrap_or(&tool.spec.name)
            .to_owned();
        Self {
            name,
            server: tool.server,
            spec: tool.spec,
        }
    }

    /// The name policies know it by.
    pub fn governed(&self) -> &str {
        &self.spec.name
    }
}

/// What the caller gets back: MCP's `CallToolResult` with one text block.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    pub is_error: bool,
}

impl Answer {
    fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }

    /// As kept in the gateway's log.
    pub fn to_json(&self) -> Value {
        json!({ "text": self.text, "is_error": self.is_error })
    }

    /// From the gateway's log; `None` for something else.
    pub fn from_json(value: &Value) -> Option<Self> {
        Some(Self {
            text: value.get("text")?.as_str()?.to_owned(),
            is_error: value.get("is_error")?.as_bool()?,
        })
    }
}

/// The caller, for the policies.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub client: &'a str,
    pub roles: &'a [String],
}

/// How a call ended, for the gateway's log.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub answer: Answer,
    /// The log's status: `ok`, `error`, `denied`, `rate_limited`, `budget_exceeded`,
    /// `invalid`.
    pub status: &'static str,
    pub detail: Option<String>,
    pub policy: Option<String>,
    pub usd_micros: u64,
    pub duration_ms: u64,
}

/// A call a policy wants a person to approve.
#[derive(Debug, Clone)]
pub struct ApprovalAsk {
    pub policy: String,
    pub approvers: Vec<String>,
    pub separate: bool,
    pub explanation: PolicyExplanation,
    /// The arguments to approve (after `content` redaction).
    pub arguments: Value,
}

/// What [`Gateway::govern`] made of a call.
#[derive(Debug)]
pub enum Gated {
    Done(Finished),
    Approval(Box<ApprovalAsk>),
}

/// The gateway's ports and settings, borrowed for one call.
pub struct Gateway<'a> {
    pub store: &'a dyn EventStore,
    pub governance: &'a Governance,
    pub upstreams: &'a dyn McpUpstreams,
    pub config: &'a McpGatewayConfig,
    pub schemas: &'a SchemaCache,
}

/// The tools' input schemas, compiled once per schema: a tool whose server now sends
/// another schema is compiled again.
#[derive(Default)]
pub struct SchemaCache {
    compiled: std::sync::Mutex<BTreeMap<String, (Value, Arc<Schema>)>>,
}

impl SchemaCache {
    /// The compiled input schema of `tool`.
    fn get(&self, tool: &GatewayTool) -> Result<Arc<Schema>, String> {
        let lock = || self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((source, schema)) = lock().get(&tool.name)
            && *source == tool.spec.parameters
        {
            return Ok(Arc::clone(schema));
        }
        let schema = Arc::new(Schema::compile(&tool.spec.parameters)?);
        lock().insert(
            tool.name.clone(),
            (tool.spec.parameters.clone(), Arc::clone(&schema)),
        );
        Ok(schema)
    }
}

impl Gateway<'_> {
    fn context<'c>(&'c self, who: &Who<'c>, tool: &'c str) -> RequestContext<'c> {
        RequestContext::new(&self.config.agent, &self.config.tags, who.client)
            .roles(who.roles)
            .tool(tool)
    }

    /// The tools `who` may call (some arguments allowed): what `tools/list` shows.
    pub fn callable(&self, who: &Who<'_>, tools: Vec<GatewayTool>) -> Vec<GatewayTool> {
        let policies = self.governance.policies.current();
        tools
            .into_iter()
            .filter(|tool| !rules::denied_outright(&policies, &self.context(who, tool.governed())))
            .collect()
    }

    /// Decides and runs one call. `approved`: a person approved these exact arguments
    /// under the policy set of this hash; the call is decided again (deny wins), but an
    /// approval policy no longer stops it.
    pub async fn govern(
        &self,
        who: &Who<'_>,
        tool: &GatewayTool,
        mut arguments: Value,
        approved: Option<&str>,
    ) -> Gated {
        let started = Instant::now();
        let finished = |status, answer: Answer, policy: Option<String>| {
            Gated::Done(Finished {
                detail: answer.is_error.then(|| answer.text.clone()),
                answer,
                status,
                policy,
                usd_micros: 0,
                duration_ms: elapsed_ms(started),
            })
        };
        let schema = match self.schemas.get(tool) {
            Ok(schema) => schema,
            Err(e) => {
                return finished(
                    "invalid",
                    Answer::error(format!("`{}` has an unusable input schema: {e}", tool.name)),
                    None,
                );
            }
        };
        if let Err(problems) = schema.check(&arguments) {
            return finished(
                "invalid",
                Answer::error(format!(
                    "the arguments do not match the tool's schema: {problems}"
                )),
                None,
            );
        }
        let policies = self.governance.policies.current();
        let what = format!("`{}`", tool.name);
        let decided = call::decide(
            &policies,
            &call::Call {
                ctx: self.context(who, tool.governed()),
                tool: tool.governed(),
                also: None,
                arguments: &[&arguments],
                call_id: None,
            },
            approved,
        );
        // No thread holds a `policy_audited` event of a gateway call: it is counted.
        for event in &decided.audited {
            if let EventPayload::PolicyAudited { policy, would, .. } = event {
                self.governance
                    .telemetry
                    .policy_audited(&self.config.agent, policy, would);
            }
        }
        match decided.verdict {
            call::Verdict::Refused(refusal) => return self.refused(&refusal, &what, started),
            call::Verdict::Approval(approval) => {
                if let Some(refused) = self.guard_arguments(&policies, who, tool, &mut arguments) {
                    return self.refused(&refused, &what, started);
                }
                let call::Approval {
                    policy,
                    approvers,
                    separate,
                    explanation,
                } = *approval;
                return Gated::Approval(Box::new(ApprovalAsk {
                    policy,
                    approvers,
                    separate,
                    explanation,
                    arguments,
                }));
            }
            call::Verdict::Allowed => {}
        }
        if let Some(refused) = self.guard_arguments(&policies, who, tool, &mut arguments) {
            return self.refused(&refused, &what, started);
        }
        let facts = RateFacts {
            agent: &self.config.agent,
            tool: Some(tool.governed()),
            client: who.client,
        };
        match self
            .governance
            .limiter
            .admit(&decided.rate_limits, facts)
            .await
        {
            Ok(()) => {}
            Err(RateError::Limited(limited)) => {
                return self.refused(&Refusal::RateLimited(limited), &what, started);
            }
            Err(unavailable) => {
                return finished("rate_limited", Answer::error(unavailable.to_string()), None);
            }
        }
        let price = self
            .config
            .tool_prices
            .get(&tool.name)
            .copied()
            .unwrap_or(0);
        let reservation = {
            let ctx = self.context(who, tool.governed());
            self.governance
                .budgets
                .reserve(
                    self.store,
                    &policies,
                    &ctx,
                    &self.governance.agent_tags,
                    price,
                )
                .await
        };
        let reservation = match reservation {
            Ok(reservation) => reservation,
            Err(crate::governance::budget::BudgetError::Exceeded(exceeded)) => {
                return self.refused(&Refusal::BudgetExceeded(exceeded), &what, started);
            }
            Err(crate::governance::budget::BudgetError::Store(e)) => {
                return finished(
                    "error",
                    Answer::error(format!("the budgets could not be read: {e}")),
                    None,
                );
            }
        };
        let span = crate::ports::telemetry::tool_call_span(&tool.name, "");
        crate::ports::telemetry::record_tool_arguments(&span, &arguments);
        let called = self
            .upstreams
            .call(
                who.client,
                &tool.server,
                tool.governed(),
                arguments,
                self.config.call_timeout,
            )
            .instrument(span.clone())
            .await;
        span.record(
            "agentplane.status",
            if called.is_ok() { "ok" } else { "error" },
        );
        // The call reached the server: it is charged, whatever it answered.
        self.governance.budgets.settle(reservation, price).await;
        // A result and an error alike: what the server answered is screened before the
        // span, the log or the caller sees it.
        let (status, answer) = match self.screen_result(
            &policies,
            who,
            tool,
            called.map(|o| o.content).map_err(|e| e.message),
        ) {
            Outcome::Passed(Ok(text)) => (
                "ok",
                Answer {
                    text,
                    is_error: false,
                },
            ),
            Outcome::Passed(Err(text)) => ("error", Answer::error(text)),
            Outcome::Denied { policy, message } => {
                crate::ports::telemetry::record_tool_result(&span, &message);
                return Gated::Done(Finished {
                    detail: Some(message.clone()),
                    answer: Answer::error(message),
                    status: "denied",
                    policy: Some(policy),
                    usd_micros: price,
                    duration_ms: elapsed_ms(started),
                });
            }
        };
        crate::ports::telemetry::record_tool_result(&span, &answer.text);
        self.governance.telemetry.mcp_gateway_call(
            &tool.name,
            if answer.is_error {
                ToolStatus::Error
            } else {
                ToolStatus::Ok
            },
            elapsed_ms(started),
        );
        Gated::Done(Finished {
            detail: answer.is_error.then(|| answer.text.clone()),
            answer,
            status,
            policy: None,
            usd_micros: price,
            duration_ms: elapsed_ms(started),
        })
    }

    /// A refusal by a policy: counted, answered as a tool error naming the policy.
    fn refused(&self, refusal: &Refusal, what: &str, started: Instant) -> Gated {
        self.governance.telemetry.policy_denied(
            &self.config.agent,
            refusal.policy(),
            refusal.policy_type(),
        );
        let status = match refusal {
            Refusal::Denied { .. } => "denied",
            Refusal::RateLimited(_) => "rate_limited",
            Refusal::BudgetExceeded(_) => "budget_exceeded",
        };
        let message = refusal.message(what);
        Gated::Done(Finished {
            answer: Answer::error(message.clone()),
            status,
            detail: Some(message),
            policy: Some(refusal.policy().to_owned()),
            usd_micros: 0,
            duration_ms: elapsed_ms(started),
        })
    }

    /// `content` policies on the arguments: redacted in place, or the refusal of a
    /// `deny` policy that found something.
    fn guard_arguments(
        &self,
        policies: &PolicySet,
        who: &Who<'_>,
        tool: &GatewayTool,
        arguments: &mut Value,
    ) -> Option<Refusal> {
        let ctx = self.context(who, tool.governed());
        let (events, refusal) = admission::screen_arguments(policies, &ctx, arguments, None);
        self.note_findings(&events);
        refusal
    }

    /// `content` policies and the secrets' redaction on what the server answered, a
    /// result or an error (`governance::outgoing`): passed on redacted, or refused by a
    /// `deny` policy that found something.
    fn screen_result(
        &self,
        policies: &PolicySet,
        who: &Who<'_>,
        tool: &GatewayTool,
        outcome: Result<String, String>,
    ) -> Outcome {
        let ctx = self.context(who, tool.governed());
        let guard = ContentGuard::new(policies, &ctx, Surface::ToolResults);
        let screened = outgoing::screen(&guard, Returned::tool(outcome));
        self.note_findings(&guard.events(&screened.found, None));
        match &screened.denied_by {
            Some(policy) => {
                let what = if screened.returned.text.is_ok() {
                    "the result"
                } else {
                    "the error"
                };
                let refusal = Refusal::content(policies, policy, &screened.found, what);
                self.governance
                    .telemetry
                    .policy_denied(&self.config.agent, policy, "content");
                Outcome::Denied {
                    policy: policy.clone(),
                    message: refusal.message(&format!("`{}`", tool.name)),
                }
            }
            None => Outcome::Passed(screened.returned.text),
        }
    }

    /// Counts and logs content findings (a gateway call has no thread): policy,
    /// surface, detector, never the text.
    fn note_findings(&self, events: &[EventPayload]) {
        for event in events {
            if let EventPayload::ContentFinding {
                policy,
                surface,
                detector,
                action,
                ..
            } = event
            {
                self.governance
                    .telemetry
                    .content_finding(policy, surface, detector, action);
                tracing::info!(policy, surface, detector, action, "content policy finding");
            }
        }
    }
}

/// What became of a call's answer after the screen.
enum Outcome {
    /// The result (`Ok`) or the error (`Err`), redacted.
    Passed(Result<String, String>),
    /// A `deny` policy found something: the policy, and the refusal's message.
    Denied { policy: String, message: String },
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
