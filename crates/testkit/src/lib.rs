//! Test fixtures of agentplane: a scripted OpenAI-compatible LLM server.
//!
//! Every integration test and benchmark talks to a model through real HTTP; this crate
//! provides the model. A [`Scenario`] is a list of [`Step`]s; each
//! `POST /v1/chat/completions` consumes the next step and answers with it, streamed as
//! SSE when the request says `"stream": true`, as one `chat.completion` JSON otherwise.
//! `POST /v1/messages` takes from the same steps and answers in Anthropic's Messages
//! format (`anthropic.rs`). Nothing here knows about agentplane's engine: it speaks the
//! providers' wire formats only, so it must never depend on another agentplane crate.
//!
//! # Scenario files
//!
//! ```json
//! { "models": [{"id": "scripted-model", "parameter_size": "8.0B", "families": ["llama"]}],
//!   "repeat": false,
//!   "steps": [
//!     {"text": "hello", "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
//!     {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
//!     {"tool_calls": [{"name": "x", "arguments": "{not json"}]},
//!     {"error": {"status": 500, "body": "{\"error\":\"boom\"}"}},
//!     {"no_tools": true},
//!     {"raw_sse": ["data: {garbage", "data: [DONE]"]},
//!     {"raw_chunks": ["data: {\"choi", "ces\":[]}\r\n\r\n"]},
//!     {"text": "partial answer", "truncate_after_chunks": 2},
//!     {"text": "slow", "delay_ms": 200}
//!   ] }
//! ```
//!
//! - `models` (optional): what `GET /v1/models` and `GET /api/tags` (Ollama's shape,
//!   with `details.parameter_size` and `details.families`) list. Default: one model,
//!   `scripted-model`, without size.
//! - `native_tools` (optional, default `true`): what `GET /props` (llama.cpp's shape,
//!   `chat_template_caps.supports_tool_calls`) says, for capability probes; `/props`
//!   requests are not logged.
//! - `repeat` (optional, default `false`): `true` cycles through the steps forever (for
//!   benchmarks). Otherwise a request after the last step gets
//!   `500 {"error":{"message":"scenario exhausted"}}`.
//! - A step answers with exactly one of: text and/or `tool_calls` (an empty step is an
//!   empty text answer), `error` (status and raw body), `no_tools` (Ollama's
//!   `400 {"error":{"message":"registry.ollama.ai/library/MODEL does not support tools"}}`),
//!   `raw_sse` (each entry sent as one SSE event: the entry, then a blank line) or
//!   `raw_chunks` (each entry written byte for byte as its own body chunk). Raw answers
//!   are sent as `text/event-stream` whatever the request's `stream` flag.
//! - Tool call `arguments`: a JSON string is passed through as the raw arguments text
//!   (so broken JSON can be scripted); any other JSON value is serialized compactly.
//!   `id` is optional (default `call_<request>_<index>`).
//! - Options: `delay_ms` (wait before answering), `chunk_delay_ms` (wait between body
//!   chunks), `split` (cut the text and each tool call's arguments into N pieces, each its
//!   own SSE chunk), `omit_usage`, `omit_ids` (tool calls without `id`),
//!   `empty_finish_reason` (`""` instead of `"stop"`/`"tool_calls"`), `finish_reason`
//!   (override, e.g. `"length"`), `model` (the model name in the answer; default: the
//!   request's), `truncate_after_chunks` (send N body chunks, then drop the connection:
//!   no `[DONE]`, no final chunk; for a non-streamed answer, N = 1 sends the first half of
//!   the JSON), `stall_after_chunks` (send N body chunks, then stay silent with the
//!   connection open; 0: headers then silence), `stall_before_headers` (accept the
//!   request, never answer), `endless` (with `raw_sse`/`raw_chunks`: the last entry is
//!   sent again and again, forever). An `error` may carry `retry_after`, sent as the
//!   `Retry-After` header. A refused connection needs no step: a closed port is enough.
//! - `usage` (optional): token counts reported. Default: about one token per four
//!   characters of the request's messages and of the answer, at least 1 each.
//!
//! # Streaming shape
//!
//! Chunks follow OpenAI: the first carries `delta.role = "assistant"`; text pieces come as
//! `delta.content`; a tool call's first delta carries `index`, `id`, `type`,
//! `function.name` and empty `function.arguments`, later deltas only `index` and
//! `function.arguments` pieces; then a chunk with an empty delta and the
//! `finish_reason`. Usage is sent as OpenAI does: only when the request set
//! `stream_options.include_usage`, in one more chunk with `"choices": []`, unless the step
//! says `omit_usage`. Then `data: [DONE]`.

mod anthropic;
pub mod peers;
pub mod promtool;
mod reply;
mod scenario;
mod server;

pub use scenario::{Scenario, ScriptedError, ScriptedModel, ScriptedToolCall, ScriptedUsage, Step};
pub use server::{ReceivedRequest, ScriptedServer, offered_tools, vector_of};
