//! `ChatModel`: one call to a language model, and listing what a server offers.

use agentplane_core::{ChatRequest, ChatResponse, ErrorCode};
use async_trait::async_trait;

/// A model a server offers, with what can be learned about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    pub id: String,
    /// Parameter size as the server wrote it (`"8.0B"`, `"135M"`), when it did.
    pub parameter_size: Option<String>,
    /// Model families or capabilities the server listed (`"bert"`, `"embedding"`…).
    pub families: Vec<String>,
}

/// What a model server says a model can do, probed at discovery (ADR 0032). `None`
/// means the server did not say; nothing is assumed from silence.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Capabilities {
    /// Whether the server turns the model's calls into native `tool_calls` (llama.cpp's
    /// chat template caps, Ollama's `tools` capability).
    pub native_tools: Option<bool>,
    /// Whether the server constrains an answer to a JSON schema (`response_format`).
    pub json_schema: Option<bool>,
    /// Where the answer came from (`llama.cpp /props`, `ollama /api/show`, ``).
    pub source: String,
}

/// Why a model call or a listing failed. Each variant's message tells the user what
/// to do next; none of them carries an API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error(
        "cannot reach the model server at {url}: {detail}. Start a local one (for example \
         `ollama serve`, or `scripts/local-model.sh`) or set AGENTPLANE_LLM_BASE_URL"
    )]
    Unreachable { url: String, detail: String },
    #[error(
        "model `{model}` does not support tool calls; agentplane needs native tool calling. \
         Choose a tool-capable model (for example qwen2.5, llama3.1, mistral) with \
         AGENTPLANE_LLM_MODEL or `[llm] model`, or give the agent no tools"
    )]
    NoToolSupport { model: String },
    #[error(
        "no chat model to use: {reason}. The server offers: {}",
        available_list(available)
    )]
    NoModel {
        reason: String,
        available: Vec<String>,
    },
    #[error("the model server answered {status}: {body}")]
    Upstream { status: u16, body: String },
    #[error("the model server rate-limited the call (429) and retries ran out: {body}")]
    RateLimited { body: String },
    #[error("the model server sent a response agentplane cannot read: {0}")]
    Protocol(String),
    #[error("the model call timed out after {seconds} s")]
    Timeout { seconds: u64 },
}

fn available_list(models: &[String]) -> String {
    if models.is_empty() {
        "nothing".to_owned()
    } else {
        models.join(", ")
    }
}

impl ModelError {
    /// The words of the upstream this error carries — a body, a detail, a model name it
    /// gave —, for the screen of what comes out of a call (`governance::outgoing`),
    /// which rewrites them in place. The variant (and so the code, and whether it fails
    /// over) never changes.
    pub fn upstream_words_mut(&mut self) -> Vec<&mut String> {
        match self {
            Self::Unreachable { detail, .. } => vec![detail],
            Self::NoToolSupport { model } => vec![model],
            Self::NoModel { reason, available } => std::iter::once(reason)
                .chain(available.iter_mut())
                .collect(),
            Self::Upstream { body, .. } | Self::RateLimited { body } => vec![body],
            Self::Protocol(detail) => vec![detail],
            Self::Timeout { .. } => Vec::new(),
        }
    }

    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unreachable { .. } | Self::Upstream { .. } | Self::Protocol(_) => {
                ErrorCode::UpstreamUnavailable
            }
            Self::NoToolSupport { .. } | Self::NoModel { .. } => ErrorCode::InvalidArgument,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::Timeout { .. } => ErrorCode::Timeout,
        }
    }
}

/// Receives text deltas as they stream. The explicit lifetime matters: with
/// `async_trait`, a bare `dyn FnMut(&str)` would only accept `&'static str`.
pub type TextSink<'a> = dyn FnMut(&str) + Send + 'a;

/// A language model behind some provider's API.
///
/// Cancellation: the engine drops the future returned by `chat` when a turn is
/// cancelled, so an implementation must not rely on running to completion.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A short provider name for usage records (`"openai-compatible"`).
    fn provider(&self) -> &str;

    /// What the server offers.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, ModelError>;

    /// What the server says `model` can do; unknown unless the server has a way to say.
    async fn capabilities(&self, _model: &str) -> Capabilities {
        Capabilities::default()
    }

    /// One model call. Text deltas are passed to `on_text` as they arrive; the
    /// assembled response (text, complete tool calls, usage) is returned at the end.
    async fn chat(
        &self,
        request: &ChatRequest,
        on_text: &mut TextSink<'_>,
    ) -> Result<ChatResponse, ModelError>;

    /// Embeddings of each input, in order. A provider whose API has none says so.
    async fn embed(&self, _request: &EmbeddingRequest) -> Result<Embeddings, ModelError> {
        Err(ModelError::NoModel {
            reason: format!("the `{}` provider serves no embeddings", self.provider()),
            available: Vec::new(),
        })
    }
}

/// Embeddings of `inputs` by `model` (the gateway's `/openai/v1/embeddings`).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    pub model: String,
    pub inputs: Vec<String>,
    /// The vectors' length, for models that can shorten them.
    pub dimensions: Option<u32>,
}

/// One vector per input, in order, and what the server reported.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// The model that answered, as the server named it.
    pub model: String,
    /// `None` when the server reported no usage.
    pub input_tokens: Option<u64>,
}
