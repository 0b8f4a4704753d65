//! How a step becomes an answer of Anthropic's Messages API (`POST /v1/messages`):
//! a whole `message`, or its SSE stream (`message_start`, `content_block_start`,
//! `content_block_delta` with `text_delta` / `input_json_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`).
//!
//! The same steps as the OpenAI route, in the other wire format, so one scenario can
//! drive either kind of provider. Errors, `no_tools`, raw bodies, delays and
//! truncation are shared with `reply.rs`; only successful answers differ here.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{self, Reply};
use crate::scenario::{ScriptedUsage, Step};

/// The answer of `step` to request number `n` (0-based) with body `request`.
pub(crate) fn answer(step: &Step, n: usize, request: &Value) -> Reply {
    let raw = step.error.is_some()
        || step.no_tools
        || step.raw_sse.is_some()
        || step.raw_chunks.is_some();
    if raw {
        return reply::answer(step, n, request);
    }
    let chunks = if request["stream"].as_bool() == Some(true) {
        stream_chunks(step, n, request)
    } else {
        let body = message(step, n, request).to_string();
        if step.truncate_after_chunks.is_some() {
            let middle = body.len() / 2;
            vec![
                Bytes::from(body[..middle].to_owned()),
                Bytes::from(body[middle..].to_owned()),
            ]
        } else {
            vec![Bytes::from(body)]
        }
    };
    Reply {
        status: 200,
        content_type: if request["stream"].as_bool() == Some(true) {
            "text/event-stream"
        } else {
            "application/json"
        },
        chunks,
        delay_ms: step.delay_ms,
        chunk_delay_ms: step.chunk_delay_ms,
        truncate_after: step.truncate_after_chunks,
        stall_after: step.stall_after_chunks,
        stall_before_headers: step.stall_before_headers,
        endless: step.endless,
        retry_after: None,
    }
}

fn model_name(step: &Step, request: &Value) -> String {
    step.model
        .clone()
        .or_else(|| request["model"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "scripted-model".to_owned())
}

fn stop_reason(step: &Step) -> String {
    if let Some(reason) = &step.finish_reason {
        reason.clone()
    } else if step.tool_calls.is_empty() {
        "end_turn".to_owned()
    } else {
        "tool_use".to_owned()
    }
}

fn call_id(step: &Step, n: usize, index: usize) -> String {
    step.tool_calls[index]
        .id
        .clone()
        .unwrap_or_else(|| format!("toolu_{n}_{index}"))
}

fn usage(step: &Step, request: &Value) -> ScriptedUsage {
    if let Some(usage) = step.usage {
        return usage;
    }
    let prompt = request["messages"].to_string().len() + request["system"].to_string().len();
    let answer = step.text.as_deref().map_or(0, str::len)
        + step
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments_text().len())
            .sum::<usize>();
    ScriptedUsage {
        prompt_tokens: (prompt as u64 / 4).max(1),
        completion_tokens: (answer as u64 / 4).max(1),
    }
}

/// A tool call's `input` as an object: its arguments if they are one, else `{}`
/// (a whole message cannot carry broken JSON; a stream can, in `partial_json`).
fn input_object(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

/// One whole `message`.
fn message(step: &Step, n: usize, request: &Value) -> Value {
    let mut content = Vec::new();
    if let Some(text) = &step.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (index, call) in step.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": call_id(step, n, index),
            "name": call.name,
            "input": input_object(&call.arguments_text()),
        }));
    }
    let mut body = json!({
        "id": format!("msg_scripted_{n}"),
        "type": "message",
        "role": "assistant",
        "model": model_name(step, request),
        "content": content,
        "stop_reason": stop_reason(step),
        "stop_sequence": null,
    });
    if !step.omit_usage {
        let usage = usage(step, request);
        body["usage"] =
            json!({"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens});
    }
    body
}

fn split_text(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let pieces = pieces.clamp(1, chars.len());
    chars
        .chunks(chars.len().div_ceil(pieces))
        .map(|c| c.iter().collect())
        .collect()
}

fn event(kind: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// The SSE body of a streamed answer, one chunk per event.
fn stream_chunks(step: &Step, n: usize, request: &Value) -> Vec<Bytes> {
    let pieces = step.split.unwrap_or(1);
    let usage = usage(step, request);
    let mut start_usage = json!({"input_tokens": usage.prompt_tokens, "output_tokens": 1});
    if step.omit_usage {
        start_usage = json!({});
    }
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_scripted_{n}"), "type": "message", "role": "assistant",
            "model": model_name(step, request), "content": [], "stop_reason": null,
            "usage": start_usage,
        }}),
    )];
    let mut index = 0;
    if let Some(text) = &step.text {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in split_text(text, pieces) {
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(event("ping", json!({"type": "ping"})));
    for (n_call, call) in step.tool_calls.iter().enumerate() {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": call_id(step, n, n_call), "name": call.name, "input": {},
            }}),
        ));
        for piece in split_text(&call.arguments_text(), pieces) {
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(step), "stop_sequence": null}});
    if !step.omit_usage {
        delta["usage"] = json!({"output_tokens": usage.completion_tokens});
    }
    events.push(event("message_delta", delta));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(reply: &Reply) -> Vec<Value> {
        reply
            .chunks
            .iter()
            .map(|c| std::str::from_utf8(c).expect("utf-8"))
            .map(|c| {
                let line = c
                    .lines()
                    .find(|l| l.starts_with("data: "))
                    .expect("data line");
                serde_json::from_str(&line["data: ".len()..]).expect("json")
            })
            .collect()
    }

    #[test]
    fn a_streamed_tool_call_follows_the_messages_api() {
        let step = Step::tool_call("read", json!({"path": "a"})).with_split(2);
        let reply = answer(&step, 3, &json!({"model": "claude", "stream": true}));
        assert_eq!(reply.content_type, "text/event-stream");
        let events = data(&reply);
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e["type"].as_str().expect("type"))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[2]["content_block"]["id"], "toolu_3_0");
        let args: String = events[3..5]
            .iter()
            .map(|e| e["delta"]["partial_json"].as_str().expect("piece"))
            .collect();
        assert_eq!(args, r#"{"path":"a"}"#);
        assert_eq!(events[6]["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn a_whole_message_carries_text_usage_and_stop_reason() {
        let reply = answer(
            &Step::text("hi").with_usage(5, 2),
            0,
            &json!({"model": "m"}),
        );
        let body: Value = serde_json::from_slice(&reply.chunks[0]).expect("json");
        assert_eq!(body["content"][0], json!({"type": "text", "text": "hi"}));
        assert_eq!(body["stop_reason"], "end_turn");
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 5, "output_tokens": 2})
        );
    }
}
