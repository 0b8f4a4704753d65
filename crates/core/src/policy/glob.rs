//! Name patterns: a tool, agent, tag or client name with `*` wildcards
//! (`mcp__github__*`). Only `*` is special; there are no classes, no escapes and no
//! paths, so a pattern means the same to an operator reading it and to the matcher.

use serde::{Deserialize, Deserializer};

/// The longest pattern accepted; names are short and a long pattern is a mistake.
const MAX_PATTERN_LEN: usize = 256;

/// A validated name pattern: non-empty, printable, no whitespace, `*` matches any run
/// of characters (also none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    /// Checks a pattern; the message says what is wrong with it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("a name pattern must not be empty".into());
        }
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(format!("a name pattern is at most {MAX_PATTERN_LEN} bytes"));
        }
        if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "`{}` contains whitespace or control characters",
                pattern.escape_debug()
            ));
        }
        Ok(Self(pattern.to_owned()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches. Linear in practice: the classic greedy wildcard match
    /// with one backtrack point, O(pattern × name) at worst, never exponential.
    pub fn matches(&self, name: &str) -> bool {
        let (p, n) = (self.0.as_bytes(), name.as_bytes());
        let (mut pi, mut ni) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, ni));
                pi += 1;
            } else if pi < p.len() && p[pi] == n[ni] {
                pi += 1;
                ni += 1;
            } else if let Some((sp, sn)) = star {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&b| b == b'*')
    }
}

/// The one name of an MCP server's tool. The MCP gateway lists it as `SERVER__TOOL`;
/// agents, records and policies know it as `mcp__SERVER__TOOL`. A name or pattern in
/// the listed form (`__` after a plain server name, not beginning `mcp__` or `a2a__`,
/// the names of remote A2A agents' tools) is taken as the other, so a policy, an
/// explanation or a test may use either. Built-in tool names and server names never
/// hold `__`, and no server is named `mcp` or `a2a`, so nothing else is rewritten.
pub fn canonical_tool(name: &str) -> std::borrow::Cow<'_, str> {
    if name.starts_with("mcp__") || name.starts_with("a2a__") {
        return std::borrow::Cow::Borrowed(name);
    }
    match name.split_once("__") {
        Some((server, _)) if !server.is_empty() && !server.contains('*') => {
            std::borrow::Cow::Owned(format!("mcp__{name}"))
        }
        _ => std::borrow::Cow::Borrowed(name),
    }
}

impl Glob {
    /// The pattern as a tool pattern: in the `mcp__` form when written as listed.
    pub(crate) fn into_tool(self) -> Self {
        match canonical_tool(&self.0) {
            std::borrow::Cow::Owned(name) => Self(name),
            std::borrow::Cow::Borrowed(_) => self,
        }
    }
}

/// Tool patterns in the one form (`canonical_tool`).
pub(crate) fn tools_in_one_form(patterns: &mut Vec<Glob>) {
    *patterns = std::mem::take(patterns)
        .into_iter()
        .map(Glob::into_tool)
        .collect();
}

/// Whether any pattern of a list matches `name`.
pub fn any_matches(patterns: &[Glob], name: &str) -> bool {
    patterns.iter().any(|g| g.matches(name))
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::scalar::parse_str(deserializer, Glob::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_listed_tool_names_are_the_mcp_form() {
        assert_eq!(
            canonical_tool("everything__get-env"),
            "mcp__everything__get-env"
        );
        assert_eq!(canonical_tool("everything__*"), "mcp__everything__*");
        assert_eq!(
            canonical_tool("mcp__everything__echo"),
            "mcp__everything__echo"
        );
        for kept in [
            "read_file",
            "*__echo",
            "__x",
            "shell",
            "*",
            "a2a__peer",
            "a2a__*",
        ] {
            assert_eq!(canonical_tool(kept), kept);
        }
    }

    fn g(p: &str) -> Glob {
        Glob::new(p).unwrap()
    }

    #[test]
    fn exact_names_match_only_themselves() {
        assert!(g("send_email").matches("send_email"));
        assert!(!g("send_email").matches("send_emails"));
        assert!(!g("send_email").matches("send_emai"));
    }

    #[test]
    fn star_matches_any_run_including_none() {
        let p = g("mcp__github__*");
        assert!(p.matches("mcp__github__create_issue"));
        assert!(p.matches("mcp__github__"));
        assert!(!p.matches("mcp__gitlab__create_issue"));
        assert!(g("*").matches(""));
        assert!(g("*_email").matches("send_email"));
        assert!(g("a*b*c").matches("axxbyyc"));
        assert!(!g("a*b*c").matches("axxbyy"));
        assert!(g("**").matches("anything"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Glob::new("").is_err());
        assert!(Glob::new("a b").is_err());
        assert!(Glob::new("a\u{0}").is_err());
        assert!(Glob::new(&"x".repeat(300)).is_err());
    }

    #[test]
    fn many_stars_against_a_long_name_stay_fast() {
        let p = g(&"*a".repeat(100));
        let name = "a".repeat(99) + "b";
        let started = std::time::Instant::now();
        assert!(!p.matches(&name.repeat(10)));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
