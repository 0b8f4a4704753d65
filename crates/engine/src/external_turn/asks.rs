//! What an external agent asks of us during its turn: permission before one of its
//! own tool calls, and the client capabilities it uses on our side (file reads and
//! writes, commands). Each is named by our tool name, so policies apply as to our own
//! tools: deny wins and declines at once, an approval asks a person through the
//! permission broker (fail-closed: anything but an explicit approval is a decline),
//! and the rate limits count the ask.
//!
//! What must not live here: what the agent reports (`mod.rs`, screened by
//! `screen.rs`), its money (`governance::ceiling`).

use agentplane_core::{EventPayload, PermissionDecision, PermissionId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{ExternalTurn, is_empty};
use crate::governance::rules::RequestContext;
use crate::governance::{RateFacts, Refusal, call};
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
        let none = json!({});
        let forms: Vec<&Value> = match (&planned, &ask.input) {
            (Some(planned), Some(input)) if planned != input => vec![planned, input],
            (Some(own), _) | (None, Some(own)) => vec![own],
            (None, None) => vec![&none],
        };
        let decided = call::decide(
            &policies,
            &call::Call {
                ctx: self.policy_ctx(&ask.tool),
                tool: &ask.tool,
                also: agentplane_core::governed_as(&ask.tool),
                arguments: &forms,
                call_id: Some(&ask.call_id),
            },
            None,
        );
        for event in decided.audited {
            self.record(event).await?;
        }
        let (denied, asked_by) = match decided.verdict {
            call::Verdict::Refused(refusal) => (Some(refusal), None),
            call::Verdict::Approval(approval) => (None, Some(asked_by(*approval))),
            call::Verdict::Allowed => (None, None),
        };
        let what = format!("`{}`", ask.tool);
        let refusal = match denied {
            Some(refusal) => Some(refusal),
            None => match self
                .deps
                .governance
                .limiter
                .admit(&decided.rate_limits, self.rate_facts(&ask.tool))
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
        let decided = call::decide(
            &policies,
            &call::Call {
                ctx: self.policy_ctx(&use_.tool),
                tool: &use_.tool,
                also: agentplane_core::governed_as(&use_.tool),
                arguments: &[&use_.arguments],
                call_id: None,
            },
            None,
        );
        for event in decided.audited {
            self.record(event).await?;
        }
        match decided.verdict {
            call::Verdict::Refused(refusal) => {
                let what = format!("`{}`", use_.tool);
                self.record(refusal.event(&what, Some(&use_.tool), None))
                    .await?;
                return Ok(Err(refusal.message(&what)));
            }
            call::Verdict::Approval(approval) => {
                let call_id = format!("cap-{}", PermissionId::new());
                if !self
                    .ask_person(
                        &call_id,
                        &use_.tool,
                        use_.arguments.clone(),
                        (None, Some(asked_by(*approval))),
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
            call::Verdict::Allowed => {}
        }
        if let Err(refused) = self
            .deps
            .governance
            .limiter
            .admit(&decided.rate_limits, self.rate_facts(&use_.tool))
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

/// Who may decide a permission that an approval policy asked for.
fn asked_by(approval: call::Approval) -> PermissionPolicy {
    PermissionPolicy {
        policy: approval.policy,
        approvers: approval.approvers,
        separate: approval.separate,
    }
}
