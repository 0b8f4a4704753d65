//! Label values that cannot grow without bound.
//!
//! Every distinct label value is a time series kept forever by this process and by
//! every Prometheus that scrapes it. Agent, provider and policy names come from
//! configuration, but tool names come from models (an unknown tool a model invents is
//! still reported), and a route or method comes from whoever sends a request. So each
//! kind of value passes a [`LabelCap`]: a value that is too long, has characters a
//! name never has, or arrives after the cap is full becomes [`OTHER`].

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;

/// The value every refused label value folds into.
pub const OTHER: &str = "other";
/// The longest label value kept as it is, in bytes.
pub const MAX_LABEL_LEN: usize = 64;
/// How many distinct values one kind of label may take before new ones fold.
pub const MAX_DISTINCT_VALUES: usize = 500;

/// The distinct values one kind of label has taken so far.
///
/// Invariant: at most `max_distinct` values besides [`OTHER`] are ever returned, so
/// the series of one metric are bounded by the product of its labels' caps.
#[derive(Debug)]
pub(crate) struct LabelCap {
    max_len: usize,
    max_distinct: usize,
    seen: Mutex<HashSet<String>>,
}

impl LabelCap {
    pub(crate) fn new(max_len: usize, max_distinct: usize) -> Self {
        Self {
            max_len,
            max_distinct,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The value to record for `raw`: itself while it is acceptable and the cap has
    /// room (or already holds it), [`OTHER`] otherwise.
    pub(crate) fn admit(&self, raw: &str) -> String {
        if raw.is_empty() || raw.len() > self.max_len || !raw.chars().all(plain) {
            return OTHER.to_owned();
        }
        // A poisoned lock only means another thread panicked while inserting a
        // string; the set is still a valid set.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(raw) {
            return raw.to_owned();
        }
        if seen.len() >= self.max_distinct {
            return OTHER.to_owned();
        }
        seen.insert(raw.to_owned());
        raw.to_owned()
    }
}

impl Default for LabelCap {
    fn default() -> Self {
        Self::new(MAX_LABEL_LEN, MAX_DISTINCT_VALUES)
    }
}

/// Printable ASCII without the characters the exposition format escapes: names of
/// agents, tools, policies and route templates never need more.
fn plain(c: char) -> bool {
    c.is_ascii_graphic() && c != '"' && c != '\\'
}

/// The label sets of the families: each value in them passed a [`LabelCap`] or is one
/// of a fixed few.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AgentLabel {
    pub(crate) agent: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AgentStatusLabels {
    pub(crate) agent: String,
    pub(crate) status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AgentProviderLabels {
    pub(crate) agent: String,
    pub(crate) provider: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct PolicyAgentLabels {
    pub(crate) policy: String,
    pub(crate) agent: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct PolicyWouldLabels {
    pub(crate) policy: String,
    pub(crate) agent: String,
    pub(crate) would: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AgentDecisionLabels {
    pub(crate) agent: String,
    pub(crate) decision: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ContentLabels {
    pub(crate) policy: String,
    pub(crate) surface: String,
    pub(crate) detector: String,
    pub(crate) action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct PolicyAgentKindLabels {
    pub(crate) policy: String,
    pub(crate) agent: String,
    pub(crate) kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ToolLabel {
    pub(crate) tool: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ToolStatusLabels {
    pub(crate) tool: String,
    pub(crate) status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct RouteLabels {
    pub(crate) method: &'static str,
    pub(crate) route: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct RouteStatusLabels {
    pub(crate) method: &'static str,
    pub(crate) route: String,
    pub(crate) status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct StoreOpLabel {
    pub(crate) op: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct StoreOutcomeLabels {
    pub(crate) op: &'static str,
    pub(crate) outcome: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_hostile_ones_fold() {
        let cap = LabelCap::default();
        for good in [
            "coder",
            "write_file",
            "github.search",
            "/v1/threads/{id}",
            "a",
        ] {
            assert_eq!(cap.admit(good), good);
        }
        for bad in [
            "",
            "two words",
            "quote\"d",
            "back\\slash",
            "new\nline",
            "é",
            "\u{0}",
            &"x".repeat(MAX_LABEL_LEN + 1),
        ] {
            assert_eq!(cap.admit(bad), OTHER, "{bad:?}");
        }
        assert_eq!(
            cap.admit(&"x".repeat(MAX_LABEL_LEN)),
            "x".repeat(MAX_LABEL_LEN)
        );
    }

    #[test]
    fn the_cap_keeps_known_values_and_folds_new_ones_once_full() {
        let cap = LabelCap::new(MAX_LABEL_LEN, 3);
        for name in ["a", "b", "c"] {
            assert_eq!(cap.admit(name), name);
        }
        assert_eq!(cap.admit("d"), OTHER);
        assert_eq!(cap.admit("b"), "b", "a known value keeps its series");
        assert_eq!(cap.admit("e"), OTHER);
    }
}
