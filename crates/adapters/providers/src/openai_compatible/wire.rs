//! The OpenAI chat-completions wire format: the request body we write, and the
//! lenient reading of a `chat.completion` or a stream of `chat.completion.chunk`s.
//!
//! Pure functions and one accumulator; no HTTP here. Reading never panics and never
//! trusts a field to exist: a missing or null field takes its default, and only what
//! cannot be an answer at all (not JSON, no choice) is a `Protocol` error.

use std::collections::BTreeMap;

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice, Usage};
use agentplane_engine::ports::ModelError;
use serde_json::{Value, json};

use super::failure;

/// At most this many tool calls in one answer; more is a broken or hostile server.
const MAX_TOOL_CALLS: usize = 256;

/// The body of `POST /chat/completions`.
pub(crate) fn request_body(request: &ChatRequest, stream: bool) -> Value {
    let mut body = json!({
        "model": request.model,
        "messages": request.messages.iter().map(message_json).collect::<Vec<_>>(),
        "stream": stream,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = crate::exchange::temperature(temperature);
    }
    if let Some(max_tokens) = request.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    if let Some(choice) = &request.tool_choice {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Function(name) => {
                json!({"type": "function", "function": {"name": name}})
            }
        };
    }
    if let Some(schema) = &request.response_schema {
        // llama.cpp, vLLM and OpenAI turn this into a grammar the answer must follow.
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema},
        });
    }
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn message_json(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut wire = json!({"role": role});
    match message.role {
        Role::Assistant if !message.tool_calls.is_empty() => {
            // OpenAI's shape: content may be null beside tool calls.
            wire["content"] = json!(message.content);
            wire["tool_calls"] = message
                .tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
        }
        Role::Tool => {
            wire["content"] = json!(message.content.as_deref().unwrap_or(""));
            wire["tool_call_id"] = json!(message.tool_call_id.as_deref().unwrap_or(""));
        }
        _ => wire["content"] = json!(message.content.as_deref().unwrap_or("")),
    }
    wire
}

/// Parses a JSON text, or says which part of the answer was not JSON.
fn parse_json(text: &[u8], what: &str) -> Result<Value, ModelError> {
    serde_json::from_slice(text).map_err(|e| {
        let start = String::from_utf8_lossy(&text[..text.len().min(120)]).into_owned();
        ModelError::Protocol(format!(
            "{what} is not valid JSON ({e}); it starts with {start:?}"
        ))
    })
}

/// An error object the server put inside a 200 answer (vLLM and Ollama do mid-stream).
fn embedded_error(value: &Value, model: &str) -> Option<ModelError> {
    let error = value.get("error").filter(|e| !e.is_null())?;
    let message = error["message"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    if failure::says_no_tool_support(&message) {
        return Some(ModelError::NoToolSupport {
            model: model.to_owned(),
        });
    }
    Some(ModelError::Protocol(format!(
        "the server reported an error inside its answer: {}",
        failure::shorten(&message)
    )))
}

fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|u| u.is_object())?;
    let count = |names: &[&str]| names.iter().find_map(|n| usage[*n].as_u64());
    let input = count(&["prompt_tokens", "input_tokens"]);
    let output = count(&["completion_tokens", "output_tokens"]);
    if input.is_none() && output.is_none() {
        return None;
    }
    Some(Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
    })
}

fn finish_reason_of(choice: &Value) -> Option<String> {
    choice["finish_reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
}

/// Message content as text: a string, null, or an array of `{type: text, text}` parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or_else(|| p.as_str()))
            .collect(),
        _ => String::new(),
    }
}

/// Tool-call arguments as raw text: servers send a string; a few send an object.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn non_empty(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Reads a whole (non-streamed) `chat.completion`.
pub(crate) fn parse_completion(body: &[u8], model: &str) -> Result<ChatResponse, ModelError> {
    let value = parse_json(body, "the answer")?;
    if let Some(error) = embedded_error(&value, model) {
        return Err(error);
    }
    let choice = value["choices"]
        .as_array()
        .and_then(|choices| choices.first())
        .ok_or_else(|| ModelError::Protocol("the answer has no `choices`".to_owned()))?;
    let message = &choice["message"];
    let calls = message["tool_calls"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if calls.len() > MAX_TOOL_CALLS {
        return Err(too_many_calls());
    }
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(n, call)| ToolCall {
            id: non_empty(&call["id"]).unwrap_or_else(|| format!("call_{n}")),
            name: call["function"]["name"].as_str().unwrap_or("").to_owned(),
            arguments: arguments_text(&call["function"]["arguments"]),
        })
        .collect();
    Ok(ChatResponse {
        content: content_text(&message["content"]),
        tool_calls,
        finish_reason: finish_reason_of(choice),
        usage: usage_of(&value),
        model: non_empty(&value["model"]).unwrap_or_else(|| model.to_owned()),
    })
}

fn too_many_calls() -> ModelError {
    ModelError::Protocol(format!(
        "the answer has more than {MAX_TOOL_CALLS} tool calls"
    ))
}

/// A tool call being assembled from stream deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Joins the chunks of a streamed answer.
#[derive(Debug)]
pub(crate) struct StreamAssembly {
    requested_model: String,
    model: Option<String>,
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    /// Where a delta without `index` goes (servers that omit it send calls in order).
    last_index: Option<u64>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl StreamAssembly {
    /// An empty answer to a request for `model`.
    pub(crate) fn new(model: &str) -> Self {
        Self {
            requested_model: model.to_owned(),
            model: None,
            content: String::new(),
            calls: BTreeMap::new(),
            last_index: None,
            finish_reason: None,
            usage: None,
            done: false,
        }
    }

    /// Whether `[DONE]` arrived: nothing after it matters.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Applies one event's data; returns the text it added, to pass on at once.
    pub(crate) fn apply(&mut self, data: &str) -> Result<Option<String>, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        if data.is_empty() {
            return Ok(None);
        }
        let chunk = parse_json(data.as_bytes(), "a stream chunk")?;
        if let Some(error) = embedded_error(&chunk, &self.requested_model) {
            return Err(error);
        }
        if let Some(model) = non_empty(&chunk["model"]) {
            self.model = Some(model);
        }
        if let Some(usage) = usage_of(&chunk) {
            self.usage = Some(usage);
        }
        // No `choices` (or an empty list, as in the usage chunk) carries nothing; any
        // other shape is a server speaking something else, not an empty answer.
        let choices = match &chunk["choices"] {
            Value::Null => return Ok(None),
            Value::Array(choices) => choices,
            other => {
                return Err(ModelError::Protocol(format!(
                    "a stream chunk's `choices` is not a list: {}",
                    failure::shorten(&other.to_string())
                )));
            }
        };
        let Some(choice) = choices.first() else {
            return Ok(None);
        };
        if let Some(reason) = finish_reason_of(choice) {
            self.finish_reason = Some(reason);
        }
        let delta = &choice["delta"];
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            self.apply_call_delta(call)?;
        }
        let text = content_text(&delta["content"]);
        if text.is_empty() {
            return Ok(None);
        }
        self.content.push_str(&text);
        Ok(Some(text))
    }

    fn apply_call_delta(&mut self, delta: &Value) -> Result<(), ModelError> {
        let id = non_empty(&delta["id"]);
        let index = match delta["index"].as_u64() {
            Some(index) => index,
            // No index: a new id starts a new call, anything else continues the last.
            None => match (self.last_index, &id) {
                (None, _) => 0,
                (Some(last), Some(id))
                    if self.calls.get(&last).and_then(|c| c.id.as_ref()) != Some(id) =>
                {
                    last + 1
                }
                (Some(last), _) => last,
            },
        };
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_TOOL_CALLS {
            return Err(too_many_calls());
        }
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if call.id.is_none() {
            call.id = id;
        }
        if call.name.is_empty()
            && let Some(name) = non_empty(&delta["function"]["name"])
        {
            call.name = name;
        }
        call.arguments
            .push_str(&arguments_text(&delta["function"]["arguments"]));
        Ok(())
    }

    /// The assembled answer. A stream that ended without `[DONE]` is accepted only if
    /// it said how it finished; otherwise it was cut and is a `Protocol` error.
    pub(crate) fn finish(self) -> Result<ChatResponse, ModelError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::Protocol(
                "the answer stream ended before it was complete (no finish_reason and no \
                 [DONE]); the server may have crashed or cut the connection"
                    .to_owned(),
            ));
        }
        let tool_calls = self
            .calls
            .into_values()
            .enumerate()
            .map(|(n, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{n}")),
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        Ok(ChatResponse {
            content: self.content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model.unwrap_or(self.requested_model),
        })
    }
}

impl crate::exchange::Assembly for StreamAssembly {
    fn apply(&mut self, data: &str) -> Result<Option<String>, ModelError> {
        StreamAssembly::apply(self, data)
    }

    fn is_done(&self) -> bool {
        StreamAssembly::is_done(self)
    }

    fn finish(self) -> Result<ChatResponse, ModelError> {
        StreamAssembly::finish(self)
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::ToolSpec;

    use super::*;

    #[test]
    fn request_body_speaks_openai() {
        let request = ChatRequest {
            model: "m".to_owned(),
            messages: vec![
                ChatMessage::system("s"),
                ChatMessage::user("u"),
                ChatMessage::assistant(
                    None,
                    vec![ToolCall {
                        id: "c1".to_owned(),
                        name: "read".to_owned(),
                        arguments: "{}".to_owned(),
                    }],
                ),
                ChatMessage::tool_result("c1", "out"),
                ChatMessage::assistant(Some("done".to_owned()), vec![]),
            ],
            tools: vec![ToolSpec {
                name: "read".to_owned(),
                description: "reads".to_owned(),
                parameters: json!({"type": "object"}),
                side_effects: false,
            }],
            temperature: Some(0.2),
            max_tokens: Some(64),
            tool_choice: Some(ToolChoice::Function("read".to_owned())),
            response_schema: Some(json!({"const": 1})),
        };
        let body = request_body(&request, true);
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][2]["tool_calls"][0]["type"], "function");
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "content": "out", "tool_call_id": "c1"})
        );
        assert_eq!(
            body["messages"][4],
            json!({"role": "assistant", "content": "done"})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "read");
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["temperature"], json!(0.2), "the decimal configured");
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(
            body["response_format"]["json_schema"]["schema"],
            json!({"const": 1})
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "read"}})
        );

        let plain = ChatRequest {
            tools: vec![],
            temperature: None,
            max_tokens: None,
            tool_choice: None,
            response_schema: None,
            ..request
        };
        let body = request_body(&plain, false);
        assert!(body.get("response_format").is_none());
        assert!(body.get("tools").is_none());
        assert!(body.get("stream_options").is_none());
        assert!(body.get("temperature").is_none());
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("tool_choice").is_none());
        assert_eq!(body["stream"], false);
    }

    #[test]
    fn completion_is_read_leniently() {
        let body = br#"{"choices":[{"message":{"content":null,"tool_calls":[
            {"function":{"name":"a","arguments":{"x":1}}},
            {"id":"","function":{"name":"b"}}]},"finish_reason":""}]}"#;
        let response = parse_completion(body, "asked").expect("parsed");
        assert_eq!(response.content, "");
        assert_eq!(response.tool_calls[0].id, "call_0");
        assert_eq!(response.tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(response.tool_calls[1].id, "call_1");
        assert_eq!(response.tool_calls[1].arguments, "");
        assert_eq!(response.finish_reason, None);
        assert_eq!(response.usage, None);
        assert_eq!(response.model, "asked");

        let parts = br#"{"model":"real","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}],"usage":{"prompt_tokens":4}}"#;
        let response = parse_completion(parts, "asked").expect("parsed");
        assert_eq!(response.content, "ab");
        assert_eq!(response.model, "real");
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 4,
                output_tokens: 0
            })
        );
    }

    #[test]
    fn hostile_completions_are_protocol_errors() {
        for body in [
            &b""[..],
            b"{",
            b"[]",
            b"null",
            b"{\"choices\":[]}",
            b"\xff\xfe",
        ] {
            let err = parse_completion(body, "m").expect_err("refused");
            assert!(matches!(err, ModelError::Protocol(_)), "{err:?}");
        }
        let many: Vec<Value> = (0..300)
            .map(|_| json!({"function": {"name": "a"}}))
            .collect();
        let body = json!({"choices": [{"message": {"tool_calls": many}}]}).to_string();
        assert!(matches!(
            parse_completion(body.as_bytes(), "m"),
            Err(ModelError::Protocol(_))
        ));
        let err = parse_completion(
            br#"{"error":{"message":"model x does not support tools"}}"#,
            "x",
        )
        .expect_err("error");
        assert_eq!(
            err,
            ModelError::NoToolSupport {
                model: "x".to_owned()
            }
        );
    }

    #[test]
    fn deltas_without_index_are_grouped_by_id() {
        let mut assembly = StreamAssembly::new("m");
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            assert_eq!(assembly.apply(data).expect("chunk"), None);
        }
        let response = assembly.finish().expect("finished");
        assert_eq!(response.tool_calls.len(), 2);
        assert_eq!(response.tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(response.tool_calls[1].name, "g");
    }

    #[test]
    fn choices_of_another_shape_are_a_protocol_error_not_an_empty_answer() {
        let mut assembly = StreamAssembly::new("m");
        let error = assembly.apply(r#"{"choices": 5}"#).expect_err("not a list");
        assert!(matches!(error, ModelError::Protocol(_)), "{error:?}");
        // Absent or empty `choices` (the usage chunk) still carry nothing.
        let mut assembly = StreamAssembly::new("m");
        assert_eq!(assembly.apply(r#"{"id":"x"}"#).expect("no choices"), None);
        assert_eq!(assembly.apply(r#"{"choices":[]}"#).expect("empty"), None);
    }

    #[test]
    fn stream_without_end_is_a_protocol_error() {
        let mut assembly = StreamAssembly::new("m");
        assert_eq!(
            assembly
                .apply(r#"{"choices":[{"delta":{"content":"hi"}}]}"#)
                .expect("chunk"),
            Some("hi".to_owned())
        );
        assert!(matches!(assembly.finish(), Err(ModelError::Protocol(_))));
    }

    #[test]
    fn too_many_streamed_calls_are_refused() {
        let mut assembly = StreamAssembly::new("m");
        let mut result = Ok(None);
        for index in 0..=MAX_TOOL_CALLS {
            let data = json!({"choices": [{"delta": {"tool_calls": [{"index": index * 1000}]}}]});
            result = assembly.apply(&data.to_string());
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(ModelError::Protocol(_))));
    }
}
