//! Policy evaluation: given a validated `PolicySet` and the facts of one request, the
//! decision (allow, deny, require approval) and the stateful rules that apply (rate
//! limits, budgets, data scopes) for the parts that count and enforce them. Pure and
//! allocation-light: no clock, no I/O; the caller passes the instant.
//!
//! Precedence (documented in `docs/policies.md`): any deny wins (a `tool_access` refusal
//! or a `time_window` the instant is outside of); then `approval_required`; then allow.
//! Among several policies of the same effect, the first in set order is reported.

use agentplane_core::policy::{
    Budget, DataScope, Mode, Policy, PolicySet, RateLimit, Rule, TimeWindow, Truth,
};

pub use agentplane_core::event::PolicyExplanation;
pub use agentplane_core::policy::RequestContext;

/// What policy says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'p> {
    /// No policy objects.
    Allow,
    /// A policy forbids it; `reason` is for the user and the log.
    Deny {
        /// The name of the first denying policy.
        policy: &'p str,
        /// Why, in words.
        reason: String,
    },
    /// It may run only after a person approves it.
    RequireApproval {
        /// The name of the first policy demanding approval.
        policy: &'p str,
    },
}

/// Whether a policy's targets and condition select this request (a condition that
/// depends on arguments the request does not carry does not select it).
fn applies(policy: &Policy, ctx: &RequestContext<'_>) -> bool {
    policy.selects(ctx) == Truth::Yes
}

/// The enforced policies whose targets and conditions select this request, in set
/// order.
pub fn applicable<'p>(
    set: &'p PolicySet,
    ctx: &RequestContext<'_>,
) -> impl Iterator<Item = &'p Policy> {
    let ctx = *ctx;
    let candidates: Vec<&'p Policy> = set.candidates(&ctx).collect();
    candidates
        .into_iter()
        .filter(move |p| p.mode() == Mode::Enforce && applies(p, &ctx))
}

/// What one deciding policy would make of a request, whatever its mode.
pub(crate) fn verdict<'p>(policy: &'p Policy, ctx: &RequestContext<'_>) -> Decision<'p> {
    match policy.rule() {
        Rule::ToolAccess(access) => match ctx.tool_name().and_then(|t| access.refusal(t)) {
            Some(reason) => Decision::Deny {
                policy: policy.name(),
                reason,
            },
            None => Decision::Allow,
        },
        Rule::TimeWindow(window) if !window.contains(ctx.instant()) => Decision::Deny {
            policy: policy.name(),
            reason: format!("outside the allowed time ({})", window.summary()),
        },
        Rule::ApprovalRequired(rule) => {
            let needed = match (&rule.tools, ctx.tool_name()) {
                (None, Some(_)) => true,
                (Some(tools), Some(tool)) => tools.iter().any(|g| g.matches(tool)),
                (_, None) => false,
            };
            if needed {
                Decision::RequireApproval {
                    policy: policy.name(),
                }
            } else {
                Decision::Allow
            }
        }
        _ => Decision::Allow,
    }
}

/// An audit-mode policy that selected a request, and what it would have decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited<'p> {
    pub policy: &'p Policy,
    pub would: Decision<'p>,
}

/// What the turn loop needs per tool call, from one pass over the policies: the
/// decision, the rate limits that count the call when it may run, the policies that
/// selected it and what audit-mode policies would have decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate<'p> {
    pub decision: Decision<'p>,
    /// Empty when the decision is a denial (nothing is counted then).
    pub rate_limits: Vec<(&'p str, &'p RateLimit)>,
    /// Every enforced policy that selected the request, in set order.
    pub matched: Vec<&'p str>,
    /// Audit-mode policies that selected it, with their would-be decisions.
    pub audited: Vec<Audited<'p>>,
}

impl<'p> Gate<'p> {
    /// The stricter of two gates for one call (deny, then approval, then allow; the
    /// first's reason kept on a tie), with both gates' rate limits and matches.
    pub fn and(self, other: Gate<'p>) -> Gate<'p> {
        let mut matched = self.matched;
        for name in other.matched {
            if !matched.contains(&name) {
                matched.push(name);
            }
        }
        let mut audited = self.audited;
        for one in other.audited {
            if !audited.iter().any(|a| a.policy.name() == one.policy.name()) {
                audited.push(one);
            }
        }
        let decision = match (self.decision, other.decision) {
            (deny @ Decision::Deny { .. }, _) | (_, deny @ Decision::Deny { .. }) => {
                return Gate {
                    decision: deny,
                    rate_limits: Vec::new(),
                    matched,
                    audited,
                };
            }
            (approval @ Decision::RequireApproval { .. }, _)
            | (_, approval @ Decision::RequireApproval { .. }) => approval,
            (Decision::Allow, Decision::Allow) => Decision::Allow,
        };
        let mut rate_limits = self.rate_limits;
        for limit in other.rate_limits {
            if !rate_limits.iter().any(|(name, _)| *name == limit.0) {
                rate_limits.push(limit);
            }
        }
        Gate {
            decision,
            rate_limits,
            matched,
            audited,
        }
    }

    /// The decision as recorded with events: the set's version, the verdict, the
    /// deciding policy, every policy that matched, and the reason in words.
    pub fn explanation(&self, set: &PolicySet, tool: Option<&str>) -> PolicyExplanation {
        explanation(set, &self.decision, &self.matched, tool)
    }
}

/// The `policy_audited` events of what audit-mode policies would have decided of a
/// request (a tool call when `tool` is given, else a turn's admission).
pub fn audited_events(
    set: &PolicySet,
    audited: &[Audited<'_>],
    tool: Option<&str>,
    call_id: Option<&str>,
) -> Vec<agentplane_core::EventPayload> {
    audited
        .iter()
        .map(|one| {
            let explained = explanation(set, &one.would, &[], tool);
            agentplane_core::EventPayload::PolicyAudited {
                policy: one.policy.name().to_owned(),
                policy_type: one.policy.kind().as_str().to_owned(),
                tool: tool.map(str::to_owned),
                call_id: call_id.map(str::to_owned),
                would: explained.decision,
                reason: explained.reason,
                policy_set: explained.policy_set,
            }
        })
        .collect()
}

/// A decision as events record it.
pub fn explanation(
    set: &PolicySet,
    decision: &Decision<'_>,
    matched: &[&str],
    tool: Option<&str>,
) -> PolicyExplanation {
    let what = match tool {
        Some(tool) => format!("`{tool}`"),
        None => "the request".to_owned(),
    };
    let (verdict, decided_by, reason) = match decision {
        Decision::Allow if matched.is_empty() => {
            ("allow", None, format!("no policy selects {what}"))
        }
        Decision::Allow => (
            "allow",
            None,
            format!(
                "{} selected {what}; none denies it or asks for approval",
                matched.join(", ")
            ),
        ),
        Decision::Deny { policy, reason } => ("deny", Some(*policy), reason.clone()),
        Decision::RequireApproval { policy } => (
            "approval",
            Some(*policy),
            format!("{what} waits for a person's approval (policy `{policy}`)"),
        ),
    };
    PolicyExplanation {
        policy_set: set.hash().to_owned(),
        decision: verdict.to_owned(),
        decided_by: decided_by.map(str::to_owned),
        matched: matched.iter().map(|m| (*m).to_owned()).collect(),
        reason,
    }
}

/// Decides a request and collects its rate limits in one pass. Deny wins over
/// everything, then approval, then allow. Audit-mode policies are evaluated and
/// reported in [`Gate::audited`], never enforced.
pub fn gate<'p>(set: &'p PolicySet, ctx: &RequestContext<'_>) -> Gate<'p> {
    let mut approval: Option<&'p str> = None;
    let mut deny: Option<Decision<'p>> = None;
    let mut rate_limits = Vec::new();
    let mut matched = Vec::new();
    let mut audited = Vec::new();
    for policy in set.candidates(ctx) {
        if !applies(policy, ctx) {
            continue;
        }
        if policy.mode() == Mode::Audit {
            audited.push(Audited {
                policy,
                would: verdict(policy, ctx),
            });
            continue;
        }
        matched.push(policy.name());
        if deny.is_some() {
            continue;
        }
        match policy.rule() {
            Rule::RateLimit(limit) => rate_limits.push((policy.name(), limit)),
            Rule::Budget(_) | Rule::DataScope(_) => {}
            _ => match verdict(policy, ctx) {
                d @ Decision::Deny { .. } => deny = Some(d),
                Decision::RequireApproval { policy } if approval.is_none() => {
                    approval = Some(policy)
                }
                _ => {}
            },
        }
    }
    if let Some(decision) = deny {
        return Gate {
            decision,
            rate_limits: Vec::new(),
            matched,
            audited,
        };
    }
    Gate {
        decision: match approval {
            Some(policy) => Decision::RequireApproval { policy },
            None => Decision::Allow,
        },
        rate_limits,
        matched,
        audited,
    }
}

/// Whether policy denies `ctx`'s tool whatever its arguments: then it is not offered
/// to the model at all. Asks [`gate`] without arguments (conditions on them do not
/// select), so a tool denied here is denied at every call too; a tool denied only for
/// some arguments is not denied here. A tool governed as another (`governed_as`) is
/// asked under both names, as its calls are.
pub fn denied_outright(set: &PolicySet, ctx: &RequestContext<'_>) -> bool {
    let Some(tool) = ctx.tool_name() else {
        return false;
    };
    let listing = ctx.without_arguments();
    let denies = |c: &RequestContext<'_>| matches!(gate(set, c).decision, Decision::Deny { .. });
    denies(&listing)
        || agentplane_core::governed_as(tool).is_some_and(|alias| denies(&listing.tool(alias)))
}

/// Decides a request. Deny wins over everything, then approval, then allow.
pub fn evaluate<'p>(set: &'p PolicySet, ctx: &RequestContext<'_>) -> Decision<'p> {
    gate(set, ctx).decision
}

/// The rate limits that count this request, with their policy names.
pub fn rate_limits<'p>(
    set: &'p PolicySet,
    ctx: &RequestContext<'_>,
) -> Vec<(&'p str, &'p RateLimit)> {
    of_kind(set, ctx, |rule| match rule {
        Rule::RateLimit(r) => Some(r),
        _ => None,
    })
}

/// The rules of one kind among the policies that apply, with their policy names.
fn of_kind<'p, T>(
    set: &'p PolicySet,
    ctx: &RequestContext<'_>,
    pick: impl Fn(&'p Rule) -> Option<&'p T>,
) -> Vec<(&'p str, &'p T)> {
    applicable(set, ctx)
        .filter_map(|p| Some((p.name(), pick(p.rule())?)))
        .collect()
}

/// The budgets this request spends from, with their policy names.
pub fn budgets<'p>(set: &'p PolicySet, ctx: &RequestContext<'_>) -> Vec<(&'p str, &'p Budget)> {
    of_kind(set, ctx, |rule| match rule {
        Rule::Budget(b) => Some(b),
        _ => None,
    })
}

/// The time windows that apply, with their policy names (for showing when a request
/// would next be allowed).
pub fn time_windows<'p>(
    set: &'p PolicySet,
    ctx: &RequestContext<'_>,
) -> Vec<(&'p str, &'p TimeWindow)> {
    of_kind(set, ctx, |rule| match rule {
        Rule::TimeWindow(w) => Some(w),
        _ => None,
    })
}

/// The data scopes granted to this request, with their policy names.
pub fn data_scopes<'p>(
    set: &'p PolicySet,
    ctx: &RequestContext<'_>,
) -> Vec<(&'p str, &'p DataScope)> {
    of_kind(set, ctx, |rule| match rule {
        Rule::DataScope(d) => Some(d),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use agentplane_core::policy::PolicySource;

    use super::*;

    fn set(text: &str) -> PolicySet {
        PolicySet::parse(&[PolicySource {
            name: "t.yaml",
            text,
        }])
        .expect("valid")
    }

    const NOON: &str = "2026-11-25T12:00:00Z"; // a Wednesday

    fn ctx<'a>(tags: &'a [String], tool: Option<&'a str>, at: &str) -> RequestContext<'a> {
        RequestContext::new("support", tags, "alice")
            .tool(tool)
            .at(at.parse().expect("instant"))
    }

    fn decide<'p>(set: &'p PolicySet, tool: &str) -> Decision<'p> {
        evaluate(set, &ctx(&[], Some(tool), NOON))
    }

    #[test]
    fn the_stricter_of_two_gates_wins() {
        let set = set(
            "name: ask\ntype: approval_required\nrules: {tools: [write_file]}\n---\n\
             name: no-shell\ntype: tool_access\nrules: {deny: [run_command]}\n",
        );
        let of = |tool| gate(&set, &ctx(&[], Some(tool), NOON));
        assert_eq!(
            of("edit_file").and(of("write_file")).decision,
            Decision::RequireApproval { policy: "ask" }
        );
        assert!(matches!(
            of("edit_file").and(of("run_command")).decision,
            Decision::Deny {
                policy: "no-shell",
                ..
            }
        ));
        assert!(matches!(
            of("write_file").and(of("run_command")).decision,
            Decision::Deny { .. }
        ));
        assert_eq!(
            of("edit_file").and(of("read_file")).decision,
            Decision::Allow
        );
    }

    #[test]
    fn the_gate_agrees_with_evaluate_and_rate_limits() {
        let s = set(
            "- name: r\n  type: rate_limit\n  targets: {tools: [shell]}\n  rules: {window: 1m, max: 3}\n\
             - name: a\n  type: approval_required\n  rules: {tools: [shell]}\n\
             - name: d\n  type: tool_access\n  rules: {deny: [rm]}\n",
        );
        for tool in ["shell", "rm", "read_file"] {
            let ctx = ctx(&[], Some(tool), NOON);
            let gate = gate(&s, &ctx);
            assert_eq!(gate.decision, evaluate(&s, &ctx));
            let expected = match gate.decision {
                Decision::Deny { .. } => Vec::new(),
                _ => rate_limits(&s, &ctx),
            };
            assert_eq!(gate.rate_limits, expected, "{tool}");
        }
    }

    #[test]
    fn no_policies_allow_everything() {
        assert_eq!(decide(&PolicySet::default(), "shell"), Decision::Allow);
    }

    #[test]
    fn tool_access_denies_by_deny_list_and_by_absence_from_allow_list() {
        let s = set(
            "name: t\ntype: tool_access\nrules: {allow: ['mcp__github__*', read_file], deny: [mcp__github__delete_repo]}\n",
        );
        assert_eq!(decide(&s, "mcp__github__create_issue"), Decision::Allow);
        assert_eq!(decide(&s, "read_file"), Decision::Allow);
        assert!(
            matches!(decide(&s, "mcp__github__delete_repo"), Decision::Deny { policy: "t", reason } if reason.contains("denied"))
        );
        assert!(
            matches!(decide(&s, "shell"), Decision::Deny { reason, .. } if reason.contains("allow list"))
        );
        // A turn-level check names no tool: tool_access has nothing to refuse.
        assert_eq!(evaluate(&s, &ctx(&[], None, NOON)), Decision::Allow);
    }

    #[test]
    fn approval_required_applies_to_its_tools_only() {
        let s = set("name: mail\ntype: approval_required\nrules: {tools: [send_email]}\n");
        assert_eq!(
            decide(&s, "send_email"),
            Decision::RequireApproval { policy: "mail" }
        );
        assert_eq!(decide(&s, "read_file"), Decision::Allow);
        assert_eq!(evaluate(&s, &ctx(&[], None, NOON)), Decision::Allow);
        let all = set("name: all\ntype: approval_required\ntargets: {agents: [support]}\n");
        assert_eq!(
            decide(&all, "anything"),
            Decision::RequireApproval { policy: "all" }
        );
    }

    #[test]
    fn deny_wins_over_approval_and_the_first_policy_is_reported() {
        let s = set(
            "- name: mail\n  type: approval_required\n- name: deny-a\n  type: tool_access\n  rules: {deny: [send_email]}\n- name: deny-b\n  type: tool_access\n  rules: {deny: ['send_*']}\n",
        );
        assert!(matches!(
            decide(&s, "send_email"),
            Decision::Deny {
                policy: "deny-a",
                ..
            }
        ));
        assert_eq!(
            decide(&s, "read_file"),
            Decision::RequireApproval { policy: "mail" }
        );
    }

    #[test]
    fn targets_select_by_agent_tag_tool_and_client() {
        let s = set(
            "name: t\ntype: tool_access\ntargets: {agents: ['supp*'], tags: [customer-facing], tools: [shell], clients: [alice]}\nrules: {deny: ['*']}\n",
        );
        let tags = vec!["internal".to_owned(), "customer-facing".to_owned()];
        let hit = ctx(&tags, Some("shell"), NOON);
        assert!(matches!(evaluate(&s, &hit), Decision::Deny { .. }));
        assert_eq!(evaluate(&s, &hit.agent("ops", &tags)), Decision::Allow);
        assert_eq!(evaluate(&s, &hit.client("bob")), Decision::Allow);
        assert_eq!(evaluate(&s, &hit.tool("read_file")), Decision::Allow);
        assert_eq!(evaluate(&s, &hit.agent("support", &[])), Decision::Allow);
    }

    #[test]
    fn a_time_window_denies_outside_its_hours_across_daylight_saving() {
        let s = set(
            "name: office\ntype: time_window\nrules: {timezone: Europe/Berlin, days: [mon, tue, wed, thu, fri, sat, sun], hours: '09:00-17:00'}\n",
        );
        let at = |t: &str| evaluate(&s, &ctx(&[], Some("x"), t));
        // Spring forward, Sunday 2026-03-29: 09:00 local is 08:00Z before, 07:00Z on the day.
        assert!(matches!(
            at("2026-03-28T07:30:00Z"),
            Decision::Deny {
                policy: "office",
                ..
            }
        ));
        assert_eq!(at("2026-03-29T07:30:00Z"), Decision::Allow);
        // Fall back, Sunday 2026-10-25: 09:00 local is 07:00Z before, 08:00Z on the day.
        assert_eq!(at("2026-10-24T07:30:00Z"), Decision::Allow);
        assert!(
            matches!(at("2026-10-25T07:30:00Z"), Decision::Deny { reason, .. } if reason.contains("Europe/Berlin"))
        );
        assert_eq!(at("2026-10-25T15:30:00Z"), Decision::Allow);
        assert!(matches!(at("2026-10-25T16:00:00Z"), Decision::Deny { .. }));
    }

    #[test]
    fn a_time_window_also_governs_turn_level_checks() {
        let s = set(
            "name: weekdays\ntype: time_window\nrules: {timezone: UTC, days: [mon, tue, wed, thu, fri]}\n",
        );
        assert_eq!(evaluate(&s, &ctx(&[], None, NOON)), Decision::Allow);
        assert!(matches!(
            evaluate(&s, &ctx(&[], None, "2026-11-28T12:00:00Z")),
            Decision::Deny { .. }
        ));
    }

    #[test]
    fn stateful_rules_are_listed_for_the_parts_that_enforce_them() {
        let s = set(
            "- name: rl\n  type: rate_limit\n  targets: {tools: ['mcp__*']}\n  rules: {window: 1m, max: 5}\n- name: money\n  type: budget\n  rules: {usd: 10, period: day}\n- name: other-agent\n  type: budget\n  targets: {agents: [ops]}\n  rules: {usd: 1, period: day}\n- name: scope\n  type: data_scope\n  rules: {secrets: [GITHUB_TOKEN]}\n- name: tw\n  type: time_window\n  rules: {timezone: UTC}\n",
        );
        let c = ctx(&[], Some("mcp__github__x"), NOON);
        assert_eq!(
            evaluate(&s, &c),
            Decision::Allow,
            "rate limits and budgets do not decide here"
        );
        let names = |v: Vec<&str>| v.join(",");
        assert_eq!(
            names(rate_limits(&s, &c).into_iter().map(|(n, _)| n).collect()),
            "rl"
        );
        assert_eq!(
            names(budgets(&s, &c).into_iter().map(|(n, _)| n).collect()),
            "money"
        );
        assert_eq!(
            names(data_scopes(&s, &c).into_iter().map(|(n, _)| n).collect()),
            "scope"
        );
        assert_eq!(
            names(time_windows(&s, &c).into_iter().map(|(n, _)| n).collect()),
            "tw"
        );
        let turn = ctx(&[], None, NOON);
        assert!(
            rate_limits(&s, &turn).is_empty(),
            "tool-targeted limits skip turn checks"
        );
        assert_eq!(rate_limits(&s, &c)[0].1.max, 5);
    }
}

#[cfg(test)]
mod index_tests {
    use agentplane_core::policy::{PolicySource, Truth};

    use super::*;

    /// The index only saves work: over a mixed set, the policies the gate reports
    /// as matched are exactly those that select the request when every policy is
    /// asked.
    #[test]
    fn the_index_finds_every_policy_that_selects_a_request() {
        let mut text = String::new();
        for i in 0..600 {
            let targets = match i % 7 {
                0 => format!("{{agents: [agent-{}]}}", i % 9),
                1 => format!("{{tags: [tag-{}]}}", i % 5),
                2 => format!("{{tools: ['mcp__s{}__*']}}", i % 4),
                3 => format!("{{clients: [client-{}]}}", i % 6),
                4 => format!("{{agents: ['agent-{}*'], tags: [tag-{}]}}", i % 3, i % 5),
                5 => format!("{{tools: ['*_{}', read_file]}}", i % 3),
                _ => "{}".to_owned(),
            };
            let when = if i % 4 == 0 {
                format!("  when: {{arg: /n, gte: {}}}\n", i % 10)
            } else {
                String::new()
            };
            text.push_str(&format!(
                "- name: p{i}\n  type: rate_limit\n  targets: {targets}\n{when}  rules: {{window: 1m, max: 5}}\n"
            ));
        }
        let set = PolicySet::parse(&[PolicySource {
            name: "many.yaml",
            text: &text,
        }])
        .expect("valid");
        let tags: Vec<Vec<String>> = (0..5)
            .map(|t| vec![format!("tag-{t}"), "other".into()])
            .collect();
        let tools = [
            None,
            Some("read_file"),
            Some("mcp__s1__get"),
            Some("x_2"),
            Some("mcp__s"),
        ];
        for agent in 0..12 {
            for client in 0..7 {
                for tool in tools {
                    for n in [0, 5, 9] {
                        let args = serde_json::json!({ "n": n });
                        let name = format!("agent-{agent}");
                        let client = format!("client-{client}");
                        let ctx = RequestContext::new(&name, &tags[agent % 5], &client)
                            .tool(tool)
                            .arguments(&args);
                        let every: Vec<&str> = set
                            .policies()
                            .iter()
                            .filter(|p| p.selects(&ctx) == Truth::Yes)
                            .map(|p| p.name())
                            .collect();
                        assert_eq!(gate(&set, &ctx).matched, every, "{name} {client} {tool:?}");
                    }
                }
            }
        }
    }
}
