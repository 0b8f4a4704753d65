//! Anthropic's Messages API wire format: the request body we write, and the reading of
//! a whole `message` or of its SSE event stream (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`).
//!
//! Pure functions and one accumulator; no HTTP here. Reading never panics and never
//! trusts a field to exist. What cannot be an answer (not JSON, a stream that stops
//! before `message_stop`, an `error` event) is an error; unknown event and block types
//! are skipped, as Anthropic asks clients to do.

use std::collections::BTreeMap;

use agentplane_core::{ChatMessage, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice, Usage};
use agentplane_engine::ports::ModelError;
use serde_json::{Value, json};

use crate::openai_compatible::failure;

/// At most this many content blocks in one answer; more is a broken or hostile server.
const MAX_BLOCKS: usize = 256;

/// The body of `POST /messages`.
pub(crate) fn request_body(request: &ChatRequest, max_tokens: u32, stream: bool) -> Value {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref())
        .filter(|c| !c.is_empty())
        .collect();
    let mut body = json!({
        "model": request.model,
        // The caller's limit (every turn and gateway call sets one), at most the
        // provider's: a lower cap keeps a budget's reserved worst case an upper bound.
        "max_tokens": request.max_tokens.map_or(max_tokens, |asked| asked.min(max_tokens)),
        "messages": messages_json(&request.messages),
        "stream": stream,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = crate::exchange::temperature(temperature);
    }
    // Anthropic has no "none"; without tools there is nothing to choose anyway.
    if !request.tools.is_empty()
        && let Some(choice) = &request.tool_choice
    {
        body["tool_choice"] = match choice {
            ToolChoice::Auto | ToolChoice::None => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
        };
    }
    body
}

/// The conversation as Anthropic wants it: only `user` and `assistant` turns,
/// alternating, tool results as `tool_result` blocks of a user turn, tool calls as
/// `tool_use` blocks of an assistant turn. Consecutive messages of one side merge.
fn messages_json(messages: &[ChatMessage]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", text_block(message.content.as_deref())),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or(""),
                    "content": message.content.as_deref().unwrap_or(""),
                })],
            ),
            Role::Assistant => {
                let mut blocks = text_block(message.content.as_deref());
                blocks.extend(message.tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    })
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// A text block, or none for empty text (the API refuses empty text blocks).
fn text_block(text: Option<&str>) -> Vec<Value> {
    match text {
        Some(text) if !text.trim().is_empty() => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// `tool_use.input` must be an object: the model's arguments if they are one, else
/// empty (the engine already told the model its arguments were refused).
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

fn parse_json(text: &[u8], what: &str) -> Result<Value, ModelError> {
    serde_json::from_slice(text).map_err(|e| {
        let start = String::from_utf8_lossy(&text[..text.len().min(120)]).into_owned();
        ModelError::Protocol(format!(
            "{what} is not valid JSON ({e}); it starts with {start:?}"
        ))
    })
}

/// Anthropic's `error` object (in a 200 stream, or a whole body) as our error. Request
/// errors keep their meaning (no failover); overload and server errors are upstream.
pub(crate) fn error_of(error: &Value) -> ModelError {
    let kind = error["type"].as_str().unwrap_or("");
    let message = failure::shorten(error["message"].as_str().unwrap_or("(no message)"));
    let body = format!("{kind}: {message}");
    match kind {
        "invalid_request_error" => ModelError::Upstream { status: 400, body },
        "authentication_error" => ModelError::Upstream { status: 401, body },
        "permission_error" => ModelError::Upstream { status: 403, body },
        "not_found_error" => ModelError::Upstream { status: 404, body },
        "request_too_large" => ModelError::Upstream { status: 413, body },
        "rate_limit_error" => ModelError::RateLimited { body },
        _ => ModelError::Protocol(format!("the server reported an error: {body}")),
    }
}

fn usage_of(usage: &Value) -> (Option<u64>, Option<u64>) {
    (
        usage["input_tokens"].as_u64(),
        usage["output_tokens"].as_u64(),
    )
}

/// Anthropic's `stop_reason` in the OpenAI words the engine reads.
fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop".to_owned(),
        "tool_use" => "tool_calls".to_owned(),
        "max_tokens" => "length".to_owned(),
        other => other.to_owned(),
    }
}

fn non_empty(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Reads a whole (non-streamed) `message`.
pub(crate) fn parse_message(body: &[u8], model: &str) -> Result<ChatResponse, ModelError> {
    let value = parse_json(body, "the answer")?;
    if value["type"] == "error" {
        return Err(error_of(&value["error"]));
    }
    let blocks = value["content"]
        .as_array()
        .ok_or_else(|| ModelError::Protocol("the answer has no `content` array".to_owned()))?;
    if blocks.len() > MAX_BLOCKS {
        return Err(too_many_blocks());
    }
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => content.push_str(block["text"].as_str().unwrap_or("")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: non_empty(&block["id"]).unwrap_or_else(|| format!("call_{n}")),
                name: block["name"].as_str().unwrap_or("").to_owned(),
                arguments: match &block["input"] {
                    Value::Null => "{}".to_owned(),
                    input => input.to_string(),
                },
            }),
            _ => {}
        }
    }
    let (input, output) = usage_of(&value["usage"]);
    Ok(ChatResponse {
        content,
        tool_calls,
        finish_reason: value["stop_reason"].as_str().map(finish_reason),
        usage: (input.is_some() || output.is_some()).then(|| Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
        }),
        model: non_empty(&value["model"]).unwrap_or_else(|| model.to_owned()),
    })
}

fn too_many_blocks() -> ModelError {
    ModelError::Protocol(format!(
        "the answer has more than {MAX_BLOCKS} content blocks"
    ))
}

/// A content block being assembled from stream events.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// `input` of `content_block_start`, used when no `input_json_delta` came.
        start_input: String,
        json: String,
    },
    Other,
}

/// Joins the events of a streamed answer.
#[derive(Debug)]
pub(crate) struct StreamAssembly {
    requested_model: String,
    model: Option<String>,
    content: String,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    started: bool,
    done: bool,
}

impl StreamAssembly {
    /// An empty answer to a request for `model`.
    pub(crate) fn new(model: &str) -> Self {
        Self {
            requested_model: model.to_owned(),
            model: None,
            content: String::new(),
            blocks: BTreeMap::new(),
            stop_reason: None,
            input_tokens: None,
            output_tokens: None,
            started: false,
            done: false,
        }
    }

    /// Whether `message_stop` arrived: nothing after it matters.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Applies one event's data; returns the text it added, to pass on at once.
    pub(crate) fn apply(&mut self, data: &str) -> Result<Option<String>, ModelError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(None);
        }
        let event = parse_json(data.as_bytes(), "a stream event")?;
        match event["type"].as_str().unwrap_or("") {
            "message_start" => {
                let message = &event["message"];
                self.started = true;
                if let Some(model) = non_empty(&message["model"]) {
                    self.model = Some(model);
                }
                self.add_usage(&message["usage"]);
            }
            "content_block_start" => {
                let index = self.index_of(&event)?;
                if !self.blocks.contains_key(&index) && self.blocks.len() >= MAX_BLOCKS {
                    return Err(too_many_blocks());
                }
                let block = &event["content_block"];
                let block = match block["type"].as_str() {
                    Some("text") => {
                        let text = block["text"].as_str().unwrap_or("").to_owned();
                        self.blocks.insert(index, Block::Text);
                        return Ok(self.push_text(text));
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: non_empty(&block["id"]).unwrap_or_else(|| format!("call_{index}")),
                        name: block["name"].as_str().unwrap_or("").to_owned(),
                        start_input: match &block["input"] {
                            Value::Object(map) if !map.is_empty() => block["input"].to_string(),
                            _ => String::new(),
                        },
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = self.index_of(&event)?;
                let delta = &event["delta"];
                match (delta["type"].as_str(), self.blocks.get_mut(&index)) {
                    (Some("text_delta"), Some(Block::Text)) => {
                        let text = delta["text"].as_str().unwrap_or("").to_owned();
                        return Ok(self.push_text(text));
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or(""));
                    }
                    (Some("text_delta" | "input_json_delta"), _) => {
                        return Err(ModelError::Protocol(format!(
                            "a stream delta is for content block {index}, which was not \
                             started as that kind of block"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.add_usage(&event["usage"]);
            }
            "message_stop" => self.done = true,
            "error" => return Err(error_of(&event["error"])),
            // `ping`, `content_block_stop` and kinds added later.
            _ => {}
        }
        Ok(None)
    }

    fn index_of(&self, event: &Value) -> Result<u64, ModelError> {
        if !self.started {
            return Err(ModelError::Protocol(
                "the answer stream sent content before `message_start`".to_owned(),
            ));
        }
        event["index"]
            .as_u64()
            .ok_or_else(|| ModelError::Protocol("a content block event has no `index`".to_owned()))
    }

    fn push_text(&mut self, text: String) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        self.content.push_str(&text);
        Some(text)
    }

    fn add_usage(&mut self, usage: &Value) {
        let (input, output) = usage_of(usage);
        if input.is_some() {
            self.input_tokens = input;
        }
        if output.is_some() {
            self.output_tokens = output;
        }
    }

    /// The assembled answer. A stream without `message_stop` was cut: a `Protocol`
    /// error (the failover path), never a half answer.
    pub(crate) fn finish(self) -> Result<ChatResponse, ModelError> {
        if !self.done {
            return Err(ModelError::Protocol(
                "the answer stream ended before `message_stop`; the server may have \
                 crashed or cut the connection"
                    .to_owned(),
            ));
        }
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => Some(ToolCall {
                    id,
                    name,
                    arguments: match (json.is_empty(), start_input.is_empty()) {
                        (false, _) => json,
                        (true, false) => start_input,
                        (true, true) => "{}".to_owned(),
                    },
                }),
                _ => None,
            })
            .collect();
        Ok(ChatResponse {
            content: self.content,
            tool_calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: (self.input_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
                input_tokens: self.input_tokens.unwrap_or(0),
                output_tokens: self.output_tokens.unwrap_or(0),
            }),
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

    fn request() -> ChatRequest {
        ChatRequest {
            model: "claude".to_owned(),
            messages: vec![
                ChatMessage::system("be brief"),
                ChatMessage::user("read a"),
                ChatMessage::assistant(
                    Some("reading".to_owned()),
                    vec![
                        ToolCall {
                            id: "t1".to_owned(),
                            name: "read".to_owned(),
                            arguments: r#"{"path":"a"}"#.to_owned(),
                        },
                        ToolCall {
                            id: "t2".to_owned(),
                            name: "read".to_owned(),
                            arguments: "not json".to_owned(),
                        },
                    ],
                ),
                ChatMessage::tool_result("t1", "A"),
                ChatMessage::tool_result("t2", "bad arguments"),
                ChatMessage::assistant(Some(String::new()), vec![]),
                ChatMessage::user("thanks"),
            ],
            tools: vec![ToolSpec {
                name: "read".to_owned(),
                description: "reads".to_owned(),
                parameters: json!({"type": "object"}),
                side_effects: false,
            }],
            temperature: None,
            max_tokens: None,
            tool_choice: None,
            response_schema: None,
        }
    }

    #[test]
    fn a_callers_token_limit_and_tool_choice_are_sent_in_anthropics_terms() {
        let mut req = request();
        assert_eq!(request_body(&req, 1024, true)["max_tokens"], 1024);
        // A request's cap is kept below the provider's, and never raised past it.
        let asked = ChatRequest {
            max_tokens: Some(300),
            ..req.clone()
        };
        assert_eq!(request_body(&asked, 1024, true)["max_tokens"], 300);
        let greedy = ChatRequest {
            max_tokens: Some(9000),
            ..req.clone()
        };
        assert_eq!(request_body(&greedy, 1024, true)["max_tokens"], 1024);
        assert!(request_body(&req, 1024, true).get("tool_choice").is_none());
        req.max_tokens = Some(64);
        req.tool_choice = Some(ToolChoice::Required);
        let body = request_body(&req, 1024, true);
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        req.tool_choice = Some(ToolChoice::Function("read".to_owned()));
        assert_eq!(
            request_body(&req, 1024, true)["tool_choice"],
            json!({"type": "tool", "name": "read"})
        );
        req.tools.clear();
        assert!(request_body(&req, 1024, true).get("tool_choice").is_none());
    }

    #[test]
    fn request_body_speaks_messages_api() {
        let body = request_body(&request(), 1024, true);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        let messages = body["messages"].as_array().expect("messages");
        // user, assistant (text + 2 tool_use), user (2 tool_result + the empty
        // assistant dropped + "thanks" merged).
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(
            messages[0],
            json!({"role": "user", "content": [{"type": "text", "text": "read a"}]})
        );
        assert_eq!(messages[1]["content"][1]["input"], json!({"path": "a"}));
        assert_eq!(messages[1]["content"][2]["input"], json!({}));
        assert_eq!(messages[2]["content"][0]["type"], "tool_result");
        assert_eq!(messages[2]["content"][1]["tool_use_id"], "t2");
        assert_eq!(messages[2]["content"][2]["text"], "thanks");
        assert!(body.get("temperature").is_none());
    }

    fn stream(events: &[Value]) -> Result<(ChatResponse, String), ModelError> {
        let mut assembly = StreamAssembly::new("asked");
        let mut text = String::new();
        for event in events {
            if let Some(delta) = assembly.apply(&event.to_string())? {
                text.push_str(&delta);
            }
        }
        assembly.finish().map(|r| (r, text))
    }

    fn start() -> Value {
        json!({"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 12, "output_tokens": 1}}})
    }

    #[test]
    fn a_streamed_tool_call_is_assembled() {
        let (response, text) = stream(&[
            start(),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "look."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "th\":\"a\"}"}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
            json!({"type": "message_stop"}),
        ])
        .expect("answer");
        assert_eq!(text, "Let me look.");
        assert_eq!(response.content, "Let me look.");
        assert_eq!(response.tool_calls.len(), 2);
        assert_eq!(response.tool_calls[0].id, "toolu_1");
        assert_eq!(response.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(response.tool_calls[1].arguments, "{}");
        assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 12,
                output_tokens: 30
            })
        );
        assert_eq!(response.model, "claude-x");
    }

    #[test]
    fn bad_json_in_input_json_delta_reaches_the_engine_as_raw_arguments() {
        // The engine parses arguments and tells the model; the adapter never guesses.
        let (response, _) = stream(&[
            start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": tru"}}),
            json!({"type": "message_stop"}),
        ])
        .expect("answer");
        assert_eq!(response.tool_calls[0].arguments, "{\"path\": tru");
    }

    #[test]
    fn hostile_streams_are_errors_not_panics() {
        // Truncated: no message_stop.
        let cut = stream(&[
            start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}}),
        ]);
        assert!(matches!(cut, Err(ModelError::Protocol(_))), "{cut:?}");
        // An error event mid-stream: overloaded is upstream, invalid request is not.
        let overloaded = stream(&[
            start(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        assert!(
            matches!(overloaded, Err(ModelError::Protocol(_))),
            "{overloaded:?}"
        );
        let invalid = stream(&[
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        ]);
        assert!(
            matches!(invalid, Err(ModelError::Upstream { status: 400, .. })),
            "{invalid:?}"
        );
        // Content before message_start, a delta for a block never started, no index.
        for events in [
            vec![
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            ],
            vec![
                start(),
                json!({"type": "content_block_delta", "index": 5, "delta": {"type": "text_delta", "text": "x"}}),
            ],
            vec![
                start(),
                json!({"type": "content_block_start", "content_block": {"type": "text"}}),
            ],
            vec![
                start(),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
            ],
        ] {
            assert!(
                matches!(stream(&events), Err(ModelError::Protocol(_))),
                "{events:?}"
            );
        }
        // Garbage data and non-object JSON.
        let mut assembly = StreamAssembly::new("m");
        assert!(matches!(
            assembly.apply("garbage{"),
            Err(ModelError::Protocol(_))
        ));
        assert!(assembly.apply("[1,2]").expect("ignored").is_none());
        assert!(assembly.apply("null").expect("ignored").is_none());
        // Too many blocks.
        let mut assembly = StreamAssembly::new("m");
        assembly.apply(&start().to_string()).expect("start");
        let mut result = Ok(None);
        for index in 0..=MAX_BLOCKS {
            let event = json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": "x", "name": "y"}});
            result = assembly.apply(&event.to_string());
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(ModelError::Protocol(_))));
    }

    #[test]
    fn whole_messages_are_read_leniently_and_errors_keep_their_meaning() {
        let body = br#"{"type":"message","model":"claude-x","content":[
            {"type":"text","text":"ok"},{"type":"tool_use","id":"t","name":"read","input":{"a":1}},
            {"type":"thinking","thinking":"..."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}"#;
        let response = parse_message(body, "asked").expect("parsed");
        assert_eq!(response.content, "ok");
        assert_eq!(response.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(response.finish_reason.as_deref(), Some("stop"));
        for body in [&b""[..], b"{", b"[]", b"null", b"{\"content\":5}", b"\xff"] {
            assert!(matches!(
                parse_message(body, "m"),
                Err(ModelError::Protocol(_))
            ));
        }
        let error = br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert!(matches!(
            parse_message(error, "m"),
            Err(ModelError::Upstream { status: 401, .. })
        ));
        let limited = json!({"type": "rate_limit_error", "message": "slow down"});
        assert!(matches!(error_of(&limited), ModelError::RateLimited { .. }));
    }
}
