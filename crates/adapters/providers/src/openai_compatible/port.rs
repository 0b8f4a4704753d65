//! [`OpenAiCompatible`] as the engine's `ChatModel`: the chat itself (`super`), the model
//! list (`super::listing`) and the capabilities (`super::capabilities`), so that those
//! two read the client without the client naming them back.

use agentplane_core::{ChatRequest, ChatResponse};
use agentplane_engine::ports::model::TextSink;
use agentplane_engine::ports::{
    Capabilities, ChatModel, EmbeddingRequest, Embeddings, ModelError, ModelInfo,
};
use async_trait::async_trait;

use super::{OpenAiCompatible, capabilities, embeddings, listing};

#[async_trait]
impl ChatModel for OpenAiCompatible {
    fn provider(&self) -> &str {
        "openai-compatible"
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        listing::list_models(self).await
    }

    async fn capabilities(&self, model: &str) -> Capabilities {
        capabilities::probe(self, model).await
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_text: &mut TextSink<'_>,
    ) -> Result<ChatResponse, ModelError> {
        self.chat_with(request, on_text).await
    }

    async fn embed(&self, request: &EmbeddingRequest) -> Result<Embeddings, ModelError> {
        embeddings::embed(self, request).await
    }
}
