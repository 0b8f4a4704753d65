//! What the scripted server says: scenarios, their steps, and their validation.
//!
//! Plain data read from JSON or built in code. How a step becomes bytes on the wire
//! lives in `reply.rs`; nothing here does I/O except `Scenario::from_file`.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A model the scripted server lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedModel {
    pub id: String,
    /// Served in `/api/tags` as `details.parameter_size` (`"8.0B"`), when set.
    #[serde(default)]
    pub parameter_size: Option<String>,
    /// Served in `/api/tags` as `details.families`.
    #[serde(default)]
    pub families: Vec<String>,
}

impl ScriptedModel {
    /// A model with only an id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            parameter_size: None,
            families: Vec::new(),
        }
    }

    /// The same model with a parameter size.
    pub fn with_parameter_size(mut self, size: impl Into<String>) -> Self {
        self.parameter_size = Some(size.into());
        self
    }

    /// The same model with families.
    pub fn with_families(mut self, families: &[&str]) -> Self {
        self.families = families.iter().map(|f| (*f).to_owned()).collect();
        self
    }
}

/// Token counts a step reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A tool call a step makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Default: `call_<request number>_<index>`.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// A JSON string is the raw arguments text, passed through untouched (so broken
    /// JSON can be scripted); any other value is serialized compactly.
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ScriptedToolCall {
    /// The arguments as the wire carries them: raw text.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            serde_json::Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }
}

/// An HTTP error a step answers with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    pub status: u16,
    /// Sent as is, with `content-type: application/json`.
    #[serde(default)]
    pub body: String,
    /// Sent as the `Retry-After` header, as is (seconds or an HTTP date; anything).
    #[serde(default)]
    pub retry_after: Option<String>,
}

/// One answer of the scripted server: what one chat request gets.
///
/// Fields are public so a test can write `Step { split: Some(5), ..Step::text("hi") }`;
/// `Scenario` validation rejects steps that mix answer kinds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Step {
    pub text: Option<String>,
    pub tool_calls: Vec<ScriptedToolCall>,
    pub usage: Option<ScriptedUsage>,
    pub error: Option<ScriptedError>,
    pub no_tools: bool,
    /// Each entry is one SSE event (the entry, then a blank line).
    pub raw_sse: Option<Vec<String>>,
    /// Each entry is written byte for byte as its own body chunk.
    pub raw_chunks: Option<Vec<String>>,
    /// Send this many body chunks, then drop the connection.
    pub truncate_after_chunks: Option<usize>,
    /// Send this many body chunks, then keep the connection open and say nothing more
    /// (0: headers, then silence).
    pub stall_after_chunks: Option<usize>,
    /// Accept the request and never answer, not even the headers.
    pub stall_before_headers: bool,
    /// Send the last body chunk again and again, forever (with `raw_sse` or
    /// `raw_chunks`): a stream that never ends.
    pub endless: bool,
    pub delay_ms: u64,
    pub chunk_delay_ms: u64,
    /// Cut text and each tool call's arguments into this many pieces.
    pub split: Option<usize>,
    pub omit_usage: bool,
    pub omit_ids: bool,
    pub empty_finish_reason: bool,
    pub finish_reason: Option<String>,
    pub model: Option<String>,
}

impl Step {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// An answer that is one tool call with JSON arguments.
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self::tool_calls(vec![ScriptedToolCall {
            id: None,
            name: name.into(),
            arguments,
        }])
    }

    /// An answer made of several tool calls.
    pub fn tool_calls(calls: Vec<ScriptedToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::default()
        }
    }

    /// An HTTP error with a raw body.
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        Self {
            error: Some(ScriptedError {
                status,
                body: body.into(),
                retry_after: None,
            }),
            ..Self::default()
        }
    }

    /// An HTTP error with a raw body and a `Retry-After` header.
    pub fn error_retry_after(
        status: u16,
        body: impl Into<String>,
        retry_after: impl Into<String>,
    ) -> Self {
        Self {
            error: Some(ScriptedError {
                status,
                body: body.into(),
                retry_after: Some(retry_after.into()),
            }),
            ..Self::default()
        }
    }

    /// A stream of these SSE events whose last one is sent again and again, forever.
    pub fn endless_sse(events: &[&str]) -> Self {
        Self {
            endless: true,
            ..Self::raw_sse(events)
        }
    }

    /// A request that is accepted and never answered, not even with headers.
    pub fn silent() -> Self {
        Self {
            stall_before_headers: true,
            ..Self::default()
        }
    }

    /// Ollama's answer for a model without tool calling.
    pub fn no_tools() -> Self {
        Self {
            no_tools: true,
            ..Self::default()
        }
    }

    /// A stream of exactly these SSE events.
    pub fn raw_sse(events: &[&str]) -> Self {
        Self {
            raw_sse: Some(events.iter().map(|e| (*e).to_owned()).collect()),
            ..Self::default()
        }
    }

    /// A body of exactly these chunks.
    pub fn raw_chunks(chunks: &[&str]) -> Self {
        Self {
            raw_chunks: Some(chunks.iter().map(|c| (*c).to_owned()).collect()),
            ..Self::default()
        }
    }

    /// The same step reporting these token counts.
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some(ScriptedUsage {
            prompt_tokens,
            completion_tokens,
        });
        self
    }

    /// The same step, its text and arguments cut into `pieces` chunks.
    pub fn with_split(mut self, pieces: usize) -> Self {
        self.split = Some(pieces);
        self
    }

    /// The same step, answered after `ms` milliseconds.
    pub fn with_delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    /// The same step, with `ms` milliseconds between body chunks.
    pub fn with_chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay_ms = ms;
        self
    }

    /// The same step, its connection dropped after `chunks` body chunks.
    pub fn truncated_after(mut self, chunks: usize) -> Self {
        self.truncate_after_chunks = Some(chunks);
        self
    }

    /// The same step, silent (connection open) after `chunks` body chunks.
    pub fn stalled_after(mut self, chunks: usize) -> Self {
        self.stall_after_chunks = Some(chunks);
        self
    }

    /// The same step without usage.
    pub fn without_usage(mut self) -> Self {
        self.omit_usage = true;
        self
    }

    /// The same step with tool calls that carry no id.
    pub fn without_ids(mut self) -> Self {
        self.omit_ids = true;
        self
    }

    /// The same step with `finish_reason: ""`.
    pub fn with_empty_finish_reason(mut self) -> Self {
        self.empty_finish_reason = true;
        self
    }

    fn validate(&self, position: usize) -> Result<(), String> {
        let kinds = [
            self.text.is_some() || !self.tool_calls.is_empty(),
            self.error.is_some(),
            self.no_tools,
            self.raw_sse.is_some(),
            self.raw_chunks.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() > 1 {
            return Err(format!(
                "step {position}: choose one of text/tool_calls, error, no_tools, raw_sse, raw_chunks"
            ));
        }
        if self.endless && self.raw_sse.is_none() && self.raw_chunks.is_none() {
            return Err(format!(
                "step {position}: endless repeats the last raw chunk: use raw_sse or raw_chunks"
            ));
        }
        if self.endless
            && (self.raw_sse.as_ref().is_some_and(Vec::is_empty)
                || self.raw_chunks.as_ref().is_some_and(Vec::is_empty))
        {
            return Err(format!("step {position}: endless needs a chunk to repeat"));
        }
        if self.split == Some(0) {
            return Err(format!("step {position}: split must be at least 1"));
        }
        if let Some(error) = &self.error
            && !(100..=599).contains(&error.status)
        {
            return Err(format!(
                "step {position}: error status {} is not an HTTP status",
                error.status
            ));
        }
        Ok(())
    }
}

/// A script for the server: models to list and the answers to give, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_models")]
    models: Vec<ScriptedModel>,
    #[serde(default)]
    repeat: bool,
    steps: Vec<Step>,
    /// What `GET /props` says, as llama.cpp does: whether the chat template makes
    /// native tool calls (default true).
    #[serde(default = "native_tools_default")]
    native_tools: bool,
}

fn native_tools_default() -> bool {
    true
}

fn default_models() -> Vec<ScriptedModel> {
    vec![ScriptedModel::new("scripted-model")]
}

impl Scenario {
    /// A scenario answering with `steps` once each, listing `scripted-model`.
    pub fn new(steps: Vec<Step>) -> Scenario {
        Scenario {
            models: default_models(),
            repeat: false,
            steps,
            native_tools: true,
        }
    }

    /// Reads a scenario from JSON text and validates it.
    pub fn from_json(text: &str) -> Result<Scenario, String> {
        let scenario: Scenario =
            serde_json::from_str(text).map_err(|e| format!("invalid scenario: {e}"))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// Reads a scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The same scenario, its steps cycling forever when `repeat` is true.
    pub fn repeating(mut self, repeat: bool) -> Scenario {
        self.repeat = repeat;
        self
    }

    /// The same scenario listing these models instead.
    pub fn with_models(mut self, models: Vec<ScriptedModel>) -> Scenario {
        self.models = models;
        self
    }

    /// The same scenario with `/props` saying whether native tool calls are made.
    pub fn with_native_tools(mut self, native_tools: bool) -> Scenario {
        self.native_tools = native_tools;
        self
    }

    /// Whether `/props` says the model makes native tool calls.
    pub fn native_tools(&self) -> bool {
        self.native_tools
    }

    /// The models listed.
    pub fn models(&self) -> &[ScriptedModel] {
        &self.models
    }

    /// The answers, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Whether the steps cycle.
    pub fn repeats(&self) -> bool {
        self.repeat
    }

    /// Checks what serde cannot: one answer kind per step, sane numbers, and that a
    /// repeating scenario has something to repeat.
    pub fn validate(&self) -> Result<(), String> {
        if self.repeat && self.steps.is_empty() {
            return Err("a repeating scenario needs at least one step".to_owned());
        }
        for (position, step) in self.steps.iter().enumerate() {
            step.validate(position)?;
        }
        Ok(())
    }

    /// The step answering request number `n` (0-based), or `None` when exhausted.
    pub(crate) fn step_for(&self, n: usize) -> Option<&Step> {
        if self.repeat && !self.steps.is_empty() {
            self.steps.get(n % self.steps.len())
        } else {
            self.steps.get(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let scenario = Scenario::from_json(
            r#"{ "models": [{"id":"scripted-model","parameter_size":"8.0B"}],
                 "repeat": false,
                 "steps": [
                   {"text": "hello", "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
                   {"tool_calls": [{"name": "write_file", "arguments": {"path":"a.txt","content":"x"}}]},
                   {"tool_calls": [{"name": "x", "arguments": "{not json"}]},
                   {"error": {"status": 500, "body": "{\"error\":\"boom\"}"}},
                   {"no_tools": true},
                   {"raw_sse": ["data: {garbage", "data: [DONE]"]},
                   {"text": "partial answer", "truncate_after_chunks": 2},
                   {"text": "slow", "delay_ms": 200}
                 ] }"#,
        )
        .expect("valid");
        assert_eq!(scenario.steps().len(), 8);
        assert_eq!(
            scenario.steps()[2].tool_calls[0].arguments_text(),
            "{not json"
        );
        // Compared as JSON: key order depends on serde_json's `preserve_order`, which
        // another crate of the workspace turns on.
        let arguments: serde_json::Value =
            serde_json::from_str(&scenario.steps()[1].tool_calls[0].arguments_text())
                .expect("arguments are JSON");
        assert_eq!(
            arguments,
            serde_json::json!({"content": "x", "path": "a.txt"})
        );
        assert_eq!(scenario.models()[0].parameter_size.as_deref(), Some("8.0B"));
    }

    #[test]
    fn models_default_to_one_scripted_model() {
        let scenario = Scenario::from_json(r#"{"steps": []}"#).expect("valid");
        assert_eq!(scenario.models(), &[ScriptedModel::new("scripted-model")]);
        assert!(!scenario.repeats());
        assert!(scenario.step_for(0).is_none());
    }

    #[test]
    fn hostile_scenarios_are_refused_with_a_reason() {
        let cases = [
            ("", "invalid scenario"),
            ("[]", "invalid scenario"),
            (r#"{"steps": [{"txet": "typo"}]}"#, "unknown field"),
            (
                r#"{"steps": [{"text": "a", "no_tools": true}]}"#,
                "choose one",
            ),
            (r#"{"steps": [{"text": "a", "split": 0}]}"#, "split"),
            (
                r#"{"steps": [{"error": {"status": 42}}]}"#,
                "not an HTTP status",
            ),
            (r#"{"repeat": true, "steps": []}"#, "at least one step"),
            (r#"{"steps": [{"delay_ms": -1}]}"#, "invalid scenario"),
            (r#"{"steps": [{"text": "a", "endless": true}]}"#, "endless"),
            (
                r#"{"steps": [{"raw_sse": [], "endless": true}]}"#,
                "chunk to repeat",
            ),
        ];
        for (text, expected) in cases {
            let err = Scenario::from_json(text).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn repeat_cycles_and_once_exhausts() {
        let steps = vec![Step::text("a"), Step::text("b")];
        let once = Scenario::new(steps.clone());
        assert_eq!(once.step_for(1).and_then(|s| s.text.as_deref()), Some("b"));
        assert!(once.step_for(2).is_none());
        let cycling = Scenario::new(steps).repeating(true);
        assert_eq!(
            cycling.step_for(5).and_then(|s| s.text.as_deref()),
            Some("b")
        );
    }

    #[test]
    fn missing_file_names_the_path() {
        let err =
            Scenario::from_file(Path::new("/nonexistent/scenario.json")).expect_err("missing");
        assert!(err.contains("/nonexistent/scenario.json"), "{err}");
    }
}
