//! Which providers a model call goes to, in which order: the routing rules.
//!
//! Pure data and one lookup: a rule matches an agent's name, one of its tags or the
//! task's size, and gives an ordered chain of provider names (the failover order).
//! The first rule that matches wins; without a match the default chain applies. No
//! health, no I/O here: `health.rs` decides which providers of a chain are skipped.

use agentplane_core::{ChatMessage, Role};

/// How big a task looks, for routing (seed 001 ADR-006: simple tasks to cheaper models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskSize {
    Small,
    Medium,
    Large,
}

/// Up to this many characters of user text, a task is `small`.
pub const SMALL_MAX_CHARS: usize = 2_000;
/// Up to this many characters of user text, a task is `medium`; beyond, `large`.
pub const MEDIUM_MAX_CHARS: usize = 16_000;

impl TaskSize {
    /// The size's name, as written in `[[routing.rules]] size`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Small => "small",
            Self::Medium => "medium",
            Self::Large => "large",
        }
    }

    /// Reads `small`, `medium` or `large`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "small" => Some(Self::Small),
            "medium" => Some(Self::Medium),
            "large" => Some(Self::Large),
            _ => None,
        }
    }

    /// The size of a task of `chars` characters of user text.
    pub fn of_chars(chars: usize) -> Self {
        if chars <= SMALL_MAX_CHARS {
            Self::Small
        } else if chars <= MEDIUM_MAX_CHARS {
            Self::Medium
        } else {
            Self::Large
        }
    }

    /// The size of a conversation, estimated from what users wrote in it: the input
    /// and the past inputs its context carries. Tool results and answers do not count,
    /// so a turn keeps its size (and its providers) from its first step to its last,
    /// also when it resumes after an approval.
    pub fn estimate(messages: &[ChatMessage]) -> Self {
        Self::of_chars(
            messages
                .iter()
                .filter(|m| m.role == Role::User)
                .map(|m| m.content.as_deref().map_or(0, |c| c.chars().count()))
                .sum(),
        )
    }
}

/// What a model call is routed by.
#[derive(Debug, Clone, Copy)]
pub struct RouteKey<'a> {
    /// The agent's name.
    pub agent: &'a str,
    /// The agent's tags.
    pub tags: &'a [String],
    pub size: TaskSize,
    /// Providers the call must use, in failover order, instead of the rules' chain
    /// (a gateway model alias names them); empty: the rules decide.
    pub pinned: &'a [String],
}

/// What one rule selects on: exactly one fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    Agent(String),
    Tag(String),
    Size(TaskSize),
}

/// A routing rule: when it matches, these providers in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRule {
    pub matches: RuleMatch,
    /// Provider names, the failover order; never empty.
    pub providers: Vec<String>,
}

/// The rules and the default chain. Every name in them is a configured provider
/// (the configuration loader checks it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routing {
    /// The chain when no rule matches; never empty once configured.
    pub default: Vec<String>,
    /// Tried in order; the first match wins.
    pub rules: Vec<RouteRule>,
}

impl Routing {
    /// The chain of provider names for `key`.
    pub fn chain<'k>(&'k self, key: &RouteKey<'k>) -> &'k [String] {
        if !key.pinned.is_empty() {
            return key.pinned;
        }
        self.rules
            .iter()
            .find(|rule| match &rule.matches {
                RuleMatch::Agent(agent) => agent == key.agent,
                RuleMatch::Tag(tag) => key.tags.iter().any(|t| t == tag),
                RuleMatch::Size(size) => *size == key.size,
            })
            .map_or(&self.default[..], |rule| &rule.providers[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn first_matching_rule_wins_else_default() {
        let routing = Routing {
            default: names(&["local"]),
            rules: vec![
                RouteRule {
                    matches: RuleMatch::Agent("writer".into()),
                    providers: names(&["cloud"]),
                },
                RouteRule {
                    matches: RuleMatch::Tag("pii".into()),
                    providers: names(&["local"]),
                },
                RouteRule {
                    matches: RuleMatch::Size(TaskSize::Large),
                    providers: names(&["cloud", "local"]),
                },
            ],
        };
        let tags = names(&["pii"]);
        let key = |agent, tags, size| RouteKey {
            agent,
            tags,
            size,
            pinned: &[],
        };
        assert_eq!(
            routing.chain(&key("writer", &tags, TaskSize::Large)),
            ["cloud"]
        );
        assert_eq!(routing.chain(&key("x", &tags, TaskSize::Large)), ["local"]);
        assert_eq!(
            routing.chain(&key("x", &[], TaskSize::Large)),
            ["cloud", "local"]
        );
        assert_eq!(routing.chain(&key("x", &[], TaskSize::Small)), ["local"]);
        let pinned = names(&["cloud"]);
        let key = RouteKey {
            pinned: &pinned,
            ..key("writer", &tags, TaskSize::Small)
        };
        assert_eq!(routing.chain(&key), ["cloud"]);
    }

    #[test]
    fn size_counts_user_text_only() {
        let small = vec![
            ChatMessage::system("s".repeat(50_000)),
            ChatMessage::user("hi"),
        ];
        assert_eq!(TaskSize::estimate(&small), TaskSize::Small);
        let medium = vec![ChatMessage::user("é".repeat(SMALL_MAX_CHARS + 1))];
        assert_eq!(TaskSize::estimate(&medium), TaskSize::Medium);
        let large = vec![
            ChatMessage::user("a".repeat(MEDIUM_MAX_CHARS)),
            ChatMessage::tool_result("c", "b".repeat(100_000)),
            ChatMessage::user("a"),
        ];
        assert_eq!(TaskSize::estimate(&large), TaskSize::Large);
        assert_eq!(TaskSize::parse("medium"), Some(TaskSize::Medium));
        assert_eq!(TaskSize::parse("huge"), None);
        assert_eq!(TaskSize::Large.as_str(), "large");
    }
}
