//! The tools: one per agent, with the input schema every agent shares and the agent's
//! `finish_task` schema as the output schema; and the parsing of a call's arguments.
//!
//! The schema says what a call looks like; the hub still decides what it means (an
//! empty or oversized task, a workspace that is not an absolute existing directory).
//! Nothing here runs anything.

use std::sync::Arc;

use std::collections::BTreeMap;

use agentplane_core::AgentSpec;
use agentplane_engine::hub::MAX_INPUT_CHARS;
use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;
use serde_json::{Value, json};

/// Every agent as a tool, in name order.
pub(super) fn all(agents: &BTreeMap<String, AgentSpec>) -> Vec<Tool> {
    agents.values().map(of_agent).collect()
}

/// An agent as a tool: named after it, described by it, taking a task.
pub(super) fn of_agent(agent: &AgentSpec) -> Tool {
    let description = if agent.description.trim().is_empty() {
        format!("Runs the agentplane agent `{}` on a task.", agent.name)
    } else {
        agent.description.clone()
    };
    let tool = Tool::new(agent.name.clone(), description, Arc::new(input_schema()));
    match output_schema(agent) {
        Some(schema) => tool.with_raw_output_schema(Arc::new(schema)),
        None => tool,
    }
}

/// The agent's result schema, when it is one MCP can carry (an object schema).
pub(super) fn output_schema(agent: &AgentSpec) -> Option<JsonObject> {
    match &agent.output_schema {
        Some(Value::Object(schema)) if schema.get("type") == Some(&json!("object")) => {
            Some(schema.clone())
        }
        _ => None,
    }
}

fn input_schema() -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_INPUT_CHARS,
                "description": "What the agent should do, in plain words."
            },
            "workspace": {
                "type": "string",
                "description": "The absolute path of an existing directory the agent works \
                    in; its tools cannot leave it. Default: the server's working directory."
            }
        },
        "required": ["task"],
        "additionalProperties": false
    });
    match schema {
        Value::Object(schema) => schema,
        // The literal above is an object.
        _ => JsonObject::new(),
    }
}

/// A call's arguments, read strictly: unknown fields are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    pub(super) task: String,
    #[serde(default)]
    pub(super) workspace: Option<String>,
}

impl Arguments {
    /// Reads the arguments of `tools/call`, or an invalid-params error saying why not.
    pub(super) fn parse(arguments: Option<JsonObject>) -> Result<Self, ErrorData> {
        let arguments = arguments.ok_or_else(|| {
            ErrorData::invalid_params("arguments are required: {\"task\": \"…\"}", None)
        })?;
        serde_json::from_value(Value::Object(arguments))
            .map_err(|e| ErrorData::invalid_params(format!("invalid arguments: {e}"), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Option<JsonObject> {
        match value {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    #[test]
    fn arguments_are_read_strictly() {
        let ok =
            Arguments::parse(object(json!({"task": "do it", "workspace": "/tmp"}))).expect("valid");
        assert_eq!(ok.task, "do it");
        assert_eq!(ok.workspace.as_deref(), Some("/tmp"));
        assert!(Arguments::parse(object(json!({"task": "x"}))).is_ok());
        for bad in [
            json!({}),
            json!({"task": 5}),
            json!({"task": "x", "extra": 1}),
            json!({"task": null}),
            json!({"task": "x", "workspace": ["/"]}),
        ] {
            let error = Arguments::parse(object(bad.clone())).expect_err("refused");
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
        }
        assert!(Arguments::parse(None).is_err());
    }

    #[test]
    fn only_object_schemas_become_output_schemas() {
        let mut agent = AgentSpec {
            name: "a".into(),
            tags: Vec::new(),
            description: String::new(),
            system_prompt: String::new(),
            model: None,
            ensembles: Vec::new(),
            shell_allow: Vec::new(),
            network: Default::default(),
            sandbox: Default::default(),
            requires_permission: Vec::new(),
            output_schema: None,
            limits: Default::default(),
            tool_calls: Default::default(),
            temperature: None,
        };
        assert!(of_agent(&agent).output_schema.is_none());
        assert!(
            of_agent(&agent)
                .description
                .is_some_and(|d| d.contains("`a`"))
        );
        agent.output_schema = Some(json!({"type": "string"}));
        assert!(of_agent(&agent).output_schema.is_none());
        agent.output_schema = Some(json!({"type": "object", "required": ["summary"]}));
        assert!(of_agent(&agent).output_schema.is_some());
    }
}
