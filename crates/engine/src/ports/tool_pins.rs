//! `ToolPinStore`: the definitions of upstream MCP tools as they were first seen and
//! approved, so that an upstream cannot change a tool under its callers (the "rug
//! pull"). A port of its own, like `ResponseStore`.
//!
//! Each pin holds two definitions of one `(server, tool)`: the approved one (the first
//! seen, or the one an admin approved since) and the last one seen. They differ while
//! a change waits for an admin; what a change means for callers (quarantined, or only
//! reported) is the MCP client's decision, by the server's `pin` setting.
//!
//! Invariants every implementation keeps:
//! - one row per `(server, tool)`, replaced whole by [`ToolPinStore::put_tool_pin`];
//! - a pin is never removed: a tool the upstream stops listing keeps its pin, so its
//!   return with another definition is a change, not a first sight.

use async_trait::async_trait;
use serde_json::Value;

use super::store::StoreError;

/// One pinned tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPin {
    /// The configured server's name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// SHA-256 (hex) of the approved definition's canonical JSON.
    pub approved_hash: String,
    /// The approved definition: name, title, description, input and output schema,
    /// annotations.
    pub approved: Value,
    /// The hash and definition of the last listing.
    pub seen_hash: String,
    pub seen: Value,
    /// When the tool was first seen (RFC 3339).
    pub first_seen_at: String,
    /// When the last listing differed from the approved definition, if it does.
    pub changed_at: Option<String>,
    /// Who approved the definition in force, when a person did (`None`: first seen).
    pub approved_by: Option<String>,
}

impl ToolPin {
    /// Whether the last listing differs from the approved definition.
    pub fn changed(&self) -> bool {
        self.seen_hash != self.approved_hash
    }
}

#[async_trait]
pub trait ToolPinStore: Send + Sync {
    /// Every pin of `server`, or of every server; ordered by server, then tool.
    async fn tool_pins(&self, server: Option<&str>) -> Result<Vec<ToolPin>, StoreError>;

    /// Stores `pin`, replacing the one of its `(server, tool)`.
    async fn put_tool_pin(&self, pin: &ToolPin) -> Result<(), StoreError>;
}

/// The definition fields a pin covers, in the order a diff names them.
pub const DEFINITION_FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// How far each side of a changed field is shown in a diff.
const DIFF_SIDE: usize = 400;

/// What changed between two definitions, field by field: `description: "old" →
/// "new"; inputSchema: {…} → {…}`, each side cut at a few hundred characters.
pub fn definition_diff(approved: &Value, seen: &Value) -> String {
    let side = |value: Option<&Value>| {
        let text = value.map_or_else(|| "(none)".to_owned(), Value::to_string);
        match text.char_indices().nth(DIFF_SIDE) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        }
    };
    DEFINITION_FIELDS
        .iter()
        .filter(|field| approved.get(**field) != seen.get(**field))
        .map(|field| {
            format!(
                "{field}: {} → {}",
                side(approved.get(*field)),
                side(seen.get(*field))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
