//! Admission: the one check that lets a turn, an execution's turn or a gateway call
//! start. In order: a `time_window` or `tool_access` denial without a tool, the rate
//! limits that count requests, and the budgets (a reservation of the request's
//! amount; 0 checks only that no budget is already spent). Every refusal names its
//! policy and its type, so the caller records it as a `policy_denied` event (or, for a
//! call outside any thread, in the `policy_denials_total` metric).

use agentplane_core::policy::PolicySet;
use agentplane_core::{EventPayload, ToolErrorKind};

use super::budget::{BudgetError, Exceeded, Reservation};
use super::{Governance, RateFacts};
use crate::governance::rules::{self, Decision, Gate, PolicyExplanation, RequestContext};
use crate::ports::{CallStore, Limited, RateError, StoreError};

/// A refusal by a policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// A `time_window` or `tool_access` policy forbids it.
    Denied {
        policy: String,
        policy_type: &'static str,
        reason: String,
        /// The decision as the policies made it, recorded with the refusal.
        explanation: Box<PolicyExplanation>,
    },
    /// A rate limit's window is full.
    RateLimited(Limited),
    /// A budget cannot pay for it.
    BudgetExceeded(Exceeded),
}

impl Refusal {
    /// A denial by the gate's decision, with the denying policy's type and the
    /// explanation; `None` when the gate does not deny.
    pub fn denied(set: &PolicySet, gate: &Gate<'_>, tool: Option<&str>) -> Option<Self> {
        match &gate.decision {
            Decision::Deny { policy, reason } => {
                Some(Self::denying(set, policy, reason, gate, tool))
            }
            _ => None,
        }
    }

    /// The refusal of a gate whose decision is a denial by `policy` for `reason`.
    pub fn denying(
        set: &PolicySet,
        policy: &str,
        reason: &str,
        gate: &Gate<'_>,
        tool: Option<&str>,
    ) -> Self {
        let policy_type = set.get(policy).map_or("tool_access", |p| p.kind().as_str());
        Self::Denied {
            policy: policy.to_owned(),
            policy_type,
            reason: reason.to_owned(),
            explanation: Box::new(gate.explanation(set, tool)),
        }
    }

    /// A refusal by a `content` policy that found `found` in `what` (`the arguments`):
    /// the reason names the detectors, never the text.
    pub fn content(
        set: &PolicySet,
        policy: &str,
        found: &[super::content::Found],
        what: &str,
    ) -> Self {
        let mut detectors: Vec<&str> = found
            .iter()
            .filter(|f| f.policy == policy)
            .map(|f| f.finding.detector.as_str())
            .collect();
        detectors.sort_unstable();
        detectors.dedup();
        let reason = format!("{what} hold {}", detectors.join(", "));
        Self::Denied {
            policy: policy.to_owned(),
            policy_type: "content",
            explanation: Box::new(PolicyExplanation {
                policy_set: set.hash().to_owned(),
                decision: "deny".to_owned(),
                decided_by: Some(policy.to_owned()),
                matched: vec![policy.to_owned()],
                reason: reason.clone(),
            }),
            reason,
        }
    }

    /// The refusing policy's name.
    pub fn policy(&self) -> &str {
        match self {
            Self::Denied { policy, .. } => policy,
            Self::RateLimited(limited) => &limited.policy,
            Self::BudgetExceeded(exceeded) => &exceeded.policy,
        }
    }

    /// The refusing policy's type, as `policy_denied` events and metrics name it.
    pub fn policy_type(&self) -> &'static str {
        match self {
            Self::Denied { policy_type, .. } => policy_type,
            Self::RateLimited(_) => "rate_limit",
            Self::BudgetExceeded(_) => "budget",
        }
    }

    /// Why, in words, for what was refused (`a turn of agent `x``, `` `write_file` ``).
    pub fn message(&self, what: &str) -> String {
        match self {
            Self::Denied { policy, reason, .. } => {
                format!("policy `{policy}` forbids {what}: {reason}")
            }
            Self::RateLimited(limited) => limited.message(),
            Self::BudgetExceeded(exceeded) => exceeded.message(),
        }
    }

    /// The tool error a refused tool call answers the model with.
    pub fn tool_error_kind(&self) -> ToolErrorKind {
        match self {
            Self::RateLimited(_) => ToolErrorKind::RateLimited,
            Self::Denied { .. } | Self::BudgetExceeded(_) => ToolErrorKind::PolicyDenied,
        }
    }

    /// The `policy_denied` event that records it.
    pub fn event(&self, what: &str, tool: Option<&str>, call_id: Option<&str>) -> EventPayload {
        EventPayload::PolicyDenied {
            policy: self.policy().to_owned(),
            policy_type: self.policy_type().to_owned(),
            tool: tool.map(str::to_owned),
            call_id: call_id.map(str::to_owned),
            detail: self.message(what),
            explanation: match self {
                Self::Denied { explanation, .. } => Some(explanation.clone()),
                _ => None,
            },
        }
    }
}

/// Why a request was not admitted.
#[derive(Debug)]
pub enum AdmissionError {
    Refused(Refusal),
    /// The shared rate limits could not be asked (fail-closed).
    RateLimitsUnavailable(RateError),
    Store(StoreError),
}

impl From<BudgetError> for AdmissionError {
    fn from(e: BudgetError) -> Self {
        match e {
            BudgetError::Exceeded(exceeded) => Self::Refused(Refusal::BudgetExceeded(exceeded)),
            BudgetError::Store(e) => Self::Store(e),
        }
    }
}

impl From<RateError> for AdmissionError {
    fn from(e: RateError) -> Self {
        match e {
            RateError::Limited(limited) => Self::Refused(Refusal::RateLimited(limited)),
            unavailable @ RateError::Unavailable(_) => Self::RateLimitsUnavailable(unavailable),
        }
    }
}

/// Admits one request of `ctx` (no tool) under the policies in force, reserving
/// `amount` on its budgets. The reservation is the caller's to settle.
pub async fn admit(
    governance: &Governance,
    store: &dyn CallStore,
    ctx: &RequestContext<'_>,
    amount: u64,
) -> Result<Reservation, AdmissionError> {
    let set = governance.policies.current();
    if set.is_empty() {
        return Ok(Reservation::unbudgeted(amount));
    }
    if let Some(refusal) = Refusal::denied(&set, &rules::gate(&set, ctx), None) {
        return Err(AdmissionError::Refused(refusal));
    }
    let limits = rules::rate_limits(&set, ctx);
    governance
        .limiter
        .admit(
            &limits,
            RateFacts {
                agent: ctx.agent_name(),
                tool: None,
                client: ctx.client_id(),
            },
        )
        .await?;
    let reservation = governance
        .budgets
        .reserve(store, &set, ctx, &governance.agent_tags, amount)
        .await?;
    Ok(reservation)
}

/// The `content` policies on a call's arguments (every string and key), redacted in
/// place: the findings' events (tied to `call_id` where the surface has one), and the
/// refusal of a `deny` policy that found something. One rule, and one guardrail span,
/// for every surface that runs a call on arguments it was given (a native turn's tool
/// calls, the MCP gateway, an external agent's capabilities).
pub fn screen_arguments(
    policies: &PolicySet,
    ctx: &RequestContext<'_>,
    arguments: &mut serde_json::Value,
    call_id: Option<&str>,
) -> (Vec<EventPayload>, Option<Refusal>) {
    let surface = agentplane_core::policy::Surface::ToolArguments;
    let guard = super::content::ContentGuard::new(policies, ctx, surface);
    if guard.is_empty() {
        return (Vec::new(), None);
    }
    let span = crate::ports::telemetry::guardrail_span(surface.as_str());
    let (found, denied_by) = span.in_scope(|| guard.check_json(arguments));
    crate::ports::telemetry::record_guardrail(&span, found.len(), denied_by.as_deref());
    let refusal =
        denied_by.map(|policy| Refusal::content(policies, &policy, &found, "the arguments"));
    (guard.events(&found, call_id), refusal)
}
