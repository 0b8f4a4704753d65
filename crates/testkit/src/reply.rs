//! How a step becomes an HTTP answer: status, content type and body chunks.
//!
//! Pure functions from (step, request) to a `Reply`; the server in `server.rs` only
//! sleeps and writes. Every wire-format detail of the OpenAI chat API that the
//! scripted server imitates lives here and nowhere else.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::scenario::{ScriptedUsage, Step};

/// `created` in every answer: fixed so recorded answers are reproducible.
const CREATED: u64 = 1_700_000_000;

/// An answer ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub chunks: Vec<Bytes>,
    pub delay_ms: u64,
    pub chunk_delay_ms: u64,
    /// Drop the connection after this many chunks instead of finishing the body.
    pub truncate_after: Option<usize>,
    /// Go silent, connection open, after this many chunks.
    pub stall_after: Option<usize>,
    /// Never send the headers.
    pub stall_before_headers: bool,
    /// Repeat the last chunk forever.
    pub endless: bool,
    /// The `Retry-After` header, when set.
    pub retry_after: Option<String>,
}

impl Reply {
    fn json(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: "application/json",
            chunks: vec![Bytes::from(body)],
            delay_ms: 0,
            chunk_delay_ms: 0,
            truncate_after: None,
            stall_after: None,
            stall_before_headers: false,
            endless: false,
            retry_after: None,
        }
    }

    fn sse(chunks: Vec<Bytes>) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream",
            chunks,
            delay_ms: 0,
            chunk_delay_ms: 0,
            truncate_after: None,
            stall_after: None,
            stall_before_headers: false,
            endless: false,
            retry_after: None,
        }
    }
}

/// The answer once the steps ran out.
pub(crate) fn exhausted() -> Reply {
    Reply::json(
        500,
        json!({"error": {"message": "scenario exhausted"}}).to_string(),
    )
}

/// The answer to a request body that is not JSON.
pub(crate) fn bad_request(detail: &str) -> Reply {
    Reply::json(
        400,
        json!({"error": {"message": format!("request body is not JSON: {detail}")}}).to_string(),
    )
}

/// The answer of `step` to request number `n` (0-based) with body `request`.
pub(crate) fn answer(step: &Step, n: usize, request: &Value) -> Reply {
    let mut reply = if let Some(error) = &step.error {
        let mut reply = Reply::json(error.status, error.body.clone());
        reply.retry_after = error.retry_after.clone();
        reply
    } else if step.no_tools {
        let model = request["model"].as_str().unwrap_or("model");
        let message = format!("registry.ollama.ai/library/{model} does not support tools");
        Reply::json(400, json!({"error": {"message": message}}).to_string())
    } else if let Some(events) = &step.raw_sse {
        Reply::sse(
            events
                .iter()
                .map(|e| Bytes::from(format!("{e}\n\n")))
                .collect(),
        )
    } else if let Some(chunks) = &step.raw_chunks {
        Reply::sse(chunks.iter().map(|c| Bytes::from(c.clone())).collect())
    } else if request["stream"].as_bool() == Some(true) {
        Reply::sse(stream_chunks(step, n, request))
    } else {
        let body = completion(step, n, request).to_string();
        let mut reply = Reply::json(200, body);
        if step.truncate_after_chunks.is_some() {
            reply.chunks = halves(&reply.chunks[0]);
        }
        reply
    };
    reply.delay_ms = step.delay_ms;
    reply.chunk_delay_ms = step.chunk_delay_ms;
    reply.truncate_after = step.truncate_after_chunks;
    reply.stall_after = step.stall_after_chunks;
    reply.stall_before_headers = step.stall_before_headers;
    reply.endless = step.endless;
    reply
}

fn halves(body: &Bytes) -> Vec<Bytes> {
    let middle = body.len() / 2;
    vec![body.slice(..middle), body.slice(middle..)]
}

fn model_name(step: &Step, request: &Value) -> String {
    step.model
        .clone()
        .or_else(|| request["model"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "scripted-model".to_owned())
}

fn finish_reason(step: &Step) -> String {
    if step.empty_finish_reason {
        String::new()
    } else if let Some(reason) = &step.finish_reason {
        reason.clone()
    } else if step.tool_calls.is_empty() {
        "stop".to_owned()
    } else {
        "tool_calls".to_owned()
    }
}

fn call_id(step: &Step, n: usize, index: usize) -> Option<String> {
    if step.omit_ids {
        return None;
    }
    Some(
        step.tool_calls[index]
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{n}_{index}")),
    )
}

/// The usage a step reports: scripted, or about four characters per token.
fn usage(step: &Step, request: &Value) -> ScriptedUsage {
    if let Some(usage) = step.usage {
        return usage;
    }
    let prompt_chars = request["messages"].to_string().len() as u64;
    let answer_chars = step.text.as_deref().map_or(0, str::len)
        + step
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments_text().len())
            .sum::<usize>();
    ScriptedUsage {
        prompt_tokens: (prompt_chars / 4).max(1),
        completion_tokens: (answer_chars as u64 / 4).max(1),
    }
}

fn usage_json(usage: ScriptedUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// One `chat.completion` object.
fn completion(step: &Step, n: usize, request: &Value) -> Value {
    let mut message = json!({"role": "assistant"});
    message["content"] = match &step.text {
        Some(text) => json!(text),
        None if step.tool_calls.is_empty() => json!(""),
        None => Value::Null,
    };
    if !step.tool_calls.is_empty() {
        let calls: Vec<Value> = step
            .tool_calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let mut wire = json!({
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text()},
                });
                if let Some(id) = call_id(step, n, index) {
                    wire["id"] = json!(id);
                }
                wire
            })
            .collect();
        message["tool_calls"] = json!(calls);
    }
    let mut body = json!({
        "id": format!("chatcmpl-scripted-{n}"),
        "object": "chat.completion",
        "created": CREATED,
        "model": model_name(step, request),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(step)}],
    });
    if !step.omit_usage {
        body["usage"] = usage_json(usage(step, request));
    }
    body
}

/// Cuts `text` into at most `pieces` non-empty parts of near-equal length (in chars).
fn split_text(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let pieces = pieces.clamp(1, chars.len());
    let size = chars.len().div_ceil(pieces);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE body of a streamed answer, one chunk per event.
fn stream_chunks(step: &Step, n: usize, request: &Value) -> Vec<Bytes> {
    let pieces = step.split.unwrap_or(1);
    let mut deltas: Vec<Value> = Vec::new();
    if let Some(text) = &step.text {
        for piece in split_text(text, pieces) {
            deltas.push(json!({"content": piece}));
        }
    }
    for (index, call) in step.tool_calls.iter().enumerate() {
        let mut first = json!({
            "index": index,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        });
        if let Some(id) = call_id(step, n, index) {
            first["id"] = json!(id);
        }
        deltas.push(json!({"tool_calls": [first]}));
        for piece in split_text(&call.arguments_text(), pieces) {
            deltas
                .push(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
        }
    }
    if deltas.is_empty() {
        deltas.push(json!({"content": ""}));
    }
    deltas[0]["role"] = json!("assistant");

    let model = model_name(step, request);
    let id = format!("chatcmpl-scripted-{n}");
    let chunk = |choices: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": choices,
        })
    };
    let mut events: Vec<Value> = deltas
        .into_iter()
        .map(|delta| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}])))
        .collect();
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(step)}]),
    ));
    let include_usage = request["stream_options"]["include_usage"].as_bool() == Some(true);
    if include_usage && !step.omit_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage_json(usage(step, request));
        events.push(last);
    }
    let mut chunks: Vec<Bytes> = events
        .iter()
        .map(|e| Bytes::from(format!("data: {e}\n\n")))
        .collect();
    chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(reply: &Reply) -> Vec<Value> {
        reply
            .chunks
            .iter()
            .map(|c| std::str::from_utf8(c).expect("utf-8"))
            .filter(|c| !c.contains("[DONE]"))
            .map(|c| {
                serde_json::from_str(c.trim().trim_start_matches("data: ")).expect("json event")
            })
            .collect()
    }

    #[test]
    fn split_text_covers_the_text_in_order() {
        assert_eq!(split_text("abcdefg", 3), vec!["abc", "def", "g"]);
        assert_eq!(split_text("ab", 5), vec!["a", "b"]);
        assert_eq!(split_text("héllo", 1), vec!["héllo"]);
        assert!(split_text("", 4).is_empty());
    }

    #[test]
    fn tool_call_deltas_follow_openai() {
        let step = Step::tool_call("write_file", json!({"path": "a"})).with_split(3);
        let request =
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}});
        let reply = answer(&step, 7, &request);
        let events = events(&reply);
        let first = &events[0]["choices"][0]["delta"];
        assert_eq!(first["role"], "assistant");
        assert_eq!(first["tool_calls"][0]["id"], "call_7_0");
        assert_eq!(first["tool_calls"][0]["function"]["name"], "write_file");
        let mut args = String::new();
        for event in &events[1..4] {
            let delta = &event["choices"][0]["delta"]["tool_calls"][0];
            assert!(delta.get("id").is_none() && delta["function"].get("name").is_none());
            args.push_str(delta["function"]["arguments"].as_str().expect("piece"));
        }
        assert_eq!(args, r#"{"path":"a"}"#);
        assert_eq!(events[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(events[5]["choices"], json!([]));
        assert!(events[5]["usage"]["prompt_tokens"].as_u64().expect("usage") >= 1);
    }

    #[test]
    fn usage_is_streamed_only_when_asked() {
        let reply = answer(&Step::text("hi"), 0, &json!({"stream": true}));
        assert!(events(&reply).iter().all(|e| e.get("usage").is_none()));
    }
}
