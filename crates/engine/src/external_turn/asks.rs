//! What an external agent asks of us during its turn: permission before one of its
//! own tool calls, and the client capabilities it uses on our side (file reads and
//! writes, commands). Each is named by our tool name, so policies apply as to our own
//! tools: deny wins and declines at once, an approval asks a person through the
//! permission broker (fail-closed: anything but an explicit approval is a decline),
//! and the rate limits count the ask.
//!
//! What must not live here: what the agent reports (`mod.rs`, screened by
//! `screen.rs`), its money (`governance::ceiling`).

use agentplane_core::policy::{PolicySet, Rule};
use agentplane_core::{EventPayload, PermissionDecision, PermissionId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{ExternalTurn, is_empty};
use crate::governance::rules::{self, Decision, RequestContext};
use crate::governance::{RateFacts, Refusal};
use crate::permissions;
use crate::ports::external::{CapabilityUse, PermissionAsk};
use crate::ports::{NewPermission, PermissionPolicy, RateError, StoreError};

impl ExternalTurn<'_> {
    fn policy_ctx<'r>(&'r self, tool: &'r str) -> RequestContext<'r> {
        RequestContext::new(
            &self.request.agent.name,
            &self.request.agent.tags,
            &self.request.client,
        )
        .tool(tool)
    }

    /// The agent asks before one of its own tool calls, named by our tool name (its
    /// kind mapped by the adapter), so policies apply as to our own tools: a denial
    /// (`tool_access`, `time_window`) or a full rate limit declines at once, without
    /// asking anyone, with `policy_denied` and a `security_event`; otherwise a person
    /// decides through the permission flow (fail-closed). The ask counts against the
    /// rate limits before the person is asked (a declined ask was still one attempt).
    pub(super) async fn permission(
        &mut self,
        ask: PermissionAsk,
        cancel: &CancellationToken,
    ) -> Result<bool, StoreError> {
        // The ask's input fills a call planned without arguments; it never replaces
        // arguments the agent already sent (an ask may show the call differently).
        let unknown = self
            .calls
            .get(&ask.call_id)
            .is_some_and(|c| is_empty(&c.arguments));
        if let Some(input) = ask.input.clone()
            && unknown
        {
            self.late_arguments(&ask.call_id, input).await?;
        }
        // Policies see the call's own arguments, as our tool of that name would get
        // them (`{"path": …}` for an edit), not what the person is shown; where the
        // agent announced arguments and the ask carries others, both are decided and
        // deny wins.
        let planned = self
            .calls
            .get(&ask.call_id)
            .map(|c| c.arguments.clone())
            .filter(|a| !is_empty(a));
        let policies = self.deps.governance.policies.current();
        let ctx = self.policy_ctx(&ask.tool);
        let none = json!({});
        let own = planned.as_ref().or(ask.input.as_ref()).unwrap_or(&none);
        let mut gate = rules::gate(&policies, &ctx.arguments(own));
        if let (Some(planned), Some(input)) = (&planned, &ask.input)
            && planned != input
        {
            gate = gate.and(rules::gate(&policies, &ctx.arguments(input)));
        }
        let asked_by = asked_by(&policies, &gate.decision);
        let what = format!("`{}`", ask.tool);
        let refusal = match Refusal::denied(&policies, &gate, Some(&ask.tool)) {
            Some(refusal) => Some(refusal),
            None => match self
                .deps
                .governance
                .limiter
                .admit(&gate.rate_limits, self.rate_facts(&ask.tool))
                .await
            {
                Err(RateError::Limited(limited)) => Some(Refusal::RateLimited(limited)),
                // The limiter could not decide (Redis down, fail-closed): no.
                Err(other) => {
                    let _ = self
                        .ask_person(
                            &ask.call_id,
                            &ask.tool,
                            ask.arguments,
                            (Some(other.to_string()), asked_by),
                            cancel,
                        )
                        .await?;
                    return Ok(false);
                }
                Ok(()) => None,
            },
        };
        let denial = match refusal {
            Some(refusal) => {
                self.record(refusal.event(&what, Some(&ask.tool), Some(&ask.call_id)))
                    .await?;
                self.record(EventPayload::SecurityEvent {
                    event_type: "policy_denied".to_owned(),
                    tool: Some(ask.tool.clone()),
                    detail: format!(
                        "the external agent asked to run {what}{}; {}",
                        ask.title
                            .as_deref()
                            .map(|t| format!(" ({t})"))
                            .unwrap_or_default(),
                        refusal.message(&what)
                    ),
                })
                .await?;
                Some(refusal.message(&what))
            }
            None => None,
        };
        self.ask_person(
            &ask.call_id,
            &ask.tool,
            ask.arguments,
            (denial, asked_by),
            cancel,
        )
        .await
    }

    fn rate_facts<'r>(&'r self, tool: &'r str) -> RateFacts<'r> {
        RateFacts {
            agent: &self.request.agent.name,
            tool: Some(tool),
            client: &self.request.client,
        }
    }

    /// A client capability the agent uses on our side, gated like our own tool of
    /// that name: deny wins, approval asks a person, then the rate limits count it.
    pub(super) async fn capability(
        &mut self,
        use_: CapabilityUse,
        cancel: &CancellationToken,
    ) -> Result<Result<(), String>, StoreError> {
        let policies = self.deps.governance.policies.current();
        let gate = rules::gate(
            &policies,
            &self.policy_ctx(&use_.tool).arguments(&use_.arguments),
        );
        match &gate.decision {
            Decision::Deny { policy, reason } => {
                let refusal = Refusal::denying(&policies, policy, reason, &gate, Some(&use_.tool));
                let what = format!("`{}`", use_.tool);
                self.record(refusal.event(&what, Some(&use_.tool), None))
                    .await?;
                return Ok(Err(refusal.message(&what)));
            }
            Decision::RequireApproval { .. } => {
                let call_id = format!("cap-{}", PermissionId::new());
                let asked_by = asked_by(&policies, &gate.decision);
                if !self
                    .ask_person(
                        &call_id,
                        &use_.tool,
                        use_.arguments.clone(),
                        (None, asked_by),
                        cancel,
                    )
                    .await?
                {
                    return Ok(Err(format!(
                        "permission to run `{}` was declined",
                        use_.tool
                    )));
                }
            }
            Decision::Allow => {}
        }
        if let Err(refused) = self
            .deps
            .governance
            .limiter
            .admit(&gate.rate_limits, self.rate_facts(&use_.tool))
            .await
        {
            if let RateError::Limited(limited) = &refused {
                let refusal = Refusal::RateLimited(limited.clone());
                let what = format!("`{}`", use_.tool);
                self.record(refusal.event(&what, Some(&use_.tool), None))
                    .await?;
            }
            return Ok(Err(refused.to_string()));
        }
        Ok(Ok(()))
    }

    /// Stores a permission request and waits for its one resolution: a decision, the
    /// timeout, cancellation, or `declined_by` (a policy) at once. Only an explicit
    /// approval is `true`. `asked_by`: the approval policy that wants a person, whose
    /// approvers alone may then decide (`hub::turns::resolve_permission`).
    async fn ask_person(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: Value,
        (declined_by, asked_by): (Option<String>, Option<PermissionPolicy>),
        cancel: &CancellationToken,
    ) -> Result<bool, StoreError> {
        let observer = self.observer;
        let (decision, _) = permissions::ask(
            self.deps.store.as_ref(),
            self.request.permissions.as_ref(),
            NewPermission {
                id: PermissionId::new(),
                thread_id: self.begun.thread().clone(),
                turn_id: self.begun.turn().clone(),
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                arguments,
                options: permissions::OPTIONS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .collect(),
                runs: None,
                policy: asked_by,
            },
            declined_by,
            &|event| observer.on_event(event),
            cancel,
        )
        .await?;
        Ok(decision == PermissionDecision::Approved)
    }
}

/// The approval policy a decision asks a person for, with who may decide.
fn asked_by(policies: &PolicySet, decision: &Decision<'_>) -> Option<PermissionPolicy> {
    let Decision::RequireApproval { policy } = decision else {
        return None;
    };
    let (approvers, separate) = match policies.get(policy).map(|p| p.rule()) {
        Some(Rule::ApprovalRequired(rule)) => (rule.approvers.clone(), rule.separate_approver),
        _ => (Vec::new(), false),
    };
    Some(PermissionPolicy {
        policy: (*policy).to_owned(),
        approvers,
        separate,
    })
}
