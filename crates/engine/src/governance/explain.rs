//! Every decision explained: for one request, each policy of the set considered in
//! order, whether it selected the request and why (the target or condition that
//! decided), what it demands, and the decision [`rules::gate`] makes, the very function
//! the turn loop asks. Used by `agentplane policy explain`, `policy test`, `policy
//! replay` and `POST /v1/policies/explain`.

use agentplane_core::policy::{Mode, Policy, PolicySet, Rule, Truth};
use serde::Serialize;

use super::rules::{self, Decision, RequestContext};

/// One request's decision and how each policy took part in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    /// The set's version (`sha256:…`).
    pub policy_set: String,
    /// `allow`, `deny` or `approval`.
    pub decision: String,
    /// The deciding policy, for `deny` and `approval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Why, in words.
    pub reason: String,
    /// The enforced policies that selected the request, in set order.
    pub matched: Vec<String>,
    /// Every policy, in set order.
    pub policies: Vec<Considered>,
}

/// One policy's part in a decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Considered {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub mode: &'static str,
    pub source: String,
    /// Whether its targets and condition selected the request.
    pub matched: bool,
    /// Why it matched or not: the target or condition that decided.
    pub why: String,
    /// What it made of the request when it matched (`deny: …`, `approval`, `allow`,
    /// `counts: …`); for an audit-mode policy, what it would have made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// Explains the decision of `ctx` under `set`. A tool governed as another
/// (`edit_file` as `write_file`) is decided under both names, as the tool gate decides
/// its calls; a policy that selects it only under the other name says so. An MCP tool
/// may be named as the MCP gateway lists it (`SERVER__TOOL`): it is decided as the
/// `mcp__SERVER__TOOL` it is everywhere else (`policy::glob::canonical_tool`).
pub fn explain(set: &PolicySet, ctx: &RequestContext<'_>) -> Explained {
    let canonical = ctx
        .tool_name()
        .map(agentplane_core::policy::glob::canonical_tool);
    let ctx = &match canonical.as_deref() {
        Some(tool) => ctx.tool(tool),
        None => *ctx,
    };
    let alias = ctx.tool_name().and_then(agentplane_core::governed_as);
    let mut gate = rules::gate(set, ctx);
    if let Some(alias) = alias {
        gate = gate.and(rules::gate(set, &ctx.tool(alias)));
    }
    let recorded = gate.explanation(set, ctx.tool_name());
    let policies = set
        .policies()
        .iter()
        .map(|p| {
            let own = consider(p, ctx);
            let Some(alias) = alias else { return own };
            let other = consider(p, &ctx.tool(alias));
            if other.matched && (!own.matched || strictness(&other) > strictness(&own)) {
                Considered {
                    why: format!("as `{alias}`: {}", other.why),
                    ..other
                }
            } else {
                own
            }
        })
        .collect();
    Explained {
        policy_set: recorded.policy_set,
        decision: recorded.decision,
        decided_by: recorded.decided_by,
        reason: recorded.reason,
        matched: recorded.matched,
        policies,
    }
}

/// How strict a matched policy's effect is: deny, then approval, then the rest.
fn strictness(considered: &Considered) -> u8 {
    match considered.effect.as_deref() {
        Some(e) if e.starts_with("deny") => 2,
        Some(e) if e.starts_with("approval") => 1,
        _ => 0,
    }
}

fn consider(policy: &Policy, ctx: &RequestContext<'_>) -> Considered {
    let targets = policy.targets();
    let mismatch = targets.mismatch(
        ctx.agent_name(),
        ctx.agent_tags(),
        ctx.tool_name(),
        ctx.client_id(),
    );
    let (matched, why) = match (mismatch, policy.when()) {
        (Some(why), _) => (false, format!("not selected: {why}")),
        (None, None) => (
            true,
            format!("selected by its targets ({})", targets.summary()),
        ),
        (None, Some(condition)) => {
            let truth = condition.eval(ctx);
            let detail = condition.explain(ctx);
            match truth {
                Truth::Yes => (true, format!("selected: {detail}")),
                Truth::No => (false, format!("not selected: {detail}")),
                Truth::Unknown => (false, format!("not decided yet: {detail}")),
            }
        }
    };
    let effect = matched.then(|| effect(policy, ctx));
    Considered {
        name: policy.name().to_owned(),
        kind: policy.kind().as_str(),
        mode: policy.mode().as_str(),
        source: policy.source().to_owned(),
        matched,
        why,
        effect: effect.map(|e| match policy.mode() {
            Mode::Audit => format!("would {e} (audit mode: not enforced)"),
            Mode::Enforce => e,
        }),
    }
}

fn effect(policy: &Policy, ctx: &RequestContext<'_>) -> String {
    match policy.rule() {
        Rule::RateLimit(limit) => format!(
            "counts it: at most {} per {}s",
            limit.max,
            limit.window.as_secs()
        ),
        Rule::Budget(_) => "spends from its budget".to_owned(),
        Rule::DataScope(_) => "grants its data scope".to_owned(),
        _ => match rules::verdict(policy, ctx) {
            Decision::Allow => "allow".to_owned(),
            Decision::Deny { reason, .. } => format!("deny: {reason}"),
            Decision::RequireApproval { .. } => "approval".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::policy::PolicySource;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_mcp_tool_has_one_name_in_policies_and_explanations() {
        // Written as the MCP gateway lists the tools, and as agents know them.
        let set = PolicySet::parse(&[PolicySource {
            name: "p.yaml",
            text: "- name: no-env\n  type: tool_access\n  targets: {tools: [everything__get-env]}\n  \
                   rules: {deny: ['*']}\n\
                   - name: sums\n  type: approval_required\n  rules: {tools: ['mcp__everything__get-sum']}\n\
                   - name: no-echo\n  type: tool_access\n  rules: {deny: ['everything__ec*']}\n",
        }])
        .expect("valid");
        for (tool, decision, by) in [
            ("everything__get-env", "deny", "no-env"),
            ("mcp__everything__get-env", "deny", "no-env"),
            ("everything__get-sum", "approval", "sums"),
            ("mcp__everything__get-sum", "approval", "sums"),
            ("everything__echo", "deny", "no-echo"),
            ("mcp__everything__echo", "deny", "no-echo"),
        ] {
            let ctx = RequestContext::new("mcp-gateway", &[], "alice").tool(tool);
            let e = explain(&set, &ctx);
            assert_eq!(e.decision, decision, "{tool}: {e:?}");
            assert_eq!(e.decided_by.as_deref(), Some(by), "{tool}");
            // And the gate itself, as a call of the agent's own name decides.
            let canonical = agentplane_core::policy::glob::canonical_tool(tool);
            let gate = rules::gate(&set, &ctx.tool(canonical.as_ref()));
            assert_eq!(gate.explanation(&set, Some(&canonical)).decision, decision);
        }
        // A built-in tool is not an MCP tool: nothing above selects it.
        let ctx = RequestContext::new("mcp-gateway", &[], "alice").tool("read_file");
        assert_eq!(explain(&set, &ctx).decision, "allow");
    }

    #[test]
    fn every_policy_is_considered_and_the_decision_is_the_gates() {
        let set = PolicySet::parse(&[PolicySource {
            name: "p.yaml",
            text: "- name: no-push\n  type: approval_required\n  targets: {tools: [run_command]}\n  \
                   when: {all: [{arg: /program, equals: git}, {arg: /args, equals: push}]}\n\
                   - name: ops-only\n  type: tool_access\n  targets: {agents: [ops]}\n  rules: {deny: ['*']}\n\
                   - name: rate\n  type: rate_limit\n  rules: {window: 1m, max: 5}\n\
                   - name: rehearse\n  type: tool_access\n  mode: audit\n  rules: {deny: [run_command]}\n",
        }])
        .expect("valid");
        let args = json!({"program": "git", "args": ["push", "origin"]});
        let ctx = RequestContext::new("support", &[], "alice")
            .tool("run_command")
            .arguments(&args);
        let e = explain(&set, &ctx);
        assert_eq!(e.decision, "approval");
        assert_eq!(e.decided_by.as_deref(), Some("no-push"));
        assert_eq!(e.matched, ["no-push", "rate"]);
        assert_eq!(e.policy_set, set.hash());
        let by = |n: &str| e.policies.iter().find(|p| p.name == n).expect(n);
        assert!(by("no-push").matched);
        assert!(!by("ops-only").matched);
        assert!(
            by("ops-only")
                .why
                .contains("agent `support` is not among agents [ops]")
        );
        assert!(
            by("rate")
                .effect
                .as_deref()
                .is_some_and(|e| e.starts_with("counts it"))
        );
        let audit = by("rehearse");
        assert!(audit.matched);
        assert!(
            audit
                .effect
                .as_deref()
                .is_some_and(|e| e.contains("would deny"))
        );
        let pull = json!({"program": "git", "args": ["pull"]});
        let e = explain(&set, &ctx.arguments(&pull));
        assert_eq!(e.decision, "allow");
        assert!(
            by_name(&e, "no-push")
                .why
                .contains("arg /args equals \"push\" does not hold")
        );
    }

    #[test]
    fn a_tool_governed_as_another_is_decided_under_both_names() {
        let set = PolicySet::parse(&[PolicySource {
            name: "p.yaml",
            text: "- name: no-writes\n  type: tool_access\n  rules: {deny: [write_file]}\n",
        }])
        .expect("valid");
        let args = json!({"path": "a.txt"});
        let ctx = RequestContext::new("coder", &[], "alice")
            .tool("edit_file")
            .arguments(&args);
        let e = explain(&set, &ctx);
        assert_eq!(e.decision, "deny");
        assert_eq!(e.decided_by.as_deref(), Some("no-writes"));
        let considered = by_name(&e, "no-writes");
        assert!(considered.matched);
        assert!(
            considered.why.starts_with("as `write_file`: "),
            "{considered:?}"
        );
    }

    fn by_name<'e>(e: &'e Explained, name: &str) -> &'e Considered {
        e.policies.iter().find(|p| p.name == name).expect(name)
    }
}
