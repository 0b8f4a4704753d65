//! What an external agent asks of us during its turn: permission before one of its
//! own tool calls, and the client capabilities it uses on our side (file reads and
//! writes, commands). Each is named by our tool name, so policies apply as to our own
//! tools: deny wins and declines at once, an approval asks a person through the
//! permission broker (fail-closed: anything but an explicit approval is a decline),
//! and the rate limits count the ask. A capability's arguments pass the `content`
//! policies on tool arguments before anyone is asked (a redacted value is what is
//! written; a `deny` finding refuses the use), and what it gives back (a file's text,
//! a command's output) passes the screen of a tool's result before the agent sees it,
//! as our own tool's would.
//!
//! What must not live here: what the agent reports (`mod.rs`, screened by
//! `screen.rs`), its money (`governance::ceiling`).

use agentplane_core::policy::Surface;
use agentplane_core::{EventPayload, PermissionDecision, PermissionId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{ExternalTurn, is_empty};
use crate::governance::content::ContentGuard;
use crate::governance::outgoing::{self, Returned};
use crate::governance::rules::RequestContext;
use crate::governance::{RateFacts, Refusal, admission, call};
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
    /// that name: deny wins, the `content` policies on its arguments (redacted in
    /// place, or refused), approval asks a person (shown the screened arguments),
    /// then the rate limits count it. `Ok` holds the arguments to use.
    pub(super) async fn capability(
        &mut self,
        mut use_: CapabilityUse,
        cancel: &CancellationToken,
    ) -> Result<Result<Value, String>, StoreError> {
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
        if let call::Verdict::Refused(refusal) = decided.verdict {
            let what = format!("`{}`", use_.tool);
            self.record(refusal.event(&what, Some(&use_.tool), None))
                .await?;
            return Ok(Err(refusal.message(&what)));
        }
        if let Some(refused) = self
            .screen_capability_arguments(&policies, &mut use_)
            .await?
        {
            return Ok(Err(refused));
        }
        match decided.verdict {
            call::Verdict::Refused(_) | call::Verdict::Allowed => {}
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
        Ok(Ok(use_.arguments))
    }

    /// The `content` policies on a capability's arguments (every string and key),
    /// redacted in place; the refusal's message when a `deny` policy found something.
    async fn screen_capability_arguments(
        &mut self,
        policies: &agentplane_core::policy::PolicySet,
        use_: &mut CapabilityUse,
    ) -> Result<Option<String>, StoreError> {
        let ctx = self.policy_ctx(&use_.tool);
        let (events, refusal) =
            admission::screen_arguments(policies, &ctx, &mut use_.arguments, None);
        for event in events {
            self.record(event).await?;
        }
        let Some(refusal) = refusal else {
            return Ok(None);
        };
        let what = format!("`{}`", use_.tool);
        self.record(refusal.event(&what, Some(&use_.tool), None))
            .await?;
        Ok(Some(refusal.message(&what)))
    }

    /// What a capability gives the agent back, screened as our tool `tool`'s result
    /// (`governance::outgoing`: the secrets, then the `content` policies on tool
    /// results): the text to pass on, or the refusal's message of a `deny` finding.
    pub(super) async fn capability_output(
        &mut self,
        tool: &str,
        output: String,
    ) -> Result<Result<String, String>, StoreError> {
        let policies = self.deps.governance.policies.current();
        let ctx = self.policy_ctx(tool);
        let guard = ContentGuard::new(&policies, &ctx, Surface::ToolResults);
        let screened = outgoing::screen(&guard, Returned::tool(Ok(output)));
        let events = guard.events(&screened.found, None);
        let refusal = screened
            .denied_by
            .as_ref()
            .map(|policy| Refusal::content(&policies, policy, &screened.found, "the result"));
        for event in events {
            self.record(event).await?;
        }
        if let Some(refusal) = refusal {
            let what = format!("`{tool}`");
            self.record(refusal.event(&what, Some(tool), None)).await?;
            return Ok(Err(refusal.message(&what)));
        }
        Ok(screened.returned.text)
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
