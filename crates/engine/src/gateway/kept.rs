//! Responses-API answers kept for `previous_response_id` (the `ResponseStore` port): a
//! client names the answer it follows and sends only what is new; the conversation so
//! far is read back under the caller's own client id — another client's id answers
//! exactly as one never kept — and goes before the new input, after the `instructions`
//! (which, as OpenAI has it, are not carried over). What is kept is what passed the
//! content policies: the screened request and the screened, recovered answer.

use std::sync::Arc;

use agentplane_core::{ChatMessage, ChatResponse};

use crate::error::HubError;
use crate::ports::{KeptResponse, ResponseStore};

/// How long a kept answer can be followed: OpenAI keeps them 30 days.
pub const KEPT_FOR_SECS: u64 = 30 * 24 * 60 * 60;

/// The conversation of the answer `id` of `client`, or `NotFound` (the caller names
/// the id as its client knows it).
pub(crate) async fn previous(
    store: &dyn ResponseStore,
    client: &str,
    id: &str,
) -> Result<Vec<ChatMessage>, HubError> {
    store
        .kept_response(id, client, KEPT_FOR_SECS)
        .await?
        .ok_or_else(|| HubError::NotFound(format!("a kept response `{id}` of this client")))
}

/// Where and how an admitted call's conversation is kept once answered.
pub(crate) struct Keep {
    pub store: Arc<dyn ResponseStore>,
    /// Leading messages that are not kept (the `instructions`).
    pub skip: usize,
}

impl Keep {
    /// Keeps `messages` and `answer` under `id`. A failure is logged, not the call's:
    /// the answer was made, paid for and is the client's; only following it will fail.
    pub async fn keep(
        self,
        id: &str,
        client: &str,
        messages: &[ChatMessage],
        answer: &ChatResponse,
    ) {
        let mut kept: Vec<ChatMessage> = messages.iter().skip(self.skip).cloned().collect();
        let text = (!answer.content.is_empty()).then(|| answer.content.clone());
        kept.push(ChatMessage::assistant(text, answer.tool_calls.clone()));
        let response = KeptResponse {
            id: id.to_owned(),
            client: client.to_owned(),
            messages: kept,
        };
        if let Err(error) = self.store.keep_response(response).await {
            tracing::error!(id, %error, "a Responses answer could not be kept for previous_response_id");
        }
    }
}
