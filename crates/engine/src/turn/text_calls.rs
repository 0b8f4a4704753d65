//! Tool calls and results a model wrote as text (ADR 0032): the turn's use of
//! `recover.rs`, the JSON schema of a constrained answer, and the corrective message
//! sent to a model that answered with text when a result was expected.

use std::collections::HashMap;
use std::fmt::Write as _;

use agentplane_core::FINISH_TASK;
use agentplane_core::{AgentSpec, ChatMessage, Role, ToolCall, ToolCallMode, ToolSpec};
use serde_json::{Value, json};

use super::progress::*;
use super::tools::*;
use crate::recover::{self, Offered};

/// How the id of every call recovered from text begins.
pub(super) const RECOVERED_ID: &str = "recovered_";

/// The call recovered from `text` (an answer without native calls): only tools offered
/// in this request, with arguments that validate. Only the first call a text names
/// runs: a small model writing several calls at once writes a plan whose later calls
/// guess the earlier ones' results (a read, then a write of what it has not read yet),
/// so it gets the first result back and writes the next call knowing it. The id is
/// `recovered_0_sSTEP`.
pub(super) fn recover_calls(
    step: u32,
    text: String,
    specs: &[ToolSpec],
    tools: &HashMap<String, ToolEntry>,
) -> (String, Vec<PlannedCall>) {
    let found = recover::recover(&text, &offered(specs, tools));
    if found.calls.is_empty() {
        return (text, Vec::new());
    }
    let calls = found
        .calls
        .into_iter()
        .take(1)
        .enumerate()
        .map(|(i, call)| {
            PlannedCall::Recovered(ToolCall {
                id: format!("{RECOVERED_ID}{i}_s{step}"),
                name: call.name,
                arguments: call.arguments.to_string(),
            })
        })
        .collect();
    (found.text, calls)
}

/// `text` as the turn's result: a `finish_task` call recovered from it, when the whole
/// text is a JSON object that validates against the output schema.
pub(super) fn result_call(
    step: u32,
    text: &str,
    tools: &HashMap<String, ToolEntry>,
) -> Option<PlannedCall> {
    let finish = tools.get(FINISH_TASK)?;
    let result = recover::result_text(text, &finish.schema)?;
    Some(PlannedCall::Recovered(ToolCall {
        id: format!("{RECOVERED_ID}result_s{step}"),
        name: FINISH_TASK.to_owned(),
        arguments: result.to_string(),
    }))
}

/// The turn's messages as every request shows them to a model that writes its calls
/// as text (free and constrained steps alike): each recovered call as the JSON object
/// it wrote,
/// `{"name": …, "arguments": …}`, in the assistant's message, and each result of one
/// in a user message, "Result of TOOL:" and the result (adjacent user messages joined,
/// as some chat templates require roles to alternate). Native calls stay native.
///
/// Why (ADR 0038): a chat template renders native calls in the model's native form
/// (`<tool_call>` for Qwen); a model that does not answer in that form, shown its own
/// calls in it, repeated its last call or answered nothing.
pub(super) fn as_written(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    for message in messages {
        if message.tool_calls.iter().any(is_recovered) {
            for call in &message.tool_calls {
                names.insert(&call.id, &call.name);
            }
        }
    }
    if names.is_empty() {
        return messages.to_vec();
    }
    let mut shown: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    let recovered = |id: &Option<String>| id.as_deref().and_then(|id| names.get(id));
    for message in messages {
        let next = if message.tool_calls.iter().any(is_recovered) {
            let calls = message.tool_calls.iter().map(|call| {
                let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                json!({"name": call.name, "arguments": arguments}).to_string()
            });
            let text: Vec<String> = message.content.iter().cloned().chain(calls).collect();
            ChatMessage::assistant(Some(text.join("\n")), Vec::new())
        } else if let Some(tool) = recovered(&message.tool_call_id) {
            let result = message.content.as_deref().unwrap_or_default();
            ChatMessage::user(format!("Result of {tool}:\n{result}"))
        } else {
            message.clone()
        };
        match shown.last_mut() {
            Some(last) if last.role == Role::User && next.role == Role::User => {
                let joined = format!(
                    "{}\n\n{}",
                    last.content.as_deref().unwrap_or_default(),
                    next.content.as_deref().unwrap_or_default()
                );
                last.content = Some(joined);
            }
            _ => shown.push(next),
        }
    }
    shown
}

fn is_recovered(call: &ToolCall) -> bool {
    call.id.starts_with(RECOVERED_ID)
}

/// The request's tools with their compiled schemas, as the recovery reads them.
fn offered<'a>(specs: &'a [ToolSpec], tools: &'a HashMap<String, ToolEntry>) -> Vec<Offered<'a>> {
    specs
        .iter()
        .filter_map(|spec| {
            tools.get(&spec.name).map(|entry| Offered {
                name: &spec.name,
                schema: &entry.schema,
            })
        })
        .collect()
}

/// The system prompt of a turn: the agent's, and in `recover` mode how to write a call
/// as text, in the shape a constrained answer has (a thought first, then the call), so
/// a model without native calls writes one the recovery reads.
pub(super) fn system_prompt(agent: &AgentSpec, specs: &[ToolSpec]) -> String {
    if agent.tool_calls != ToolCallMode::Recover || specs.is_empty() {
        return agent.system_prompt.clone();
    }
    format!("{}\n\n{}", agent.system_prompt, how_to_call(specs))
}

/// How to write a call as text: one JSON object, a thought first, then the call.
fn how_to_call(specs: &[ToolSpec]) -> String {
    let finish = if specs.iter().any(|s| s.name == FINISH_TASK) {
        format!(" When the task is done, call `{FINISH_TASK}` the same way.")
    } else {
        String::new()
    };
    format!(
        "To call a tool, answer with only this JSON object: {{\"thought\": \"<what you \
         know and what to do next, in one sentence>\", \"name\": \"<tool>\", \
         \"arguments\": {{<its arguments>}}}}. One call per answer.{finish}"
    )
}

/// The offered tools as a constrained request lists them, each with its description
/// and arguments' schema, and how to write a call. Such a request sends no native
/// tools (ADR 0039): given tools, a chat template tells the model to answer in its
/// native call form (`<tool_call>` tags for Qwen), which the constraint forbids, and a
/// small model torn between the two began worse.
pub(super) fn tools_listing(specs: &[ToolSpec]) -> String {
    let mut listing = String::from("You can call these tools:");
    for spec in specs {
        let _ = write!(listing, "\n- {}:", spec.name);
        let description = spec.description.trim();
        if !description.is_empty() {
            let stop = if description.ends_with('.') { "" } else { "." };
            let _ = write!(listing, " {description}{stop}");
        }
        let _ = write!(listing, " Arguments: {}", spec.parameters);
    }
    listing.push_str("\n\n");
    listing.push_str(&how_to_call(specs));
    listing
}

/// A constrained request's messages: `listing` ([`tools_listing`]) after the system
/// prompt, or as the system message when there is none.
pub(super) fn tools_listed(mut messages: Vec<ChatMessage>, listing: &str) -> Vec<ChatMessage> {
    match messages.first_mut() {
        Some(first) if first.role == Role::System => {
            let prompt = first.content.take().unwrap_or_default();
            first.content = Some(if prompt.trim().is_empty() {
                listing.to_owned()
            } else {
                format!("{prompt}\n\n{listing}")
            });
        }
        _ => messages.insert(0, ChatMessage::system(listing)),
    }
    messages
}

/// Characters of the `thought` a constrained answer begins with.
const MAX_THOUGHT_CHARS: u32 = 240;

/// The JSON schema a constrained answer must match: one of the offered calls, each
/// `{"name": <its name>, "arguments": <its schema>}`, `finish_task` among them.
pub(super) fn call_schema(specs: &[ToolSpec]) -> Value {
    let choices: Vec<Value> = specs
        .iter()
        .map(|spec| {
            json!({
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "maxLength": MAX_THOUGHT_CHARS},
                    "name": {"const": spec.name},
                    "arguments": spec.parameters,
                },
                "required": ["thought", "name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    json!({ "anyOf": choices })
}

/// What a model that answered with `text` is told when the agent expects a result:
/// why its call could not be read, when the text holds one for an offered tool, else
/// how this task ends.
pub(super) fn nudge(text: &str, specs: &[ToolSpec], tools: &HashMap<String, ToolEntry>) -> String {
    if let Some(miss) = recover::near_miss(text, &offered(specs, tools)) {
        return format!(
            "The call to {} could not be read: {}. Write the call again, with valid \
             arguments.",
            miss.tool, miss.reason
        );
    }
    finish_nudge(tools)
}

/// How a correction begins. Worded as an instruction, not as an error: a small model
/// answered "error (…): your answer was…" with an empty answer (ADR 0037).
const ENDS_BY_A_CALL: &str =
    "This task ends only through a tool call. If it is not done, call the next tool.";

/// Whether `text` holds a call to an offered tool that could not be read.
pub(super) fn unreadable_call(
    text: &str,
    specs: &[ToolSpec],
    tools: &HashMap<String, ToolEntry>,
) -> bool {
    recover::near_miss(text, &offered(specs, tools)).is_some()
}

/// The general correction: the task ends only through a call, `finish_task` when done,
/// shown as the call to write with a placeholder per required field.
fn finish_nudge(tools: &HashMap<String, ToolEntry>) -> String {
    let schema = tools
        .get(FINISH_TASK)
        .map(|entry| entry.parameters.clone())
        .unwrap_or(Value::Null);
    format!(
        "{ENDS_BY_A_CALL} If it is done, call {FINISH_TASK}, filling in each <…>: \
         {{\"name\": \"{FINISH_TASK}\", \"arguments\": {}}} (its JSON Schema: {schema})",
        template(&schema)
    )
}

/// An object schema's required fields as `{"field": <type>, …}`: what to fill in.
fn template(schema: &Value) -> String {
    let properties = schema.get("properties").and_then(Value::as_object);
    let fields: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|field| {
            let kind = properties
                .and_then(|p| p.get(field))
                .map(placeholder)
                .unwrap_or_else(|| "<value>".to_owned());
            format!("{}: {kind}", Value::String(field.to_owned()))
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// `<string>`, `<integer>`, `<array of string>`…: a field's type as a placeholder.
fn placeholder(field: &Value) -> String {
    match field.get("type").and_then(Value::as_str) {
        Some("array") => match field.pointer("/items/type").and_then(Value::as_str) {
            Some(item) => format!("<array of {item}>"),
            None => "<array>".to_owned(),
        },
        Some(kind) => format!("<{kind}>"),
        None => "<value>".to_owned(),
    }
}

/// The temperature of a call after a model got stuck on one answer.
const STUCK_TEMPERATURE: f32 = 1.0;

/// The temperature of the next call: the agent's, raised to [`STUCK_TEMPERATURE`]
/// when the model is `stuck` (it answered nothing, or what it answered before).
pub(super) fn temperature(agent: Option<f32>, stuck: bool) -> Option<f32> {
    if stuck {
        Some(agent.map_or(STUCK_TEMPERATURE, |t| t.max(STUCK_TEMPERATURE)))
    } else {
        agent
    }
}

/// What a model that repeated its previous step's calls exactly is told, after their
/// results.
pub(super) fn repeat_nudge(tools: &HashMap<String, ToolEntry>) -> String {
    let finish = if tools.contains_key(FINISH_TASK) {
        format!("{ENDS_BY_A_CALL} If it is done, call {FINISH_TASK}.")
    } else {
        "If the task is not done, call the next tool; if it is done, answer with the result."
            .to_owned()
    };
    format!("That tool call was the same as the one before it, and its result is above. {finish}")
}

/// A step's calls as (name, arguments), to see a step repeat the one before.
pub(super) fn signature(calls: &[PlannedCall]) -> Vec<(String, Value)> {
    calls
        .iter()
        .map(|c| {
            let call = c.call();
            let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
            (call.name.clone(), arguments)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn recovered_calls_are_shown_as_written_and_native_ones_stay_native() {
        let messages = vec![
            ChatMessage::system("Do the task."),
            ChatMessage::user("Copy a.txt to b.txt."),
            ChatMessage::assistant(
                None,
                vec![call("call_1", "read_file", r#"{"path":"a.txt"}"#)],
            ),
            ChatMessage::tool_result("call_1", "alpha"),
            ChatMessage::assistant(
                Some("I will write it.".to_owned()),
                vec![call(
                    "recovered_0_s1",
                    "write_file",
                    r#"{"path":"b.txt","content":"alpha"}"#,
                )],
            ),
            ChatMessage::tool_result("recovered_0_s1", "wrote 5 bytes to b.txt"),
            ChatMessage::user("That tool call was the same as the one before it."),
        ];
        let shown = as_written(&messages);
        assert_eq!(
            shown[..4],
            messages[..4],
            "native calls and their results untouched"
        );
        assert_eq!(shown.len(), 6, "the note joins the result's user message");
        assert_eq!(shown[4].role, Role::Assistant);
        assert!(shown[4].tool_calls.is_empty());
        let text = shown[4].content.as_deref().expect("text");
        let (prose, written) = text.split_once('\n').expect("two lines");
        assert_eq!(prose, "I will write it.");
        let written: Value = serde_json::from_str(written).expect("a JSON call");
        assert_eq!(
            written,
            json!({"name": "write_file", "arguments": {"path": "b.txt", "content": "alpha"}})
        );
        assert_eq!(shown[5].role, Role::User);
        assert_eq!(shown[5].tool_call_id, None);
        assert_eq!(
            shown[5].content.as_deref(),
            Some(
                "Result of write_file:\nwrote 5 bytes to b.txt\n\n\
                 That tool call was the same as the one before it."
            )
        );
    }

    fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            side_effects: false,
        }
    }

    #[test]
    fn a_constrained_request_lists_the_tools_in_its_system_message() {
        let specs = vec![
            spec(
                "read_file",
                "Read a text file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
            spec(FINISH_TASK, "End the task.", json!({"type": "object"})),
        ];
        let messages = vec![
            ChatMessage::system("Do the task."),
            ChatMessage::user("Read a.txt."),
        ];
        let listed = tools_listed(messages.clone(), &tools_listing(&specs));
        assert_eq!(
            listed[1..],
            messages[1..],
            "only the system message changes"
        );
        let system = listed[0].content.as_deref().expect("system prompt");
        let (prompt, rest) = system.split_once("\n\n").expect("prompt, then tools");
        assert_eq!(prompt, "Do the task.");
        let lines: Vec<&str> = rest.lines().collect();
        assert_eq!(lines[0], "You can call these tools:");
        assert_eq!(
            lines[1],
            r#"- read_file: Read a text file. Arguments: {"type":"object","properties":{"path":{"type":"string"}}}"#
        );
        assert_eq!(
            lines[2],
            r#"- finish_task: End the task. Arguments: {"type":"object"}"#
        );
        assert!(
            lines[4].starts_with("To call a tool, answer with only this JSON object")
                && lines[4].ends_with("call `finish_task` the same way."),
            "{}",
            lines[4]
        );
    }

    #[test]
    fn without_a_system_message_the_tool_list_becomes_one() {
        let specs = vec![spec(FINISH_TASK, "", json!({"type": "object"}))];
        let listed = tools_listed(vec![ChatMessage::user("Go.")], &tools_listing(&specs));
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].role, Role::System);
        assert!(
            listed[0].content.as_deref().is_some_and(
                |s| s.starts_with("You can call these tools:\n- finish_task: Arguments:")
            ),
            "{:?}",
            listed[0].content
        );
        assert_eq!(listed[1], ChatMessage::user("Go."));
    }

    #[test]
    fn a_conversation_without_recovered_calls_is_shown_unchanged() {
        let messages = vec![
            ChatMessage::user("Read a.txt."),
            ChatMessage::assistant(None, vec![call("call_1", "read_file", "{}")]),
            ChatMessage::tool_result("call_1", "alpha"),
            ChatMessage::user("A second user message stays a message of its own."),
        ];
        assert_eq!(as_written(&messages), messages);
    }

    #[test]
    fn arguments_that_are_not_json_are_shown_as_null_not_dropped() {
        // Recovered calls carry validated JSON; a hand-edited stored snapshot may not.
        let messages = vec![
            ChatMessage::assistant(None, vec![call("recovered_0_s0", "read_file", "{oops")]),
            ChatMessage::tool_result("recovered_0_s0", "refused"),
        ];
        let shown = as_written(&messages);
        assert_eq!(
            shown[0].content.as_deref(),
            Some(r#"{"name":"read_file","arguments":null}"#)
        );
        assert_eq!(
            shown[1].content.as_deref(),
            Some("Result of read_file:\nrefused")
        );
    }
}
