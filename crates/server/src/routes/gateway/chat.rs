//! The OpenAI chat-completions wire format as the gateway speaks it: the request a
//! client sends, and the `chat.completion`, `chat.completion.chunk` and model-list
//! documents it gets back.
//!
//! Requests are read the way OpenAI reads them: unknown fields are ignored (clients
//! send extras such as `user`, `seed` or `logprobs`), but a known field of the wrong
//! type or shape is a 400 naming the field. Only text content is accepted (a string
//! or `text` parts); images and audio are refused rather than silently dropped.
//! Nothing here calls the hub or decides policy; `agentplane_engine::gateway`
//! checks what a request means. Every document going out passes the process-wide
//! secret redactor (`completion`, each chunk).

use agentplane_core::secret;
use agentplane_core::{
    ChatMessage, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice, ToolSpec, Usage,
};
use agentplane_engine::gateway::GatewayReply;
use agentplane_engine::ports::ModelInfo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::frames::StreamFrames;
use crate::error::ApiError;

// ----- requests ------------------------------------------------------------------------

/// `POST /openai/v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub(crate) struct CompletionRequest {
    model: String,
    messages: Vec<WireMessage>,
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<WireStreamOptions>,
    /// How many answers; only 1 is supported.
    #[serde(default)]
    n: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct WireStreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireRole {
    System,
    /// OpenAI's newer name for a system message.
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    role: WireRole,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: WireFunctionCall,
}

#[derive(Debug, Deserialize)]
struct WireFunctionCall {
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct WireTool {
    #[serde(rename = "type")]
    kind: String,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
}

/// A parsed request: the model call and how to answer it.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub request: ChatRequest,
    pub stream: bool,
    /// Send a last chunk with the usage (`stream_options.include_usage`).
    pub include_usage: bool,
}

impl CompletionRequest {
    /// The provider-neutral request, or a 400 naming the field that cannot be one.
    pub(crate) fn parse(self) -> Result<Parsed, ApiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::invalid("`n` must be 1: one answer per request"));
        }
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| message(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = self
            .tools
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, t)| tool(i, t))
            .collect::<Result<Vec<_>, _>>()?;
        let tool_choice = self.tool_choice.map(tool_choice).transpose()?;
        let stream = self.stream.unwrap_or(false);
        let include_usage = self
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        Ok(Parsed {
            request: ChatRequest {
                model: self.model,
                messages,
                tools,
                temperature: self.temperature,
                max_tokens: self.max_completion_tokens.or(self.max_tokens),
                tool_choice,
                response_schema: None,
            },
            stream,
            include_usage,
        })
    }
}

fn message(i: usize, wire: WireMessage) -> Result<ChatMessage, ApiError> {
    let at = |field: &str| format!("messages[{i}].{field}");
    let text = |content: Option<Value>| -> Result<Option<String>, ApiError> {
        match content {
            None | Some(Value::Null) => Ok(None),
            Some(value) => text_parts(&value, &["text"])
                .map(Some)
                .map_err(|m| ApiError::invalid(format!("{}: {m}", at("content")))),
        }
    };
    let required = |content: Option<String>| {
        content.ok_or_else(|| ApiError::invalid(format!("{} is required", at("content"))))
    };
    let role = match wire.role {
        WireRole::System | WireRole::Developer => Role::System,
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
        WireRole::Tool => Role::Tool,
    };
    let content = text(wire.content)?;
    match role {
        Role::Assistant => {
            let calls = wire
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(j, call)| {
                    if call.kind.as_deref().is_some_and(|k| k != "function") {
                        return Err(ApiError::invalid(format!(
                            "{}: only `function` tool calls are supported",
                            at(&format!("tool_calls[{j}].type"))
                        )));
                    }
                    Ok(ToolCall {
                        id: call.id,
                        name: call.function.name,
                        arguments: call.function.arguments,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if content.is_none() && calls.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{}: an assistant message needs content or tool_calls",
                    at("content")
                )));
            }
            Ok(ChatMessage::assistant(content, calls))
        }
        Role::Tool => {
            let id = wire
                .tool_call_id
                .ok_or_else(|| ApiError::invalid(format!("{} is required", at("tool_call_id"))))?;
            Ok(ChatMessage::tool_result(id, required(content)?))
        }
        Role::System => Ok(ChatMessage::system(required(content)?)),
        Role::User => Ok(ChatMessage::user(required(content)?)),
    }
}

/// A string, or an array of text parts joined: parts of a type in `kinds` with a
/// string `text` (chat completions' `text`; the Responses API's `input_text`, …).
pub(super) fn text_parts(value: &Value, kinds: &[&str]) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some(kind), Some(t)) if kinds.contains(&kind) => text.push_str(t),
                    (Some(kind), None) if kinds.contains(&kind) => {
                        return Err(format!("part {j} of type `{kind}` needs a string `text`"));
                    }
                    (Some(other), _) => {
                        return Err(format!(
                            "part {j} is of type `{other}`; the gateway accepts only text"
                        ));
                    }
                    (None, _) => return Err(format!("part {j} has no string `type`")),
                }
            }
            Ok(text)
        }
        _ => Err("must be a string or an array of text parts".to_owned()),
    }
}

fn tool(i: usize, wire: WireTool) -> Result<ToolSpec, ApiError> {
    if wire.kind != "function" {
        return Err(ApiError::invalid(format!(
            "tools[{i}].type must be `function`"
        )));
    }
    Ok(ToolSpec {
        name: wire.function.name,
        description: wire.function.description.unwrap_or_default(),
        parameters: wire
            .function
            .parameters
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        side_effects: false,
    })
}

fn tool_choice(value: Value) -> Result<ToolChoice, ApiError> {
    match &value {
        Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
        Value::String(s) if s == "none" => Ok(ToolChoice::None),
        Value::String(s) if s == "required" => Ok(ToolChoice::Required),
        Value::Object(_) if value["type"] == "function" => value["function"]["name"]
            .as_str()
            .map(|name| ToolChoice::Function(name.to_owned()))
            .ok_or_else(|| ApiError::invalid("tool_choice.function.name must be a string")),
        _ => Err(ApiError::invalid(
            "tool_choice must be `auto`, `none`, `required` or \
             {\"type\":\"function\",\"function\":{\"name\":…}}",
        )),
    }
}

// ----- responses -----------------------------------------------------------------------

/// OpenAI's `finish_reason` for an answer: `tool_calls` when it has any, else the
/// server's reason when OpenAI knows it, else `stop`.
fn finish_reason(response: &ChatResponse) -> &str {
    if !response.tool_calls.is_empty() {
        return "tool_calls";
    }
    match response.finish_reason.as_deref() {
        Some(reason @ ("stop" | "length" | "content_filter")) => reason,
        _ => "stop",
    }
}

#[derive(Debug, Serialize)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

/// Usage as OpenAI shapes it; zeros when the server reported none.
fn usage(usage: Option<Usage>) -> WireUsage {
    let usage = usage.unwrap_or_default();
    WireUsage {
        prompt_tokens: usage.input_tokens,
        completion_tokens: usage.output_tokens,
        total_tokens: usage.input_tokens.saturating_add(usage.output_tokens),
    }
}

fn tool_calls_json(calls: &[ToolCall], with_index: bool) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let mut wire = json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            });
            if with_index {
                wire["index"] = json!(index);
            }
            wire
        })
        .collect()
}

/// The `chat.completion` document of a finished call.
pub(crate) fn completion(reply: &GatewayReply, created: u64) -> Value {
    let response = &reply.response;
    let mut message = json!({
        "role": "assistant",
        "content": if response.content.is_empty() && !response.tool_calls.is_empty() {
            Value::Null
        } else {
            Value::String(response.content.clone())
        },
    });
    if !response.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls_json(&response.tool_calls, false));
    }
    let mut document = json!({
        "id": reply.id.as_str(),
        "object": "chat.completion",
        "created": created,
        "model": response.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(response),
            "logprobs": null,
        }],
        "usage": usage(response.usage),
    });
    secret::current().redact_json(&mut document);
    document
}

/// Builds the `chat.completion.chunk`s of one streamed call, each framed as an SSE
/// `data:` line.
pub(crate) struct Chunks {
    head: String,
    /// Send a last chunk with the usage (`stream_options.include_usage`).
    include_usage: bool,
}

impl Chunks {
    /// Chunks for the call `id` of `model`, created at `created` (Unix seconds).
    pub(crate) fn new(id: &str, model: &str, created: u64, include_usage: bool) -> Self {
        let head = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        })
        .to_string();
        Self {
            head,
            include_usage,
        }
    }

    /// A chunk with these choices (and usage) as one SSE frame.
    fn frame(&self, choices: Value, usage: Option<WireUsage>) -> String {
        // The fixed part is serialized once; only the tail is built per chunk.
        let mut choices = choices;
        // Text and tool-call arguments are the model's words: they may echo a secret.
        secret::current().redact_json(&mut choices);
        let mut tail = json!({"choices": choices});
        if let Some(usage) = usage {
            tail["usage"] = json!(usage);
        }
        let tail = tail.to_string();
        let mut frame = String::with_capacity(self.head.len() + tail.len() + 10);
        frame.push_str("data: ");
        frame.push_str(&self.head[..self.head.len() - 1]);
        frame.push(',');
        frame.push_str(&tail[1..]);
        frame.push_str("\n\n");
        frame
    }
}

impl StreamFrames for Chunks {
    /// The first chunk: the assistant's role.
    fn start(&mut self) -> String {
        self.frame(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
            None,
        )
    }

    /// A text delta.
    fn text(&mut self, text: &str) -> String {
        self.frame(
            json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]),
            None,
        )
    }

    /// The end of a finished call: its tool calls (whole, one chunk), the finish
    /// reason, the usage when asked, and `[DONE]`.
    fn end(&mut self, reply: &GatewayReply) -> String {
        let response = &reply.response;
        let mut out = String::new();
        if !response.tool_calls.is_empty() {
            out.push_str(&self.frame(
                json!([{
                    "index": 0,
                    "delta": {"tool_calls": tool_calls_json(&response.tool_calls, true)},
                    "finish_reason": null,
                }]),
                None,
            ));
        }
        out.push_str(&self.frame(
            json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(response)}]),
            None,
        ));
        if self.include_usage {
            out.push_str(&self.frame(json!([]), Some(usage(response.usage))));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The error envelope as one `data:` frame (OpenAI clients raise it as an API
    /// error); no `[DONE]` follows.
    fn error(&mut self, error: &ApiError) -> String {
        format!("data: {}\n\n", error.envelope())
    }
}

/// The `list` document of `GET /openai/v1/models`.
pub(crate) fn model_list(models: &[ModelInfo], owner: &str) -> Value {
    json!({
        "object": "list",
        "data": models
            .iter()
            .map(|m| json!({"id": m.id, "object": "model", "created": 0, "owned_by": owner}))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<Parsed, String> {
        let request: CompletionRequest = serde_json::from_value(body).map_err(|e| e.to_string())?;
        request.parse().map_err(|e| e.message().to_owned())
    }

    #[test]
    fn a_full_request_becomes_a_chat_request() {
        let parsed = parse(json!({
            "model": "m",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "temperature": 0.2,
            "max_tokens": 5,
            "max_completion_tokens": 7,
            "stream": true,
            "stream_options": {"include_usage": true},
            "user": "extra fields are ignored",
            "seed": 1,
        }))
        .expect("valid");
        let r = &parsed.request;
        assert!(parsed.stream && parsed.include_usage);
        assert_eq!(r.messages[0], ChatMessage::system("be brief"));
        assert_eq!(r.messages[1], ChatMessage::user("ab"));
        assert_eq!(r.messages[2].tool_calls[0].name, "f");
        assert_eq!(r.messages[3], ChatMessage::tool_result("c1", "42"));
        assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
        assert_eq!(r.max_tokens, Some(7), "max_completion_tokens wins");
        assert_eq!(r.temperature, Some(0.2));
    }

    #[test]
    fn wrong_shapes_are_refused_naming_the_field() {
        let user = json!([{"role": "user", "content": "hi"}]);
        for (body, needle) in [
            (json!({"model": 1, "messages": user}), "invalid type"),
            (json!({"model": "m"}), "messages"),
            (json!({"model": "m", "messages": "hi"}), "invalid type"),
            (
                json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
                "robot",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": 5}]}),
                "messages[0].content",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user"}]}),
                "messages[0].content is required",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
                "only text",
            ),
            (
                json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
                "tool_call_id",
            ),
            (
                json!({"model": "m", "messages": [{"role": "assistant"}]}),
                "content or tool_calls",
            ),
            (
                json!({"model": "m", "messages": user, "tools": [{"type": "web", "function": {"name": "f"}}]}),
                "tools[0].type",
            ),
            (
                json!({"model": "m", "messages": user, "tool_choice": "always"}),
                "tool_choice",
            ),
            (
                json!({"model": "m", "messages": user, "temperature": "hot"}),
                "invalid type",
            ),
            (
                json!({"model": "m", "messages": user, "max_tokens": -1}),
                "invalid value",
            ),
            (
                json!({"model": "m", "messages": user, "stream": "yes"}),
                "invalid type",
            ),
            (json!({"model": "m", "messages": user, "n": 2}), "`n`"),
        ] {
            let error = parse(body.clone()).expect_err(&body.to_string());
            assert!(error.contains(needle), "{body}: {error}");
        }
    }

    #[test]
    fn chunks_are_openai_chunks() {
        let mut chunks = Chunks::new("chatcmpl-1", "m", 7, true);
        let frame = chunks.text("hé\"llo");
        let data: Value =
            serde_json::from_str(frame.strip_prefix("data: ").expect("data").trim()).expect("json");
        assert_eq!(data["object"], "chat.completion.chunk");
        assert_eq!(data["id"], "chatcmpl-1");
        assert_eq!(data["created"], 7);
        assert_eq!(data["choices"][0]["delta"]["content"], "hé\"llo");
        let end = chunks.end(&GatewayReply {
            id: agentplane_core::CompletionId::new(),
            response: ChatResponse {
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                }],
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                }),
                ..ChatResponse::default()
            },
        });
        let frames: Vec<&str> = end.split("\n\n").filter(|f| !f.is_empty()).collect();
        assert_eq!(frames.len(), 4, "{end}");
        assert!(frames[0].contains("\"tool_calls\":[{"));
        assert!(frames[1].contains("\"finish_reason\":\"tool_calls\""));
        assert!(frames[2].contains("\"total_tokens\":7"));
        assert_eq!(frames[3], "data: [DONE]");
    }
}
