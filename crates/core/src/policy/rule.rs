//! One policy ([`Policy`]): its name, targets, condition and mode, and its kind's
//! [`Rule`]; the list of kinds ([`PolicyKind`]) and the name a policy may have. Built
//! by `check.rs`, held by the set in `mod.rs`.

use serde::de::{Deserialize, Deserializer};

use super::approval::ApprovalRequired;
use super::budget::Budget;
use super::condition::{Condition, Truth};
use super::content::ContentRule;
use super::data_scope::DataScope;
use super::glob::Glob;
use super::rate_limit::RateLimit;
use super::request::RequestContext;
use super::scalar::parse_str;
use super::targets::Targets;
use super::time_window::TimeWindow;
use super::tool_access::ToolAccess;

/// Defines [`PolicyKind`], its file names and [`PolicyKind::ALL`] from one list, so a
/// kind cannot be added without its name and its place in `ALL` (every list of kinds
/// elsewhere — metrics labels, the policies route, `policy check` — is `ALL` or an
/// exhaustive `match`).
macro_rules! policy_kinds {
    ($($(#[doc = $doc:literal])* $kind:ident => $name:literal,)+) => {
        /// The kinds of policy.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum PolicyKind {
            $($(#[doc = $doc])* $kind,)+
        }

        impl PolicyKind {
            /// Every kind, in the order of the format's documentation.
            pub const ALL: &'static [PolicyKind] = &[$(PolicyKind::$kind,)+];

            /// The name used in files (`rate_limit`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(PolicyKind::$kind => $name,)+
                }
            }

            /// Whether its policies decide a request (deny it or send it for approval), so
            /// `mode: audit` can rehearse them; the others count or grant.
            pub fn decides(self) -> bool {
                matches!(
                    self,
                    PolicyKind::ApprovalRequired | PolicyKind::TimeWindow | PolicyKind::ToolAccess
                )
            }

            /// The kind a file name (`rate_limit`) names, if any.
            pub fn parse(name: &str) -> Option<PolicyKind> {
                match name {
                    $($name => Some(PolicyKind::$kind),)+
                    _ => None,
                }
            }
        }
    };
}

policy_kinds! {
    /// A matching tool call waits for a person's decision.
    ApprovalRequired => "approval_required",
    /// At most N matching requests per sliding window.
    RateLimit => "rate_limit",
    /// Matching requests only on some local days and hours.
    TimeWindow => "time_window",
    /// A USD cap per period.
    Budget => "budget",
    /// Allow and deny lists of tools.
    ToolAccess => "tool_access",
    /// The paths, hosts and secrets an agent may reach.
    DataScope => "data_scope",
    /// Detectors of sensitive content on chosen surfaces: redact, deny or flag.
    Content => "content",
}

/// A policy's rule: what it demands of the requests its targets select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A matching tool call waits for a person's decision.
    ApprovalRequired(ApprovalRequired),
    /// At most N matching requests per sliding window.
    RateLimit(RateLimit),
    /// Matching requests only on some local days and hours.
    TimeWindow(TimeWindow),
    /// A USD cap per period.
    Budget(Budget),
    /// Allow and deny lists of tools.
    ToolAccess(ToolAccess),
    /// The paths, hosts and secrets an agent may reach.
    DataScope(DataScope),
    /// Detectors of sensitive content on chosen surfaces.
    Content(ContentRule),
}

/// Whether a policy's decisions are carried out or only recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Its decisions are carried out (the default).
    #[default]
    Enforce,
    /// Evaluated on every request, its would-be decision recorded (`policy_audited`
    /// events, a metric), never carried out: a rehearsal before enforcing it.
    Audit,
}

impl Mode {
    /// The name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// One validated policy. Its name is unique within a `PolicySet`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) targets: Targets,
    pub(super) when: Option<Condition>,
    pub(super) mode: Mode,
    pub(super) rule: Rule,
    pub(super) source: String,
}

impl Policy {
    /// Every tool pattern in the one form (`glob::canonical_tool`): targets, tool
    /// access lists, the tools needing approval.
    pub(super) fn tools_in_one_form(&mut self) {
        use super::glob::tools_in_one_form;
        if let Some(tools) = &mut self.targets.tools {
            tools_in_one_form(tools);
        }
        match &mut self.rule {
            Rule::ToolAccess(access) => {
                tools_in_one_form(&mut access.deny);
                if let Some(allow) = &mut access.allow {
                    tools_in_one_form(allow);
                }
            }
            Rule::ApprovalRequired(approval) => {
                if let Some(tools) = &mut approval.tools {
                    tools_in_one_form(tools);
                }
            }
            _ => {}
        }
    }

    /// The unique name (`[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The operator's note, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// What the policy applies to.
    pub fn targets(&self) -> &Targets {
        &self.targets
    }
    /// The condition on arguments and context beyond the targets, if any.
    pub fn when(&self) -> Option<&Condition> {
        self.when.as_ref()
    }
    /// Whether its decisions are carried out or only recorded.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// Whether its targets and condition select this request: `Yes`, `No`, or
    /// `Unknown` when the condition reads arguments the request does not carry (then
    /// the policy does not apply; it decides when the call's arguments are known).
    pub fn selects(&self, ctx: &RequestContext<'_>) -> Truth {
        if !self
            .targets
            .matches(ctx.agent, ctx.tags, ctx.tool, ctx.client)
        {
            return Truth::No;
        }
        match &self.when {
            Some(condition) => condition.eval(ctx),
            None => Truth::Yes,
        }
    }
    /// What it demands.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }
    /// The kind, derived from the rule.
    pub fn kind(&self) -> PolicyKind {
        match self.rule {
            Rule::ApprovalRequired(_) => PolicyKind::ApprovalRequired,
            Rule::RateLimit(_) => PolicyKind::RateLimit,
            Rule::TimeWindow(_) => PolicyKind::TimeWindow,
            Rule::Budget(_) => PolicyKind::Budget,
            Rule::ToolAccess(_) => PolicyKind::ToolAccess,
            Rule::DataScope(_) => PolicyKind::DataScope,
            Rule::Content(_) => PolicyKind::Content,
        }
    }
    /// The source (file) name it was parsed from, for listings and errors.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// One line for listings: kind, targets and the rule's gist.
    pub fn summary(&self) -> String {
        let gist = match &self.rule {
            Rule::ApprovalRequired(a) => match &a.tools {
                Some(tools) => format!("tools {}", names(tools)),
                None => "every selected call".into(),
            },
            Rule::RateLimit(r) => format!("max {} per {}s", r.max, r.window.as_secs()),
            Rule::TimeWindow(w) => w.summary(),
            Rule::Budget(b) => format!(
                "USD {}.{:06} per {:?}",
                b.usd_micros / 1_000_000,
                b.usd_micros % 1_000_000,
                b.period
            )
            .to_lowercase(),
            Rule::ToolAccess(t) => {
                let allow = t.allow.as_deref().map(names).unwrap_or_else(|| "*".into());
                format!("allow {allow} deny {}", names(&t.deny))
            }
            Rule::DataScope(d) => format!(
                "paths {} hosts {} secrets {}",
                d.paths.len(),
                d.hosts.len(),
                d.secrets.len()
            ),
            Rule::Content(c) => format!(
                "{} {} on {}",
                c.action.as_str(),
                c.names.join(","),
                c.surfaces
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let mut line = format!(
            "{}: {} [{}] {}",
            self.name,
            self.kind().as_str(),
            self.targets.summary(),
            gist
        );
        if self.when.is_some() {
            line.push_str(" when …");
        }
        if self.mode == Mode::Audit {
            line.push_str(" (audit)");
        }
        line
    }
}

fn names(globs: &[Glob]) -> String {
    let v: Vec<&str> = globs.iter().map(Glob::as_str).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// A policy name as written; validated on parse.
pub(super) struct PolicyName(pub(super) String);

impl<'de> Deserialize<'de> for PolicyName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parse_str(deserializer, PolicyName::parse)
    }
}

impl PolicyName {
    fn parse(name: &str) -> Result<Self, String> {
        let ok = name.len() <= 128
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(format!(
                "`{}` is not a policy name (letters, digits, `_`, `-`, `.`; at most 128)",
                name.escape_debug()
            ))
        }
    }
}
