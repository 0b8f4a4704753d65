//! Embeddings through the gateway (`/openai/v1/embeddings`): the same admission as a
//! model call (policies, content policies on the inputs, rate limits, a budget
//! reservation of the inputs' worst case with no output), then the providers'
//! embeddings with failover, priced by the input tokens the server reports (the worst
//! case when it reports none) and recorded as a call with no output.
//!
//! The inputs are the admitted request's messages, one per input, after its content
//! policies: a `redact` policy changes what is embedded, a `deny` refuses the call.

use agentplane_core::Usage;
use tracing::Instrument;

use super::{AdmittedCall, EmbeddingReply, Recorder};
use crate::error::HubError;
use crate::ports::EmbeddingRequest;

impl AdmittedCall {
    /// Makes an admitted embeddings call (admitted by the `Embeddings` route: its
    /// messages are the inputs), settles its budget and records it in the background.
    /// A call that fails costs nothing and is not recorded.
    pub async fn embed(self, dimensions: Option<u32>) -> Result<EmbeddingReply, HubError> {
        let request = EmbeddingRequest {
            model: self.request.model.clone(),
            inputs: self
                .request
                .messages
                .iter()
                .map(|m| m.content.clone().unwrap_or_default())
                .collect(),
            dimensions,
        };
        let key = crate::models::RouteKey {
            agent: &self.agent,
            tags: &self.tags,
            size: crate::models::TaskSize::Small,
            pinned: &self.pinned,
        };
        let span = crate::ports::telemetry::gateway_call_span(
            &self.client,
            &self.agent,
            &request.model,
            self.id.as_str(),
        );
        let answered = self
            .deps
            .providers
            .embed(&key, &request)
            .instrument(span)
            .await;
        let (embeddings, provider) = match answered {
            Ok(answered) => answered,
            Err(error) => {
                self.meter.release().await;
                return Err(error.into());
            }
        };
        let usage = embeddings.input_tokens.map(|input_tokens| Usage {
            input_tokens,
            output_tokens: 0,
        });
        let charge = self.meter.price(&request.model, usage);
        Recorder {
            deps: self.deps.clone(),
            records: self.records.clone(),
            id: self.id.clone(),
            client: self.client.clone(),
            agent: self.agent.clone(),
            model: request.model.clone(),
        }
        .record(provider.clone(), embeddings.model.clone(), usage, &charge);
        self.meter.settle(&charge, &self.agent, &provider).await;
        Ok(EmbeddingReply { embeddings })
    }
}
