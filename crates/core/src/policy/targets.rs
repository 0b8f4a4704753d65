//! What a policy applies to: agents, agent tags, tools and clients. Each list is
//! optional and an absent list means "all"; a present list must match. Nothing here
//! decides; the engine asks `Targets::matches` and then reads the policy's rule.

use serde::Deserialize;

use super::glob::{Glob, any_matches};

/// The selectors of one policy. Every present list must match (AND across lists, OR
/// within one). A policy that names tools applies only to requests that name a tool:
/// a turn-level check (no tool yet) is not a tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    /// Agent names (patterns).
    #[serde(default)]
    pub agents: Option<Vec<Glob>>,
    /// Agent tags (patterns); any one tag of the agent matching is enough.
    #[serde(default)]
    pub tags: Option<Vec<Glob>>,
    /// Tool names (patterns), e.g. `mcp__github__*`.
    #[serde(default)]
    pub tools: Option<Vec<Glob>>,
    /// Client ids (patterns).
    #[serde(default)]
    pub clients: Option<Vec<Glob>>,
}

impl Targets {
    /// Whether a request with these facts is selected.
    pub fn matches(&self, agent: &str, tags: &[String], tool: Option<&str>, client: &str) -> bool {
        if let Some(agents) = &self.agents
            && !any_matches(agents, agent)
        {
            return false;
        }
        if let Some(patterns) = &self.tags
            && !tags.iter().any(|t| any_matches(patterns, t))
        {
            return false;
        }
        if let Some(tools) = &self.tools {
            match tool {
                Some(tool) if any_matches(tools, tool) => {}
                _ => return false,
            }
        }
        if let Some(clients) = &self.clients
            && !any_matches(clients, client)
        {
            return false;
        }
        true
    }

    /// Why a request with these facts is not selected, in words; `None` when it is.
    pub fn mismatch(
        &self,
        agent: &str,
        tags: &[String],
        tool: Option<&str>,
        client: &str,
    ) -> Option<String> {
        let listed = |list: &[Glob]| list.iter().map(Glob::as_str).collect::<Vec<_>>().join(", ");
        if let Some(agents) = &self.agents
            && !any_matches(agents, agent)
        {
            return Some(format!(
                "agent `{agent}` is not among agents [{}]",
                listed(agents)
            ));
        }
        if let Some(patterns) = &self.tags
            && !tags.iter().any(|t| any_matches(patterns, t))
        {
            return Some(format!(
                "no tag of the agent is among tags [{}]",
                listed(patterns)
            ));
        }
        if let Some(tools) = &self.tools {
            match tool {
                Some(tool) if any_matches(tools, tool) => {}
                Some(tool) => {
                    return Some(format!(
                        "tool `{tool}` is not among tools [{}]",
                        listed(tools)
                    ));
                }
                None => return Some("it names tools and this request calls none".into()),
            }
        }
        if let Some(clients) = &self.clients
            && !any_matches(clients, client)
        {
            return Some(format!(
                "client `{client}` is not among clients [{}]",
                listed(clients)
            ));
        }
        None
    }

    /// A short human summary, e.g. `agents=support tools=mcp__github__*`, or `all`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (label, list) in [
            ("agents", &self.agents),
            ("tags", &self.tags),
            ("tools", &self.tools),
            ("clients", &self.clients),
        ] {
            if let Some(list) = list {
                let names: Vec<&str> = list.iter().map(Glob::as_str).collect();
                parts.push(format!("{label}={}", names.join(",")));
            }
        }
        if parts.is_empty() {
            "all".into()
        } else {
            parts.join(" ")
        }
    }
}
