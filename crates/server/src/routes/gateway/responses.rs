//! OpenAI's Responses API as the gateway speaks it (`POST /openai/v1/responses`): the
//! request Codex CLI, the Agents SDK and `client.responses.create` send, and the
//! `response` document or the stream of `response.created` … `response.completed`
//! events they get back. Translated to the upstream's chat completions.
//!
//! Read the way OpenAI reads it: unknown fields are ignored (`include`, `reasoning`,
//! `text`, `metadata`), a known field of the wrong shape is a 400 naming it. `input` is a string or items: messages (text parts), `function_call` and
//! `function_call_output`; `reasoning` items a client sends back are dropped (the
//! upstream never made them); images, files and built-in tools (`web_search`,
//! `file_search`, `computer_use`, `local_shell`, custom tools) are refused, as the
//! gateway runs no tool. An answer is kept unless `store` is false, and a later call
//! may name it as `previous_response_id` to send only what is new (the engine's
//! `gateway::kept`: under the caller's client id, 30 days). Every frame passes the
//! process-wide secret redactor.

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolChoice, ToolSpec};
use agentplane_engine::gateway::GatewayReply;
use serde::Deserialize;
use serde_json::{Value, json};

use super::frames::{self, StreamFrames};
use crate::error::ApiError;

// ----- requests ------------------------------------------------------------------------

/// `POST /openai/v1/responses`.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponsesRequest {
    model: String,
    input: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    store: Option<bool>,
}

/// The longest `previous_response_id` looked up.
const MAX_RESPONSE_ID: usize = 128;

/// A parsed request: the model call, whether to stream it, and what the answer
/// repeats of the request.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub request: ChatRequest,
    pub stream: bool,
    pub echo: Echo,
    /// The answer this call follows (its completion id), from `previous_response_id`.
    pub previous: Option<String>,
    /// Where its conversation goes in `request.messages`: after the `instructions`.
    pub skip: usize,
    /// Whether the answer is to be kept (`store`, true unless false, as OpenAI has it).
    pub keep: bool,
}

/// What a `response` document repeats of its request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    instructions: Option<String>,
    tools: Vec<Value>,
    tool_choice: Value,
    temperature: Option<f32>,
    max_output_tokens: Option<u32>,
    pub previous_response_id: Option<String>,
    /// Whether the answer is kept: set once the gateway said.
    pub store: bool,
}

/// The completion id of a response id the gateway gave (`resp_…`); an id it never gave
/// maps to one that is never found.
fn completion_of(response_id: &str) -> String {
    format!(
        "chatcmpl-{}",
        response_id.strip_prefix("resp_").unwrap_or(response_id)
    )
}

impl ResponsesRequest {
    /// The provider-neutral request, or a 400 naming the field that cannot be one.
    pub(crate) fn parse(self) -> Result<Parsed, ApiError> {
        if let Some(id) = &self.previous_response_id
            && (id.is_empty() || id.len() > MAX_RESPONSE_ID)
        {
            return Err(ApiError::invalid(format!(
                "previous_response_id must be a response id of 1 to {MAX_RESPONSE_ID} bytes"
            )));
        }
        let mut messages = Vec::new();
        if let Some(instructions) = &self.instructions
            && !instructions.is_empty()
        {
            messages.push(ChatMessage::system(instructions.clone()));
        }
        let skip = messages.len();
        match self.input {
            Value::String(text) => messages.push(ChatMessage::user(text)),
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    push_item(&mut messages, i, item)?;
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    "input must be a string or an array of input items",
                ));
            }
        }
        let wire_tools = self.tools.unwrap_or_default();
        let tools = wire_tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(i, t))
            .collect::<Result<Vec<_>, _>>()?;
        let tool_choice = self.tool_choice.clone().map(tool_choice).transpose()?;
        Ok(Parsed {
            request: ChatRequest {
                model: self.model,
                messages,
                tools,
                temperature: self.temperature,
                max_tokens: self.max_output_tokens,
                tool_choice,
                response_schema: None,
            },
            stream: self.stream.unwrap_or(false),
            previous: self.previous_response_id.as_deref().map(completion_of),
            skip,
            keep: self.store.unwrap_or(true),
            echo: Echo {
                instructions: self.instructions,
                tools: wire_tools,
                tool_choice: self.tool_choice.unwrap_or_else(|| json!("auto")),
                temperature: self.temperature,
                max_output_tokens: self.max_output_tokens,
                previous_response_id: self.previous_response_id,
                store: false,
            },
        })
    }
}

/// One input item as chat messages. Consecutive `function_call` items are one
/// assistant message with several calls, as chat completions has them.
fn push_item(out: &mut Vec<ChatMessage>, i: usize, item: Value) -> Result<(), ApiError> {
    let at = |field: &str| format!("input[{i}].{field}");
    let string = |field: &str| -> Result<String, ApiError> {
        item[field]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::invalid(format!("{} must be a string", at(field))))
    };
    let kind = match &item["type"] {
        Value::Null => "message",
        Value::String(kind) => kind.as_str(),
        _ => {
            return Err(ApiError::invalid(format!(
                "{} must be a string",
                at("type")
            )));
        }
    };
    match kind {
        "message" => {
            let text = content_text(&item["content"])
                .map_err(|m| ApiError::invalid(format!("{}: {m}", at("content"))))?;
            let message = match item["role"].as_str() {
                Some("user") => ChatMessage::user(text),
                Some("system" | "developer") => ChatMessage::system(text),
                Some("assistant") => ChatMessage::assistant(Some(text), Vec::new()),
                _ => {
                    return Err(ApiError::invalid(format!(
                        "{} must be `user`, `assistant`, `system` or `developer`",
                        at("role")
                    )));
                }
            };
            out.push(message);
        }
        "function_call" => {
            let call = ToolCall {
                id: string("call_id")?,
                name: string("name")?,
                arguments: string("arguments")?,
            };
            match out.last_mut() {
                Some(last) if last.role == agentplane_core::Role::Assistant => {
                    last.tool_calls.push(call);
                }
                _ => out.push(ChatMessage::assistant(None, vec![call])),
            }
        }
        "function_call_output" => {
            let output = match &item["output"] {
                Value::String(text) => text.clone(),
                parts @ Value::Array(_) => content_text(parts)
                    .map_err(|m| ApiError::invalid(format!("{}: {m}", at("output"))))?,
                _ => {
                    return Err(ApiError::invalid(format!(
                        "{} must be a string or text parts",
                        at("output")
                    )));
                }
            };
            out.push(ChatMessage::tool_result(string("call_id")?, output));
        }
        "reasoning" => {}
        other => {
            return Err(ApiError::invalid(format!(
                "{}: items of type `{other}` are not accepted; the gateway takes \
                 message, function_call and function_call_output",
                at("type")
            )));
        }
    }
    Ok(())
}

/// A string, or text parts (`input_text`, `output_text`, `text`) joined.
fn content_text(value: &Value) -> Result<String, String> {
    super::chat::text_parts(value, &["input_text", "output_text", "text"])
}

fn tool(i: usize, wire: &Value) -> Result<ToolSpec, ApiError> {
    match wire["type"].as_str() {
        Some("function") => {}
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "tools[{i}].type `{other}` is a built-in tool; the gateway runs no tool, so \
                 only `function` tools are offered (Codex: `web_search = \"disabled\"` and \
                 `[features] multi_agent = false` send none)"
            )));
        }
        None => {
            return Err(ApiError::invalid(format!(
                "tools[{i}].type must be a string"
            )));
        }
    }
    let Some(name) = wire["name"].as_str() else {
        return Err(ApiError::invalid(format!(
            "tools[{i}].name must be a string"
        )));
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: wire["description"].as_str().unwrap_or_default().to_owned(),
        parameters: match &wire["parameters"] {
            Value::Null => json!({"type": "object", "properties": {}}),
            parameters => parameters.clone(),
        },
        side_effects: false,
    })
}

fn tool_choice(value: Value) -> Result<ToolChoice, ApiError> {
    match &value {
        Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
        Value::String(s) if s == "none" => Ok(ToolChoice::None),
        Value::String(s) if s == "required" => Ok(ToolChoice::Required),
        Value::Object(_) if value["type"] == "function" => value["name"]
            .as_str()
            .map(|name| ToolChoice::Function(name.to_owned()))
            .ok_or_else(|| ApiError::invalid("tool_choice.name must be a string")),
        _ => Err(ApiError::invalid(
            "tool_choice must be `auto`, `none`, `required` or {\"type\":\"function\",\"name\":…}",
        )),
    }
}

// ----- responses -----------------------------------------------------------------------

/// The ids of a response's output items, derived from its own id.
fn message_id(id: &str) -> String {
    format!("msg_{}", id.trim_start_matches("chatcmpl-"))
}

fn call_item_id(id: &str, n: usize) -> String {
    format!("fc_{}_{n}", id.trim_start_matches("chatcmpl-"))
}

/// The response id the client sees for a gateway call (`resp_…`).
pub(crate) fn response_id(id: &str) -> String {
    format!("resp_{}", id.trim_start_matches("chatcmpl-"))
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": message_id(id), "status": status, "role": "assistant",
           "content": content})
}

fn call_item(id: &str, n: usize, call: &ToolCall, arguments: &str, status: &str) -> Value {
    json!({"type": "function_call", "id": call_item_id(id, n), "call_id": call.id,
           "name": call.name, "arguments": arguments, "status": status})
}

/// The output items of an answer: its text (if any), then each call.
fn output(id: &str, response: &ChatResponse) -> Vec<Value> {
    let mut items = Vec::new();
    if !response.content.is_empty() {
        items.push(message_item(id, &response.content, "completed"));
    }
    for (n, call) in response.tool_calls.iter().enumerate() {
        items.push(call_item(id, n, call, &call.arguments, "completed"));
    }
    items
}

fn usage(response: &ChatResponse) -> Value {
    let usage = response.usage.unwrap_or_default();
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens.saturating_add(usage.output_tokens),
    })
}

/// A `response` document: `status` and, once answered, its output and usage.
fn document(
    id: &str,
    model: &str,
    created: u64,
    echo: &Echo,
    answered: Option<&ChatResponse>,
) -> Value {
    let (status, output, usage, incomplete) = match answered {
        None => ("in_progress", json!([]), Value::Null, Value::Null),
        Some(response) => {
            let cut = response.finish_reason.as_deref() == Some("length")
                && response.tool_calls.is_empty();
            (
                if cut { "incomplete" } else { "completed" },
                json!(output(id, response)),
                usage(response),
                if cut {
                    json!({"reason": "max_output_tokens"})
                } else {
                    Value::Null
                },
            )
        }
    };
    json!({
        "id": response_id(id),
        "object": "response",
        "created_at": created,
        "status": status,
        "model": answered.map_or(model, |r| r.model.as_str()),
        "output": output,
        "usage": usage,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": echo.instructions,
        "tools": echo.tools,
        "tool_choice": echo.tool_choice,
        "parallel_tool_calls": true,
        "temperature": echo.temperature,
        "top_p": null,
        "max_output_tokens": echo.max_output_tokens,
        "previous_response_id": echo.previous_response_id,
        "store": echo.store,
        "truncation": "disabled",
        "text": {"format": {"type": "text"}},
        "metadata": {},
    })
}

/// The `response` document of a finished call.
pub(crate) fn response(reply: &GatewayReply, created: u64, echo: &Echo) -> Value {
    let mut document = document(
        reply.id.as_str(),
        &reply.response.model,
        created,
        echo,
        Some(&reply.response),
    );
    agentplane_core::secret::current().redact_json(&mut document);
    document
}

/// The events of one streamed call, numbered as the API numbers them.
pub(crate) struct ResponseEvents {
    id: String,
    model: String,
    created: u64,
    echo: Echo,
    sequence: u64,
    /// The message item is open (its text streams).
    in_text: bool,
    /// The index of the next output item.
    next: usize,
}

impl ResponseEvents {
    pub(crate) fn new(id: &str, model: &str, created: u64, echo: Echo) -> Self {
        Self {
            id: id.to_owned(),
            model: model.to_owned(),
            created,
            echo,
            sequence: 0,
            in_text: false,
            next: 0,
        }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> String {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        frames::event(kind, data)
    }
}

impl StreamFrames for ResponseEvents {
    fn start(&mut self) -> String {
        let response = document(&self.id, &self.model, self.created, &self.echo, None);
        let mut out = self.event("response.created", json!({"response": response}));
        out.push_str(&self.event("response.in_progress", json!({"response": response})));
        out
    }

    fn text(&mut self, text: &str) -> String {
        let mut out = String::new();
        let item_id = message_id(&self.id);
        if !self.in_text {
            self.in_text = true;
            self.next += 1;
            let item = message_item(&self.id, "", "in_progress");
            out.push_str(&self.event(
                "response.output_item.added",
                json!({"output_index": 0, "item": item}),
            ));
            out.push_str(&self.event(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ));
        }
        out.push_str(&self.event(
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text,
                   "logprobs": []}),
        ));
        out
    }

    fn end(&mut self, reply: &GatewayReply) -> String {
        let response = &reply.response;
        let mut out = String::new();
        let item_id = message_id(&self.id);
        if self.in_text {
            let text = &response.content;
            out.push_str(&self.event(
                "response.output_text.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": text,
                       "logprobs": []}),
            ));
            out.push_str(&self.event(
                "response.content_part.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": text, "annotations": []}}),
            ));
            let item = message_item(&self.id, text, "completed");
            out.push_str(&self.event(
                "response.output_item.done",
                json!({"output_index": 0, "item": item}),
            ));
        }
        for (n, call) in response.tool_calls.iter().enumerate() {
            let index = self.next;
            self.next += 1;
            let item_id = call_item_id(&self.id, n);
            let added = call_item(&self.id, n, call, "", "in_progress");
            out.push_str(&self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            ));
            out.push_str(&self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": call.arguments}),
            ));
            out.push_str(&self.event(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": call.arguments}),
            ));
            let done = call_item(&self.id, n, call, &call.arguments, "completed");
            out.push_str(&self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": done}),
            ));
        }
        let document = document(
            &self.id,
            &self.model,
            self.created,
            &self.echo,
            Some(response),
        );
        let kind = if document["status"] == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.push_str(&self.event(kind, json!({"response": document})));
        out
    }

    fn error(&mut self, error: &ApiError) -> String {
        let envelope = error.envelope();
        self.event(
            "error",
            json!({"code": envelope["error"]["code"], "message": envelope["error"]["message"],
                   "param": null, "error": envelope["error"]}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_core::{CompletionId, Role, Usage};

    fn parse(body: Value) -> Result<Parsed, String> {
        let request: ResponsesRequest = serde_json::from_value(body).map_err(|e| e.to_string())?;
        request.parse().map_err(|e| e.message().to_owned())
    }

    #[test]
    fn items_become_chat_messages() {
        let parsed = parse(json!({
            "model": "m",
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": "read a.txt"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"cat a.txt\"}"},
                {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "hello"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
            ],
            "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": false}],
            "tool_choice": {"type": "function", "name": "shell"},
            "max_output_tokens": 9,
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
        }))
        .expect("valid");
        let m = &parsed.request.messages;
        assert!(parsed.stream);
        assert_eq!(m[0], ChatMessage::system("be brief"));
        assert_eq!(m[1], ChatMessage::user("read a.txt"));
        assert_eq!(m[2].role, Role::Assistant);
        assert_eq!(m[2].tool_calls.len(), 2, "adjacent calls are one message");
        assert_eq!(m[3], ChatMessage::tool_result("c1", "hello"));
        assert_eq!(m[4].content.as_deref(), Some("done"));
        assert_eq!(parsed.request.max_tokens, Some(9));
        assert_eq!(
            parsed.request.tool_choice,
            Some(ToolChoice::Function("shell".into()))
        );
    }

    #[test]
    fn wrong_shapes_and_what_the_gateway_cannot_do_are_refused() {
        for (body, needle) in [
            (json!({"model": "m", "input": 3}), "input must be"),
            (
                json!({"model": "m", "input": "x", "previous_response_id": ""}),
                "previous_response_id",
            ),
            (
                json!({"model": "m", "input": "x", "previous_response_id": "r".repeat(129)}),
                "previous_response_id",
            ),
            (
                json!({"model": "m", "input": "x", "previous_response_id": 7}),
                "expected a string",
            ),
            (
                json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}),
                "input[0].role",
            ),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]}),
                "only text",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call", "name": "f"}]}),
                "input[0].call_id",
            ),
            (
                json!({"model": "m", "input": [{"type": "web_search_call"}]}),
                "`web_search_call`",
            ),
            (
                json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}),
                "built-in tool",
            ),
            (
                json!({"model": "m", "input": "x", "tools": [{"type": "function"}]}),
                "tools[0].name",
            ),
            (
                json!({"model": "m", "input": "x", "tool_choice": "always"}),
                "tool_choice",
            ),
        ] {
            let error = parse(body.clone()).expect_err(&body.to_string());
            assert!(error.contains(needle), "{body}: {error}");
        }
    }

    #[test]
    fn a_streamed_call_is_the_responses_event_sequence() {
        let mut events = ResponseEvents::new("chatcmpl-1", "m", 7, Echo::default());
        let mut all = events.start();
        all.push_str(&events.text("hi"));
        all.push_str(&events.end(&GatewayReply {
            id: CompletionId::new(),
            response: ChatResponse {
                content: "hi".into(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
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
        assert_eq!(kinds.first(), Some(&"response.created"));
        assert_eq!(kinds.last(), Some(&"response.completed"));
        assert!(kinds.contains(&"response.output_text.delta"));
        assert!(kinds.contains(&"response.function_call_arguments.done"));
        let sequence: Vec<u64> = all
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| {
                serde_json::from_str::<Value>(d).expect("json")["sequence_number"]
                    .as_u64()
                    .expect("n")
            })
            .collect();
        assert_eq!(sequence, (0..sequence.len() as u64).collect::<Vec<_>>());
        assert!(all.contains(r#""total_tokens":7"#), "{all}");
    }
}
