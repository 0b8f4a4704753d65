//! LLM provider adapters: implementations of the engine's `ChatModel` port.
//!
//! One module per provider API: [`OpenAiCompatible`], our own thin client of the
//! OpenAI chat-completions wire format as Ollama, vLLM, llama.cpp's server, LM Studio
//! and OpenAI speak it, and [`Anthropic`], the Messages API (ADR 0013). Real servers bend that format, so responses are read leniently
//! (as JSON values with defaults everywhere), never through strict typed clients.
//! Adapters translate between the wire and `agentplane_core`'s chat types; they hold
//! no turn logic, no policy and no storage.

mod anthropic;
mod exchange;
#[doc(hidden)]
pub mod fuzzing;
mod openai_compatible;
mod sse;

pub use anthropic::{ANTHROPIC_VERSION, Anthropic, AnthropicConfig};
pub use openai_compatible::{OpenAiCompatible, OpenAiConfig};
