//! Tool calls a gateway client's upstream wrote as text: the recovery agents get (ADR
//! 0032, `crate::recover`), for any client. A small local model offered a client's
//! tools often writes `{"name": …, "arguments": …}` (or `<tool_call>…`) as its answer;
//! the client then gets a real `tool_calls` / `function_call` / `tool_use`, never the
//! JSON as prose.
//!
//! Only where the answering provider's `tool_calls` mode says so (`recover`, or `auto`
//! for a local provider), only when the request offered tools and the answer has no
//! native call, only a tool the request offered with arguments that validate against
//! its schema, and only the first call: as in a turn, a small model writing several
//! calls at once writes a plan whose later calls guess the earlier ones' results. A
//! recovered call's id begins with [`RECOVERED_ID`], so the client's log and ours
//! show which calls were read from text.
//!
//! Streamed text that could be the start of a call is held back ([`Hold`]) until it
//! is known to be prose or the answer ends; prose streams as it comes.

use agentplane_core::{ChatResponse, CompletionId, ToolCall, ToolSpec};

use crate::ports::TextSink;
use crate::recover::{self, Offered};
use crate::schema::Schema;

/// How the id of every call recovered from text begins.
pub const RECOVERED_ID: &str = "call_recovered_";

/// The request's tools, for recovery. Their schemas are compiled only when an answer
/// has no native call and some text to read (a client offers up to 256 tools on every
/// call; most answers never need them). A tool whose schema does not compile is left
/// out: its calls stay text rather than pass unchecked.
pub(super) struct TextCalls<'a> {
    tools: &'a [ToolSpec],
}

impl<'a> TextCalls<'a> {
    /// `None` when the request offers no tool.
    pub(super) fn new(tools: &'a [ToolSpec]) -> Option<Self> {
        (!tools.is_empty()).then_some(Self { tools })
    }

    /// Reads the first call written in an answer without native calls into its
    /// `tool_calls`, leaving the text before it as the content. Whether one was found.
    pub(super) fn recover(&self, response: &mut ChatResponse, id: &CompletionId) -> bool {
        if !response.tool_calls.is_empty() || response.content.trim().is_empty() {
            return false;
        }
        let compiled: Vec<(&str, Schema)> = self
            .tools
            .iter()
            .filter_map(|t| Some((t.name.as_str(), Schema::compile(&t.parameters).ok()?)))
            .collect();
        let offered: Vec<Offered<'_>> = compiled
            .iter()
            .map(|(name, schema)| Offered { name, schema })
            .collect();
        let found = recover::recover(&response.content, &offered);
        let Some(call) = found.calls.into_iter().next() else {
            return false;
        };
        let suffix = id.as_str().rsplit('-').next().unwrap_or_default();
        response.tool_calls.push(ToolCall {
            id: format!("{RECOVERED_ID}0_{suffix}"),
            name: call.name,
            arguments: call.arguments.to_string(),
        });
        response.content = found.text.trim_end().to_owned();
        response.finish_reason = Some("tool_calls".to_owned());
        true
    }
}

/// Streamed text held back while it may be a call written as text: everything until
/// its first visible character, and on while that is one a call begins with (`{`,
/// `[`, a fence, a tag). Prose passes at once; so does a held text grown past the
/// largest call recovery reads.
#[derive(Default)]
pub(super) struct Hold {
    held: String,
    passing: bool,
}

impl Hold {
    /// `text` to `out`, or held.
    pub(super) fn push(&mut self, text: &str, out: &mut TextSink<'_>) {
        if self.passing {
            out(text);
            return;
        }
        self.held.push_str(text);
        let start = self.held.trim_start();
        let maybe_call = start.is_empty() || start.starts_with(['{', '[', '`', '<']);
        if !maybe_call || self.held.len() > recover::MAX_SPAN {
            self.passing = true;
            out(&std::mem::take(&mut self.held));
        }
    }

    /// At the end: what was held and is still text. `response` is the answer after
    /// recovery: when a call was read from the held text, only the prose before it
    /// goes out.
    pub(super) fn finish(self, response: &ChatResponse, recovered: bool, out: &mut TextSink<'_>) {
        if self.passing || self.held.is_empty() {
            return;
        }
        if recovered {
            if !response.content.is_empty() {
                out(&response.content);
            }
        } else {
            out(&self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}),
            side_effects: false,
        }]
    }

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            content: text.into(),
            ..ChatResponse::default()
        }
    }

    #[test]
    fn a_call_written_as_json_becomes_a_call_and_its_text_is_held_back() {
        let tools = tools();
        let calls = TextCalls::new(&tools).expect("tools");
        let text = r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#;
        let mut sent = String::new();
        let mut hold = Hold::default();
        for piece in text.as_bytes().chunks(7) {
            hold.push(std::str::from_utf8(piece).expect("ascii"), &mut |t| {
                sent.push_str(t)
            });
        }
        let mut response = answer(text);
        let recovered = calls.recover(&mut response, &CompletionId::new());
        hold.finish(&response, recovered, &mut |t| sent.push_str(t));
        assert!(recovered);
        assert_eq!(sent, "", "the call's JSON never reaches the client as text");
        assert_eq!(response.tool_calls[0].name, "read_file");
        assert_eq!(response.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
        assert!(response.tool_calls[0].id.starts_with(RECOVERED_ID));
        assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn prose_streams_and_calls_to_tools_not_offered_or_invalid_stay_text() {
        let tools = tools();
        let calls = TextCalls::new(&tools).expect("tools");
        let mut sent = String::new();
        let mut hold = Hold::default();
        hold.push("  Hello", &mut |t| sent.push_str(t));
        assert_eq!(sent, "  Hello", "prose is not held");
        for text in [
            r#"{"name": "delete_all", "arguments": {}}"#,
            r#"{"name": "read_file", "arguments": {"path": 5}}"#,
            "plain words",
        ] {
            let mut response = answer(text);
            assert!(
                !calls.recover(&mut response, &CompletionId::new()),
                "{text}"
            );
            assert_eq!(response.content, text);
            let mut out = String::new();
            let mut hold = Hold::default();
            hold.push(text, &mut |t| out.push_str(t));
            hold.finish(&response, false, &mut |t| out.push_str(t));
            assert_eq!(out, text, "held text that is no call goes out whole");
        }
        assert!(TextCalls::new(&[]).is_none());
    }
}
