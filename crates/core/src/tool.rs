//! Tools as the model sees them, and the vocabulary of tool failures.

/// The name of the terminal tool every agent with an output schema gets: its
/// arguments, checked against that schema, are the turn's result.
pub const FINISH_TASK: &str = "finish_task";

/// The tool whose policies and permissions a tool is also governed by: `edit_file`
/// changes files as `write_file` does, so a policy or `requires_permission` naming
/// `write_file` holds for it too (a deny list written before it existed stays whole).
pub fn governed_as(tool: &str) -> Option<&'static str> {
    match tool {
        "edit_file" => Some("write_file"),
        _ => None,
    }
}

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A tool offered to the model: a name, what it does, and a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    /// Side-effecting tools (writes, commands, network requests, every MCP tool) are
    /// marked so that policies, permissions and shadow runs can treat them differently
    /// from reads: a shadow run records such a call but never executes it (ADR 0016).
    #[serde(default)]
    pub side_effects: bool,
}

/// Why a tool call failed; the `error_type` of a `tool_call_result` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// Arguments were not JSON or did not match the tool's schema.
    InvalidArguments,
    /// No such tool in this turn.
    UnknownTool,
    /// The call tried to leave the workspace or otherwise broke confinement.
    SandboxViolation,
    /// The program, host or action is not allowed for this agent.
    NotAllowed,
    /// A person declined the call, or no decision came in time (fail-closed).
    PermissionDenied,
    /// The call ran longer than its timeout and was stopped.
    Timeout,
    /// A policy forbids the call (`tool_access`, `time_window`, `data_scope`).
    PolicyDenied,
    /// A `rate_limit` policy's window is full.
    RateLimited,
    /// A person rejected the call (with feedback), or its approval expired.
    Rejected,
    /// The tool ran and failed (missing file, non-zero exit is *not* this: it is a result).
    ExecutionFailed,
    /// A Harmony-format tool payload above the size limit (seed 004).
    ToolPayloadTooLarge,
    /// A Harmony-format tool payload that is not valid JSON (seed 004).
    ToolPayloadParseError,
    /// A side-effecting tool called by a shadow run: recorded, never executed (ADR 0016).
    NotExecutedInShadow,
}

impl ToolErrorKind {
    /// The name used in events and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "invalid_arguments",
            Self::UnknownTool => "unknown_tool",
            Self::SandboxViolation => "sandbox_violation",
            Self::NotAllowed => "not_allowed",
            Self::PermissionDenied => "permission_denied",
            Self::Timeout => "timeout",
            Self::PolicyDenied => "policy_denied",
            Self::RateLimited => "rate_limited",
            Self::Rejected => "rejected",
            Self::ExecutionFailed => "execution_failed",
            Self::ToolPayloadTooLarge => "tool_payload_too_large",
            Self::ToolPayloadParseError => "tool_payload_parse_error",
            Self::NotExecutedInShadow => "not_executed_in_shadow",
        }
    }
}

/// Seed 004's argument fingerprint: SHA-256 of the first 200 characters of the
/// canonical (compact, key-sorted) JSON, hex encoded. Identical calls share a hash
/// without the hash revealing a large payload.
pub fn args_preview_hash(args: &serde_json::Value) -> String {
    // Keys are sorted here rather than trusted to serde_json's Map: another crate in
    // the build (the ACP SDK) turns on `preserve_order`, which keeps insertion order.
    let canonical = canonical_json(args);
    let preview: String = canonical.chars().take(200).collect();
    let digest = Sha256::digest(preview.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compact JSON with every object's keys sorted, whatever order the map keeps.
fn canonical_json(value: &serde_json::Value) -> String {
    fn write(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(key.clone()).to_string());
                    out.push(':');
                    write(item, out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_nested_keys() {
        let mut inner = serde_json::Map::new();
        inner.insert("z".into(), serde_json::json!(1));
        inner.insert("a".into(), serde_json::json!([{"y": 2, "b": 3}]));
        let value = serde_json::json!({"k": serde_json::Value::Object(inner)});
        assert_eq!(
            canonical_json(&value),
            r#"{"k":{"a":[{"b":3,"y":2}],"z":1}}"#
        );
    }

    #[test]
    fn preview_hash_ignores_key_order_and_tail_beyond_200_chars() {
        let a = serde_json::json!({"b": 1, "a": 2});
        let b = serde_json::json!({"a": 2, "b": 1});
        assert_eq!(args_preview_hash(&a), args_preview_hash(&b));
        assert_eq!(args_preview_hash(&a).len(), 64);

        let long1 = serde_json::json!({"x": format!("{}1", "a".repeat(300))});
        let long2 = serde_json::json!({"x": format!("{}2", "a".repeat(300))});
        assert_eq!(args_preview_hash(&long1), args_preview_hash(&long2));
        assert_ne!(args_preview_hash(&a), args_preview_hash(&long1));
    }
}
