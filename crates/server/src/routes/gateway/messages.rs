//! Anthropic's Messages API as the gateway speaks it (`POST /anthropic/v1/messages`):
//! the request Claude Code and the Anthropic SDKs send, and the `message` document or
//! the stream of `message_start` … `message_stop` events they get back.
//!
//! Read the way Anthropic reads it: unknown fields are ignored (`metadata`,
//! `cache_control`, `thinking`), a known field of the wrong shape is a 400 naming it.
//! Text, `tool_use` and `tool_result` blocks are taken; `thinking` blocks a client
//! sends back are dropped (the upstream never made them); images and documents are
//! refused rather than silently dropped, as are server tools (`web_search_…`): the
//! gateway runs no tool. Every frame passes the process-wide secret redactor.

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolChoice, ToolSpec};
use agentplane_engine::gateway::GatewayReply;
use serde::Deserialize;
use serde_json::{Value, json};

use super::frames::{self, StreamFrames};
use crate::error::ApiError;

// ----- requests ------------------------------------------------------------------------

/// `POST /anthropic/v1/messages` (and `…/count_tokens`, which needs no `max_tokens`).
#[derive(Debug, Deserialize)]
pub(crate) struct MessagesRequest {
    model: String,
    messages: Vec<WireMessage>,
    #[serde(default)]
    system: Option<Value>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireRole {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    role: WireRole,
    content: Value,
}

#[derive(Debug, Deserialize)]
struct WireTool {
    /// `custom` or absent for a client tool; anything else is a server tool.
    #[serde(rename = "type", default)]
    kind: Option<String>,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
}

/// A parsed request: the model call and whether to stream it.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub request: ChatRequest,
    pub stream: bool,
}

impl MessagesRequest {
    /// The provider-neutral request, or a 400 naming the field that cannot be one.
    /// `max_tokens` is required, as Anthropic requires it.
    pub(crate) fn parse(self) -> Result<Parsed, ApiError> {
        if self.max_tokens.is_none() {
            return Err(ApiError::invalid("`max_tokens` is required"));
        }
        let stream = self.stream.unwrap_or(false);
        Ok(Parsed {
            request: self.into_request()?,
            stream,
        })
    }

    /// The request without the checks only a call needs (`count_tokens`).
    pub(crate) fn into_request(self) -> Result<ChatRequest, ApiError> {
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = self.system {
            let text =
                text_of(system, true).map_err(|m| ApiError::invalid(format!("system: {m}")))?;
            if !text.is_empty() {
                messages.push(ChatMessage::system(text));
            }
        }
        for (i, message) in self.messages.into_iter().enumerate() {
            push_message(&mut messages, i, message)?;
        }
        let tools = self
            .tools
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, t)| tool(i, t))
            .collect::<Result<Vec<_>, _>>()?;
        let tool_choice = self.tool_choice.map(tool_choice).transpose()?;
        Ok(ChatRequest {
            model: self.model,
            messages,
            tools,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            tool_choice,
            response_schema: None,
        })
    }
}

/// One Anthropic message as chat messages: an assistant's text and `tool_use` blocks
/// are one assistant message; a user's `tool_result` blocks are one tool message each,
/// then its text (if any) one user message.
fn push_message(out: &mut Vec<ChatMessage>, i: usize, wire: WireMessage) -> Result<(), ApiError> {
    let at = |j: usize, field: &str| format!("messages[{i}].content[{j}].{field}");
    let blocks = match wire.content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks,
        _ => {
            return Err(ApiError::invalid(format!(
                "messages[{i}].content must be a string or an array of content blocks"
            )));
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for (j, block) in blocks.into_iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => match block["text"].as_str() {
                Some(t) => text.push_str(t),
                None => {
                    return Err(ApiError::invalid(format!(
                        "{} must be a string",
                        at(j, "text")
                    )));
                }
            },
            Some("thinking" | "redacted_thinking") => {}
            Some("tool_use") if matches!(wire.role, WireRole::Assistant) => {
                let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str()) else {
                    return Err(ApiError::invalid(format!(
                        "{}: a tool_use block needs a string `id` and `name`",
                        at(j, "type")
                    )));
                };
                let input = match &block["input"] {
                    Value::Null => json!({}),
                    input => input.clone(),
                };
                calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: input.to_string(),
                });
            }
            Some("tool_result") if matches!(wire.role, WireRole::User) => {
                let Some(id) = block["tool_use_id"].as_str() else {
                    return Err(ApiError::invalid(format!(
                        "{} must be a string",
                        at(j, "tool_use_id")
                    )));
                };
                let content = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(content) => text_of(content.clone(), false)
                        .map_err(|m| ApiError::invalid(format!("{}: {m}", at(j, "content"))))?,
                };
                let content = if block["is_error"] == json!(true) {
                    format!("error: {content}")
                } else {
                    content
                };
                results.push(ChatMessage::tool_result(id, content));
            }
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "{}: blocks of type `{other}` are not accepted in a {} message; \
                     the gateway takes text, tool_use and tool_result",
                    at(j, "type"),
                    match wire.role {
                        WireRole::User => "user",
                        WireRole::Assistant => "assistant",
                    }
                )));
            }
            None => {
                return Err(ApiError::invalid(format!(
                    "{} must be a string",
                    at(j, "type")
                )));
            }
        }
    }
    match wire.role {
        WireRole::Assistant => {
            if text.is_empty() && calls.is_empty() {
                // An assistant turn of thinking alone says nothing to another model.
                return Ok(());
            }
            out.push(ChatMessage::assistant(
                (!text.is_empty()).then_some(text),
                calls,
            ));
        }
        WireRole::User => {
            out.extend(results);
            if !text.is_empty() {
                out.push(ChatMessage::user(text));
            }
        }
    }
    Ok(())
}

/// A string, or text blocks joined (`system`, a tool result's content).
fn text_of(value: Value, system: bool) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text),
        Value::Array(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("text"), Some(t)) => {
                        if system && !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                    (Some(other), _) if other != "text" => {
                        return Err(format!(
                            "block {j} is of type `{other}`; the gateway accepts only text here"
                        ));
                    }
                    _ => return Err(format!("block {j} needs a string `type` and `text`")),
                }
            }
            Ok(text)
        }
        _ => Err("must be a string or an array of text blocks".to_owned()),
    }
}

fn tool(i: usize, wire: WireTool) -> Result<ToolSpec, ApiError> {
    if let Some(kind) = wire.kind.as_deref()
        && kind != "custom"
    {
        return Err(ApiError::invalid(format!(
            "tools[{i}].type `{kind}` is a server tool; the gateway runs no tool, \
             so only client tools (`custom`) are offered"
        )));
    }
    Ok(ToolSpec {
        name: wire.name,
        description: wire.description.unwrap_or_default(),
        parameters: wire
            .input_schema
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        side_effects: false,
    })
}

fn tool_choice(value: Value) -> Result<ToolChoice, ApiError> {
    match value["type"].as_str() {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("none") => Ok(ToolChoice::None),
        Some("any") => Ok(ToolChoice::Required),
        Some("tool") => value["name"]
            .as_str()
            .map(|name| ToolChoice::Function(name.to_owned()))
            .ok_or_else(|| ApiError::invalid("tool_choice.name must be a string")),
        _ => Err(ApiError::invalid(
            "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or \
             {\"type\": \"tool\", \"name\": …}",
        )),
    }
}

// ----- responses -----------------------------------------------------------------------

/// Anthropic's `stop_reason` for an answer.
fn stop_reason(response: &ChatResponse) -> &'static str {
    if !response.tool_calls.is_empty() {
        return "tool_use";
    }
    match response.finish_reason.as_deref() {
        Some("length") => "max_tokens",
        _ => "end_turn",
    }
}

/// A call's arguments as the `input` object of a `tool_use` block (an upstream's
/// arguments that are not an object are wrapped, never dropped).
fn input_of(call: &ToolCall) -> Value {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => value,
        Ok(other) => json!({ "arguments": other }),
        Err(_) => json!({ "arguments": call.arguments }),
    }
}

/// The content blocks of an answer.
fn blocks(response: &ChatResponse) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !response.content.is_empty() {
        blocks.push(json!({"type": "text", "text": response.content}));
    }
    for call in &response.tool_calls {
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input_of(call)}),
        );
    }
    blocks
}

fn usage(response: &ChatResponse) -> Value {
    let usage = response.usage.unwrap_or_default();
    json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})
}

/// The `message` document of a finished call.
pub(crate) fn message(reply: &GatewayReply) -> Value {
    let response = &reply.response;
    let mut document = json!({
        "id": reply.id.as_str(),
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": blocks(response),
        "stop_reason": stop_reason(response),
        "stop_sequence": null,
        "usage": usage(response),
    });
    agentplane_core::secret::current().redact_json(&mut document);
    document
}

/// The answer to `count_tokens`: the request's input as the gateway estimates it.
pub(crate) fn token_count(input_tokens: u64) -> Value {
    json!({ "input_tokens": input_tokens })
}

/// `GET /anthropic/v1/models`, Anthropic-shaped.
pub(crate) fn model_list(models: &[agentplane_engine::ports::ModelInfo]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|m| {
            json!({"type": "model", "id": m.id, "display_name": m.id,
                        "created_at": "1970-01-01T00:00:00Z"})
        })
        .collect();
    json!({
        "first_id": data.first().map(|m| m["id"].clone()),
        "last_id": data.last().map(|m| m["id"].clone()),
        "has_more": false,
        "data": data,
    })
}

/// The events of one streamed call.
pub(crate) struct MessageEvents {
    id: String,
    model: String,
    /// The index of the next content block.
    next: usize,
    /// A text block is open.
    in_text: bool,
}

impl MessageEvents {
    pub(crate) fn new(id: &str, model: &str) -> Self {
        Self {
            id: id.to_owned(),
            model: model.to_owned(),
            next: 0,
            in_text: false,
        }
    }

    fn close_text(&mut self, out: &mut String) {
        if self.in_text {
            self.in_text = false;
            out.push_str(&frames::event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": self.next - 1}),
            ));
        }
    }
}

impl StreamFrames for MessageEvents {
    fn start(&mut self) -> String {
        frames::event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }}),
        )
    }

    fn text(&mut self, text: &str) -> String {
        let mut out = String::new();
        if !self.in_text {
            self.in_text = true;
            self.next += 1;
            out.push_str(&frames::event(
                "content_block_start",
                json!({"type": "content_block_start", "index": self.next - 1,
                       "content_block": {"type": "text", "text": ""}}),
            ));
        }
        out.push_str(&frames::event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": self.next - 1,
                   "delta": {"type": "text_delta", "text": text}}),
        ));
        out
    }

    fn end(&mut self, reply: &GatewayReply) -> String {
        let response = &reply.response;
        let mut out = String::new();
        self.close_text(&mut out);
        for call in &response.tool_calls {
            let index = self.next;
            self.next += 1;
            out.push_str(&frames::event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
            ));
            out.push_str(&frames::event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": input_of(call).to_string()}}),
            ));
            out.push_str(&frames::event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        out.push_str(&frames::event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason(response), "stop_sequence": null},
                   "usage": usage(response)}),
        ));
        out.push_str(&frames::event(
            "message_stop",
            json!({"type": "message_stop"}),
        ));
        out
    }

    fn error(&mut self, error: &ApiError) -> String {
        frames::event("error", anthropic_error(error))
    }
}

/// An error as Anthropic shapes it, with agentplane's code and details kept beside
/// (`error.code`, `error.details`): the SDKs read `error.type` and `error.message`.
pub(crate) fn anthropic_error(error: &ApiError) -> Value {
    let mut envelope = error.envelope();
    reshape_error(&mut envelope);
    envelope
}

/// Adds Anthropic's `type: "error"` and `error.type` to agentplane's envelope.
pub(crate) fn reshape_error(envelope: &mut Value) {
    let kind = match envelope["error"]["code"].as_str() {
        Some("INVALID_ARGUMENT") => "invalid_request_error",
        Some("UNAUTHORIZED") => "authentication_error",
        Some("FORBIDDEN" | "BUDGET_EXCEEDED") => "permission_error",
        Some("NOT_FOUND") => "not_found_error",
        Some("RATE_LIMITED") => "rate_limit_error",
        Some("TIMEOUT" | "UPSTREAM_UNAVAILABLE") => "overloaded_error",
        Some(_) => "api_error",
        None => return,
    };
    envelope["type"] = json!("error");
    envelope["error"]["type"] = json!(kind);
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_core::{CompletionId, Role, Usage};

    fn parse(body: Value) -> Result<Parsed, String> {
        let request: MessagesRequest = serde_json::from_value(body).map_err(|e| e.to_string())?;
        request.parse().map_err(|e| e.message().to_owned())
    }

    #[test]
    fn a_tool_conversation_becomes_chat_messages() {
        let parsed = parse(json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "read a.txt"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "x"},
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.txt"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "hello"}]},
                    {"type": "text", "text": "now write it"}]},
            ],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
            "stream": true,
            "metadata": {"user_id": "ignored"},
        }))
        .expect("valid");
        let r = &parsed.request;
        assert!(parsed.stream);
        assert_eq!(r.messages[0], ChatMessage::system("be brief"));
        assert_eq!(r.messages[1], ChatMessage::user("read a.txt"));
        assert_eq!(r.messages[2].role, Role::Assistant);
        assert_eq!(r.messages[2].content.as_deref(), Some("reading"));
        assert_eq!(
            r.messages[2].tool_calls[0].arguments,
            r#"{"file_path":"a.txt"}"#
        );
        assert_eq!(r.messages[3], ChatMessage::tool_result("t1", "hello"));
        assert_eq!(r.messages[4], ChatMessage::user("now write it"));
        assert_eq!(r.tool_choice, Some(ToolChoice::Required));
        assert_eq!(r.tools[0].name, "Read");
    }

    #[test]
    fn wrong_shapes_are_refused_naming_the_field() {
        let user = json!([{"role": "user", "content": "hi"}]);
        for (body, needle) in [
            (json!({"model": "m", "messages": user}), "max_tokens"),
            (
                json!({"model": "m", "max_tokens": 1, "messages": [{"role": "system", "content": "x"}]}),
                "system",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": 5}]}),
                "messages[0].content",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
                "`image`",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b"}]}]}),
                "`tool_use`",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}),
                "tool_use_id",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": user, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "server tool",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": user, "tool_choice": "auto"}),
                "tool_choice",
            ),
            (
                json!({"model": "m", "max_tokens": 1, "messages": user, "system": 3}),
                "system",
            ),
        ] {
            let error = parse(body.clone()).expect_err(&body.to_string());
            assert!(error.contains(needle), "{body}: {error}");
        }
    }

    #[test]
    fn a_streamed_tool_call_is_anthropics_event_sequence() {
        let mut events = MessageEvents::new("msg_1", "m");
        let mut all = events.start();
        all.push_str(&events.text("I'll read it"));
        all.push_str(&events.end(&GatewayReply {
            id: CompletionId::new(),
            response: ChatResponse {
                content: "I'll read it".into(),
                tool_calls: vec![ToolCall {
                    id: "t1".into(),
                    name: "Read".into(),
                    arguments: r#"{"file_path":"a"}"#.into(),
                }],
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                }),
                ..ChatResponse::default()
            },
        }));
        let kinds: Vec<&str> = all
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(all.contains(r#""stop_reason":"tool_use""#), "{all}");
        assert!(all.contains(r#""index":1"#), "{all}");
    }
}
