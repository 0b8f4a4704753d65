//! `tool_access`: allow and deny lists of tool names. Deny beats allow; with an allow
//! list present, a tool not on it is denied.

use super::glob::{Glob, any_matches};

/// Allow/deny lists; at least one is present (validated at parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAccess {
    /// When present, only these tools may be called.
    pub allow: Option<Vec<Glob>>,
    /// These tools may never be called.
    pub deny: Vec<Glob>,
}

impl ToolAccess {
    /// Why `tool` is refused, or `None` when it is allowed.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        if let Some(hit) = self.deny.iter().find(|g| g.matches(tool)) {
            return Some(format!("tool `{tool}` is denied (`{}`)", hit.as_str()));
        }
        match &self.allow {
            Some(allow) if !any_matches(allow, tool) => {
                Some(format!("tool `{tool}` is not on the allow list"))
            }
            _ => None,
        }
    }
}
