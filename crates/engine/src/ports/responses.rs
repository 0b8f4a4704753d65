//! `ResponseStore`: the conversations of Responses-API answers kept for
//! `previous_response_id` (`crate::gateway`: a client sends only what is new and names
//! the answer it follows). A port of its own, like `KeyStore`, so the event-store
//! decorators stay as they are.
//!
//! Invariants every implementation keeps:
//! - a kept conversation belongs to the client that made it: looked up by id *and*
//!   client, so another client's id is indistinguishable from one never kept;
//! - it is written once and never changed (a second keep of the same id is `Conflict`);
//! - what is kept has passed the content policies both ways (the engine keeps the
//!   screened request and answer, never the raw ones).

use agentplane_core::ChatMessage;
use async_trait::async_trait;

use super::store::StoreError;

/// One answer's whole conversation: every message the call was given (no system
/// message: a Responses call's `instructions` are not carried over) and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptResponse {
    /// The gateway call's completion id.
    pub id: String,
    pub client: String,
    pub messages: Vec<ChatMessage>,
}

#[async_trait]
pub trait ResponseStore: Send + Sync {
    /// Keeps `response`, timestamped by the store. `Conflict` if its id is kept already.
    async fn keep_response(&self, response: KeptResponse) -> Result<(), StoreError>;

    /// The messages of the response `id` that `client` kept, if it is younger than
    /// `max_age_secs`.
    async fn kept_response(
        &self,
        id: &str,
        client: &str,
        max_age_secs: u64,
    ) -> Result<Option<Vec<ChatMessage>>, StoreError>;
}

/// A kept conversation as every store writes it: JSON chat messages (every control
/// character, NUL included, escaped, so any text column takes it).
pub fn encode_conversation(messages: &[ChatMessage]) -> Result<String, StoreError> {
    serde_json::to_string(messages)
        .map_err(|e| StoreError::Backend(format!("a kept conversation: {e}")))
}

/// A kept conversation read back.
pub fn decode_conversation(text: &str) -> Result<Vec<ChatMessage>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Backend(format!("a kept conversation: {e}")))
}
