//! The one policy decision of a tool call, whatever surface it comes in by: a native
//! agent's call (`turn/tool_gate.rs`), an MCP gateway client's (`mcp_gateway.rs`), an
//! external agent's ask or capability use (`external_turn/asks.rs`). Each surface
//! used to assemble it from `rules::gate`, the deny-wins-after-approval note, the
//! approval policy's approvers and the audit-mode events by hand, and each copy forgot
//! something (the gateway and external agents recorded no audit-mode decision). Here
//! it is taken once: [`decide`] gives the verdict, what a person must approve and by
//! whom, the rate limits to count, and the `policy_audited` events to record; the
//! surface only says where its records go.
//!
//! What must not live here: running the call, the content screens (`content.rs`,
//! `outgoing.rs`) and money (`budget.rs`, `ceiling.rs`), which the surfaces call in
//! the same order around it.

use agentplane_core::EventPayload;
use agentplane_core::policy::{PolicySet, RateLimit, RequestContext, Rule};

use super::Refusal;
use super::rules::{self, Decision, Gate, PolicyExplanation};

/// What a person must approve before the call runs.
#[derive(Debug, Clone)]
pub struct Approval {
    pub policy: String,
    /// Who may decide: clients, or `role:NAME`; empty is the caller's owner.
    pub approvers: Vec<String>,
    /// Four eyes: the client that made the call may not decide it.
    pub separate: bool,
    /// Why, kept with the approval (its set's hash decides again at resume).
    pub explanation: PolicyExplanation,
}

/// The policies' verdict on a call.
#[derive(Debug)]
pub enum Verdict {
    /// It may run (after the rate limits count it).
    Allowed,
    /// A policy refuses it.
    Refused(Refusal),
    /// It waits for a person.
    Approval(Box<Approval>),
}

/// A decided call.
#[derive(Debug)]
pub struct Decided<'p> {
    pub verdict: Verdict,
    /// The rate limits that count the call (none when it is refused).
    pub rate_limits: Vec<(&'p str, &'p RateLimit)>,
    /// What audit-mode policies would have decided: recorded, never enforced.
    pub audited: Vec<EventPayload>,
}

/// The arguments a call is decided on: the call's own, and any other form the
/// surface was shown of it (an external agent that announced one set of arguments
/// and asks with another); every form is decided, and the strictest wins.
pub struct Call<'a> {
    /// The agent, client, roles and tags; the tool is set by [`decide`].
    pub ctx: RequestContext<'a>,
    /// The tool as policies know it.
    pub tool: &'a str,
    /// The second name the tool is governed by (`edit_file` as `write_file`).
    pub also: Option<&'a str>,
    pub arguments: &'a [&'a serde_json::Value],
    pub call_id: Option<&'a str>,
}

/// Decides `call` under `policies`. `approved`: a person already approved these exact
/// arguments under the policy set of this hash, so approval policies are satisfied; a
/// denial still wins, saying when the policies changed since.
pub fn decide<'p>(policies: &'p PolicySet, call: &Call<'_>, approved: Option<&str>) -> Decided<'p> {
    let gate = gate(policies, call);
    let audited = rules::audited_events(policies, &gate.audited, Some(call.tool), call.call_id);
    let verdict = match &gate.decision {
        Decision::Deny { policy, reason } => {
            let mut refusal = Refusal::denying(policies, policy, reason, &gate, Some(call.tool));
            if let (Some(requested), Refusal::Denied { reason, .. }) = (approved, &mut refusal)
                && requested != policies.hash()
            {
                reason.push_str(&format!(
                    " (the policies changed after the approval was requested: {requested} \
                     then, {} now; deny wins)",
                    policies.hash()
                ));
            }
            Verdict::Refused(refusal)
        }
        Decision::RequireApproval { policy } if approved.is_none() => {
            let (approvers, separate) = match policies.get(policy).map(|p| p.rule()) {
                Some(Rule::ApprovalRequired(rule)) => {
                    (rule.approvers.clone(), rule.separate_approver)
                }
                _ => (Vec::new(), false),
            };
            Verdict::Approval(Box::new(Approval {
                policy: (*policy).to_owned(),
                approvers,
                separate,
                explanation: gate.explanation(policies, Some(call.tool)),
            }))
        }
        Decision::RequireApproval { .. } | Decision::Allow => Verdict::Allowed,
    };
    Decided {
        verdict,
        rate_limits: gate.rate_limits,
        audited,
    }
}

/// The strictest gate over every name and every form of the arguments.
fn gate<'p>(policies: &'p PolicySet, call: &Call<'_>) -> Gate<'p> {
    let names = std::iter::once(call.tool).chain(call.also);
    let asked: Vec<RequestContext<'_>> = names
        .flat_map(|name| {
            let ctx = call.ctx.tool(name);
            match call.arguments {
                [] => vec![ctx],
                forms => forms.iter().map(|a| ctx.arguments(a)).collect(),
            }
        })
        .collect();
    asked
        .iter()
        .map(|ctx| rules::gate(policies, ctx))
        .reduce(Gate::and)
        .unwrap_or_else(|| rules::gate(policies, &call.ctx.tool(call.tool)))
}
