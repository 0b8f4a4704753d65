//! A policy's `rules` as written: every field of every kind in one deserialized shape
//! (`check.rs` has already refused the fields that do not belong to the kind), and the
//! checks between fields that turn it into the kind's [`Rule`].

use super::budget::UsdMicros;
use super::content::DetectorSpec;
use super::rate_limit::{MaxCount, Window};
use super::{
    ApprovalRequired, Budget, BudgetKey, BudgetPeriod, ContentAction, ContentRule, CountKey,
    DataScope, Day, Glob, HourRange, PolicyKind, RateLimit, Rule, Surface, TimeWindow, ToolAccess,
    Zone,
};

/// Every rule field of every kind; `into_policy` checks which belong to the kind.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRules {
    #[serde(default, alias = "require_approval_for")]
    tools: Option<Vec<Glob>>,
    #[serde(default)]
    approvers: Option<Vec<String>>,
    #[serde(default)]
    separate_approver: Option<bool>,
    #[serde(default)]
    window: Option<Window>,
    #[serde(default)]
    max: Option<MaxCount>,
    #[serde(default)]
    per: Option<Vec<CountKey>>,
    #[serde(default)]
    timezone: Option<Zone>,
    #[serde(default)]
    days: Option<Vec<Day>>,
    #[serde(default)]
    hours: Option<HourRange>,
    #[serde(default)]
    usd: Option<UsdMicros>,
    #[serde(default)]
    period: Option<BudgetPeriod>,
    #[serde(default)]
    allow: Option<Vec<Glob>>,
    #[serde(default)]
    deny: Option<Vec<Glob>>,
    #[serde(default)]
    paths: Option<Vec<Glob>>,
    #[serde(default)]
    hosts: Option<Vec<Glob>>,
    #[serde(default)]
    secrets: Option<Vec<Glob>>,
    #[serde(default)]
    detectors: Option<Vec<DetectorSpec>>,
    #[serde(default)]
    surfaces: Option<Vec<Surface>>,
    #[serde(default)]
    action: Option<ContentAction>,
}

/// A problem between rule fields: the field it is about (`None`: the rules as a
/// whole) and what is wrong.
type RuleProblem = (Option<&'static str>, String);

fn required<T>(value: Option<T>, field: &'static str, kind: PolicyKind) -> Result<T, RuleProblem> {
    value.ok_or_else(|| {
        (
            Some(field),
            format!("required for {} policies", kind.as_str()),
        )
    })
}

impl RawRules {
    /// The rule of a policy of `kind` from fields that each passed their own check
    /// (and belong to `kind`: `check.rs` refused the others); the checks between
    /// fields, every problem found.
    pub(crate) fn into_rule(self, kind: PolicyKind) -> Result<Rule, Vec<RuleProblem>> {
        let r = self;
        let rule = match kind {
            PolicyKind::ApprovalRequired => Rule::ApprovalRequired(ApprovalRequired {
                tools: r.tools,
                approvers: r.approvers.unwrap_or_default(),
                separate_approver: r.separate_approver.unwrap_or(false),
            }),
            PolicyKind::RateLimit => {
                let window = required(r.window, "window", kind);
                let max = required(r.max, "max", kind);
                match (window, max) {
                    (Ok(window), Ok(max)) => Rule::RateLimit(RateLimit {
                        window: window.0,
                        max: max.0,
                        per: r.per.unwrap_or_default(),
                    }),
                    (window, max) => {
                        return Err([window.err(), max.err()].into_iter().flatten().collect());
                    }
                }
            }
            PolicyKind::TimeWindow => {
                let timezone = required(r.timezone, "timezone", kind);
                let days = match r.days {
                    Some(days) if days.is_empty() => {
                        Err((Some("days"), "must name at least one day".to_owned()))
                    }
                    Some(days) => Ok(days),
                    None => Ok(Day::ALL.to_vec()),
                };
                match (timezone, days) {
                    (Ok(timezone), Ok(days)) => Rule::TimeWindow(TimeWindow {
                        timezone,
                        days,
                        hours: r.hours.unwrap_or(HourRange::ALL_DAY),
                    }),
                    (timezone, days) => {
                        return Err([timezone.err(), days.err()].into_iter().flatten().collect());
                    }
                }
            }
            PolicyKind::Budget => {
                let usd = required(r.usd, "usd", kind);
                let period = required(r.period, "period", kind);
                let per = r
                    .per
                    .unwrap_or_default()
                    .into_iter()
                    .map(|k| match k {
                        CountKey::Agent => Ok(BudgetKey::Agent),
                        CountKey::Client => Ok(BudgetKey::Client),
                        CountKey::Tool => Err((
                            Some("per"),
                            "budgets are per agent or client, not tool".to_owned(),
                        )),
                    })
                    .collect::<Result<_, _>>();
                match (usd, period, per) {
                    (Ok(usd), Ok(period), Ok(per)) => Rule::Budget(Budget {
                        usd_micros: usd.0,
                        period,
                        timezone: r.timezone.unwrap_or_else(Zone::utc),
                        per,
                    }),
                    (usd, period, per) => {
                        return Err([usd.err(), period.err(), per.err()]
                            .into_iter()
                            .flatten()
                            .collect());
                    }
                }
            }
            PolicyKind::ToolAccess => {
                if r.allow.is_none() && r.deny.is_none() {
                    return Err(vec![(
                        None,
                        "a tool_access policy needs `allow` or `deny`".into(),
                    )]);
                }
                Rule::ToolAccess(ToolAccess {
                    allow: r.allow,
                    deny: r.deny.unwrap_or_default(),
                })
            }
            PolicyKind::DataScope => Rule::DataScope(DataScope {
                paths: r.paths.unwrap_or_default(),
                hosts: r.hosts.unwrap_or_default(),
                secrets: r.secrets.unwrap_or_default(),
            }),
            PolicyKind::Content => {
                let detectors = match r.detectors {
                    Some(d) if d.is_empty() => {
                        Err((Some("detectors"), "name at least one detector".to_owned()))
                    }
                    other => required(other, "detectors", kind),
                };
                let action = required(r.action, "action", kind);
                let surfaces = match r.surfaces {
                    Some(s) if s.is_empty() => {
                        Err((Some("surfaces"), "name at least one surface".to_owned()))
                    }
                    Some(s) => Ok(s),
                    None => Ok(Surface::ALL.to_vec()),
                };
                match (detectors, action, surfaces) {
                    (Ok(detectors), Ok(action), Ok(surfaces)) => {
                        let detectors: Vec<_> = detectors.into_iter().map(|d| d.0).collect();
                        let names = detectors.iter().map(|d| d.name().to_owned()).collect();
                        Rule::Content(ContentRule {
                            detectors: crate::content::Detectors::new(detectors),
                            names,
                            surfaces,
                            action,
                        })
                    }
                    (d, a, s) => {
                        return Err([d.err(), a.err(), s.err()].into_iter().flatten().collect());
                    }
                }
            }
        };
        Ok(rule)
    }
}
