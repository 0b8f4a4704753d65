//! A server's tools as the model sees them: `mcp__{server}__{tool}`, the server's input
//! schema as it is, side effects unless the server says the tool only reads.
//!
//! One bad tool never breaks a turn: a tool whose prefixed name does not fit what model
//! APIs accept, or whose schema does not compile, is left out with a warning. Nothing
//! here talks to the server. Tools whose pinned definition changed are left out before
//! (`super::pins`) and remembered here with why.

use std::collections::HashMap;

use agentplane_core::ToolSpec;
use agentplane_engine::schema::Schema;
use rmcp::model::Tool;

use super::spec::ToolFilter;

/// Longest tool name model APIs accept (OpenAI's `^[a-zA-Z0-9_-]{1,64}$`).
const MAX_TOOL_NAME: usize = 64;

/// The tools a server offers: specs for the model, and each prefixed name's name on the
/// server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) specs: Vec<ToolSpec>,
    names: HashMap<String, String>,
    /// Tools left out because their pinned definition changed, by prefixed name, with
    /// why (`super::pins`).
    quarantined: HashMap<String, String>,
}

impl Catalog {
    /// Builds the catalog of `server` from its `tools/list` answer, leaving out what
    /// `filter` does not offer.
    pub(crate) fn new(server: &str, prefix: &str, tools: Vec<Tool>, filter: &ToolFilter) -> Self {
        let mut catalog = Self::default();
        for tool in tools {
            if !filter.offers(&tool.name) {
                continue;
            }
            let name = format!("{prefix}{}", tool.name);
            if !fits_model_apis(&name) {
                tracing::warn!(
                    server,
                    tool = %tool.name,
                    "MCP tool left out: its name `{name}` is not 1-64 letters, digits, `_` or `-`"
                );
                continue;
            }
            if catalog.names.contains_key(&name) {
                tracing::warn!(server, tool = %tool.name, "MCP tool left out: listed twice");
                continue;
            }
            let parameters = serde_json::Value::Object(tool.input_schema.as_ref().clone());
            if let Err(e) = Schema::compile(&parameters) {
                tracing::warn!(server, tool = %tool.name, "MCP tool left out: {e}");
                continue;
            }
            let description = tool
                .description
                .map(|d| d.into_owned())
                .or(tool.title)
                .unwrap_or_default();
            catalog.names.insert(name.clone(), tool.name.into_owned());
            catalog.specs.push(ToolSpec {
                name,
                description,
                parameters,
                // `readOnlyHint` is the server's claim, not something we can check:
                // every MCP tool counts as side-effecting (shadow runs never call one).
                side_effects: true,
            });
        }
        catalog
    }

    /// Records the tools `super::pins` quarantined (server names, with why).
    pub(crate) fn quarantine(&mut self, prefix: &str, tools: Vec<(String, String)>) {
        for (tool, reason) in tools {
            self.quarantined.insert(format!("{prefix}{tool}"), reason);
        }
    }

    /// The quarantined tools by the server's names (`prefix` taken off), sorted.
    pub(crate) fn quarantined_names(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .quarantined
            .keys()
            .map(|k| k.strip_prefix(prefix).unwrap_or(k).to_owned())
            .collect();
        names.sort();
        names
    }

    /// Why the prefixed tool is quarantined, if it is.
    pub(crate) fn quarantined(&self, prefixed: &str) -> Option<&str> {
        self.quarantined.get(prefixed).map(String::as_str)
    }

    /// The server's own name for a prefixed tool name this catalog offers.
    pub(crate) fn server_name(&self, prefixed: &str) -> Option<&str> {
        self.names.get(prefixed).map(String::as_str)
    }
}

fn fits_model_apis(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: serde_json::Value) -> Tool {
        serde_json::from_value(value).expect("a tool")
    }

    #[test]
    fn bad_names_and_schemas_are_left_out_and_every_tool_counts_as_side_effecting() {
        let tools = vec![
            tool(
                json!({"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"},
                        "annotations": {"readOnlyHint": true}}),
            ),
            tool(json!({"name": "write", "title": "Write", "inputSchema": {"type": "object"}})),
            tool(json!({"name": "has space", "inputSchema": {"type": "object"}})),
            tool(json!({"name": "x".repeat(60), "inputSchema": {"type": "object"}})),
            tool(json!({"name": "broken", "inputSchema": {"type": 12}})),
            tool(json!({"name": "echo", "inputSchema": {"type": "object"}})),
        ];
        let catalog = Catalog::new("files", "mcp__files__", tools, &ToolFilter::default());
        let names: Vec<&str> = catalog.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mcp__files__echo", "mcp__files__write"]);
        // A read-only hint is the server's claim: it does not make a tool safe to run
        // in a shadow (ADR 0016).
        assert!(catalog.specs[0].side_effects);
        assert_eq!(catalog.specs[0].description, "Echoes");
        assert!(catalog.specs[1].side_effects);
        assert_eq!(catalog.specs[1].description, "Write");
        assert_eq!(catalog.server_name("mcp__files__echo"), Some("echo"));
        assert_eq!(catalog.server_name("echo"), None);
    }

    #[test]
    fn include_and_exclude_leave_tools_out_of_the_list_and_the_calls() {
        let tools = || {
            ["echo", "get-env", "get-sum", "trigger-sampling"]
                .iter()
                .map(|n| tool(json!({"name": n, "inputSchema": {"type": "object"}})))
                .collect::<Vec<_>>()
        };
        let glob = |p: &str| agentplane_core::policy::Glob::new(p).expect("pattern");
        let names = |filter: ToolFilter| {
            let catalog = Catalog::new("e", "mcp__e__", tools(), &filter);
            let listed: Vec<String> = catalog.specs.iter().map(|s| s.name.clone()).collect();
            for name in &listed {
                assert!(catalog.server_name(name).is_some(), "{name} callable");
            }
            listed
        };
        assert_eq!(names(ToolFilter::default()).len(), 4);
        let only_gets = ToolFilter {
            include: Some(vec![glob("get-*")]),
            exclude: vec![glob("get-env")],
        };
        assert_eq!(names(only_gets.clone()), ["mcp__e__get-sum"]);
        let catalog = Catalog::new("e", "mcp__e__", tools(), &only_gets);
        assert_eq!(
            catalog.server_name("mcp__e__echo"),
            None,
            "not callable either"
        );
        assert_eq!(catalog.server_name("mcp__e__get-env"), None);
        let no_triggers = ToolFilter {
            include: None,
            exclude: vec![glob("trigger-*")],
        };
        assert_eq!(
            names(no_triggers),
            ["mcp__e__echo", "mcp__e__get-env", "mcp__e__get-sum"]
        );
        let nothing = ToolFilter {
            include: Some(Vec::new()),
            exclude: Vec::new(),
        };
        assert!(names(nothing).is_empty(), "an empty include offers nothing");
    }
}
