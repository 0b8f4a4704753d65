//! Tool definitions pinned in the store (`ToolPinStore`): the first definition seen of
//! each tool (name, title, description, input and output schema, annotations) is
//! recorded with its SHA-256; at every later listing a definition that differs from
//! the approved one is a change: recorded once (a `security_event` of type
//! `tool_definition_changed` with the diff, and the `changed` hook for the metric),
//! then under `pin = "strict"` quarantined — left out of the catalog, so neither
//! listed nor callable, by agents and the MCP gateway alike — and under `"warn"`
//! offered all the same. An admin's approval makes the seen definition the approved one
//! (`agentplane_engine::services::tool_pins`).
//!
//! Before pinning, the description screen (`screen_definition`: hidden characters, text
//! aimed at the model, overlong descriptions, in every string of the definition) runs on
//! each tool: under `[mcp.servers.NAME] screen = "flag"` (the default) a finding is a
//! `security_event` of type `tool_description_flagged`; `"strip"` also removes hidden
//! characters before anyone sees the tool; `"quarantine"` holds a flagged tool back
//! until an admin approves its definition as it is; `"off"` screens nothing.
//!
//! Fail closed: under `strict`, a store that cannot be read or written fails the
//! connection (nothing unchecked is offered).

use std::collections::HashMap;
use std::sync::Arc;

use agentplane_core::policy::Timestamp;
use agentplane_engine::ports::tool_pins::{
    DEFINITION_FIELDS, definition_diff, screen_definition, strip_hidden,
};
use agentplane_engine::ports::{ToolPin, ToolPinStore};
use rmcp::model::Tool;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::spec::{McpServerSpec, PinMode, ScreenMode};

/// Called with the server and tool of each change when it is first seen (a metric).
pub type DefinitionChanged = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Where definitions are pinned, and who hears of a change.
#[derive(Clone)]
pub struct Pins {
    store: Arc<dyn ToolPinStore>,
    changed: Option<DefinitionChanged>,
}

impl Pins {
    pub fn new(store: Arc<dyn ToolPinStore>, changed: Option<DefinitionChanged>) -> Self {
        Self { store, changed }
    }
}

/// A listing after the pins: the tools offered, and those quarantined with why.
#[derive(Debug, Default)]
pub(crate) struct Admitted {
    pub(crate) tools: Vec<Tool>,
    pub(crate) quarantined: Vec<(String, String)>,
}

/// The definition a pin covers, as JSON with every object's keys sorted (the hash of a
/// definition does not depend on the order a server writes its keys in).
pub fn definition_of(tool: &Tool) -> Value {
    let full = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut definition = Map::new();
    for field in DEFINITION_FIELDS {
        if let Some(value) = full.get(field).filter(|v| !v.is_null()) {
            definition.insert(field.to_owned(), sorted(value.clone()));
        }
    }
    Value::Object(definition)
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// SHA-256 (hex) of a definition's canonical JSON.
pub fn hash_of(definition: &Value) -> String {
    let digest = Sha256::digest(definition.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `tools` of `spec`'s server after the description screen and its pins (see the
/// module's comment).
pub(crate) async fn admit(
    spec: &McpServerSpec,
    tools: Vec<Tool>,
    pins: Option<&Pins>,
) -> Result<Admitted, String> {
    let pins = pins.filter(|_| spec.pin != PinMode::Off);
    let unchecked = |e: agentplane_engine::ports::StoreError| {
        format!("its tools' pinned definitions could not be checked: {e}")
    };
    let known: HashMap<String, ToolPin> = match pins {
        None => HashMap::new(),
        Some(pins) => match pins.store.tool_pins(Some(&spec.name)).await {
            Ok(known) => known.into_iter().map(|p| (p.tool.clone(), p)).collect(),
            Err(e) if spec.pin == PinMode::Warn => {
                tracing::warn!(server = %spec.name, "{}", unchecked(e));
                HashMap::new()
            }
            Err(e) => return Err(unchecked(e)),
        },
    };
    let mut admitted = Admitted::default();
    for tool in tools {
        if !spec.tools.offers(&tool.name) {
            continue;
        }
        let tool = screened(spec, tool);
        let definition = definition_of(&tool);
        let findings = if spec.screen == ScreenMode::Off {
            Vec::new()
        } else {
            screen_definition(&definition)
        };
        let Some(pins) = pins else {
            if !findings.is_empty() {
                flagged(spec, &tool.name, &findings);
            }
            match quarantined_for(spec, &tool.name, &findings, None) {
                Some(reason) => admitted.quarantined.push((tool.name.to_string(), reason)),
                None => admitted.tools.push(tool),
            }
            continue;
        };
        let hash = hash_of(&definition);
        let now = Timestamp::now().to_string();
        let known = known.get(tool.name.as_ref());
        // What to store, and why the tool is quarantined (if it is).
        let (update, changed_reason) = match known {
            None => (
                Some(ToolPin {
                    server: spec.name.clone(),
                    tool: tool.name.to_string(),
                    approved_hash: hash.clone(),
                    approved: definition.clone(),
                    seen_hash: hash.clone(),
                    seen: definition.clone(),
                    first_seen_at: now,
                    changed_at: None,
                    approved_by: None,
                }),
                None,
            ),
            Some(pin) if pin.approved_hash == hash => (
                // Changed back to what was approved.
                (pin.seen_hash != hash).then(|| ToolPin {
                    seen_hash: hash.clone(),
                    seen: pin.approved.clone(),
                    changed_at: None,
                    ..pin.clone()
                }),
                None,
            ),
            Some(pin) => {
                let fresh = pin.seen_hash != hash;
                if fresh {
                    changed(spec, pins, pin, &definition);
                }
                let reason = (spec.pin == PinMode::Strict).then(|| {
                    format!(
                        "its definition changed since it was approved ({}); an admin \
                         approves the new one with `agentplane mcp tools approve {} {}`",
                        definition_diff(&pin.approved, &definition),
                        spec.name,
                        tool.name
                    )
                });
                let update = fresh.then(|| ToolPin {
                    seen_hash: hash.clone(),
                    seen: definition.clone(),
                    changed_at: Some(now),
                    ..pin.clone()
                });
                (update, reason)
            }
        };
        // Findings are reported when a definition is first seen or seen changed.
        if update.is_some() && !findings.is_empty() {
            flagged(spec, &tool.name, &findings);
        }
        // An admin's approval of exactly this definition clears the screen's findings.
        let approved_as_is = known
            .filter(|p| p.approved_hash == hash)
            .and_then(|p| p.approved_by.as_deref());
        let quarantine =
            changed_reason.or_else(|| quarantined_for(spec, &tool.name, &findings, approved_as_is));
        if let Some(update) = update
            && let Err(e) = pins.store.put_tool_pin(&update).await
        {
            if spec.pin == PinMode::Strict {
                return Err(unchecked(e));
            }
            tracing::warn!(server = %spec.name, "{}", unchecked(e));
        }
        match quarantine {
            Some(reason) => admitted.quarantined.push((tool.name.to_string(), reason)),
            None => admitted.tools.push(tool),
        }
    }
    Ok(admitted)
}

/// `tool` with its hidden characters removed under `screen = "strip"`.
fn screened(spec: &McpServerSpec, tool: Tool) -> Tool {
    if spec.screen != ScreenMode::Strip {
        return tool;
    }
    let Ok(value) = serde_json::to_value(&tool) else {
        return tool;
    };
    serde_json::from_value(strip_hidden(&value)).unwrap_or(tool)
}

/// Why a tool with `findings` is quarantined under `screen = "quarantine"`, unless an
/// admin approved its definition as it is.
fn quarantined_for(
    spec: &McpServerSpec,
    tool: &str,
    findings: &[String],
    approved_by: Option<&str>,
) -> Option<String> {
    (spec.screen == ScreenMode::Quarantine && !findings.is_empty() && approved_by.is_none()).then(
        || {
            format!(
                "its definition failed the description screen ({}); an admin who has read it \
                 approves it with `agentplane mcp tools approve {} {tool}`",
                findings.join("; "),
                spec.name
            )
        },
    )
}

/// Reports what the description screen found in a tool's definition.
fn flagged(spec: &McpServerSpec, tool: &str, findings: &[String]) {
    tracing::warn!(
        target: "agentplane::security",
        event_type = "tool_description_flagged",
        server = %spec.name,
        tool,
        screen = ?spec.screen,
        detail = %findings.join("; "),
        "security_event"
    );
}

/// Reports a change seen for the first time: the security event and the hook.
fn changed(spec: &McpServerSpec, pins: &Pins, pin: &ToolPin, seen: &Value) {
    tracing::warn!(
        target: "agentplane::security",
        event_type = "tool_definition_changed",
        server = %spec.name,
        tool = %pin.tool,
        pin = ?spec.pin,
        detail = %definition_diff(&pin.approved, seen),
        "security_event"
    );
    if let Some(hook) = &pins.changed {
        hook(&spec.name, &pin.tool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: Value) -> Tool {
        serde_json::from_value(value).expect("a tool")
    }

    #[test]
    fn a_definition_hashes_the_same_whatever_the_order_of_its_keys() {
        let a = tool(json!({"name": "t", "description": "d",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}, "y": {}}}}));
        let b = tool(
            json!({"inputSchema": {"properties": {"y": {}, "x": {"type": "string"}},
            "type": "object"}, "description": "d", "name": "t"}),
        );
        assert_eq!(hash_of(&definition_of(&a)), hash_of(&definition_of(&b)));
        let c = tool(json!({"name": "t", "description": "d ",
            "inputSchema": {"type": "object"}}));
        assert_ne!(hash_of(&definition_of(&a)), hash_of(&definition_of(&c)));
        // Annotations count; fields outside the definition (`_meta`) do not.
        let annotated = tool(json!({"name": "t", "description": "d ",
            "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}}));
        assert_ne!(
            hash_of(&definition_of(&c)),
            hash_of(&definition_of(&annotated))
        );
        let meta = tool(json!({"name": "t", "description": "d ",
            "inputSchema": {"type": "object"}, "_meta": {"x": 1}}));
        assert_eq!(hash_of(&definition_of(&c)), hash_of(&definition_of(&meta)));
    }
}
