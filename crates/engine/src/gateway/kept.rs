//! Responses-API answers kept for `previous_response_id` (the `ResponseStore` port): a
//! client names the answer it follows and sends only what is new; the conversation so
//! far is read back under the caller's own client id — another client's id answers
//! exactly as one never kept — and goes before the new input, after the `instructions`
//! (which, as OpenAI has it, are not carried over). What is kept is what passed the
//! content policies: the screened request and the screened, recovered answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentplane_core::{ChatMessage, ChatResponse};
use tokio_util::task::TaskTracker;

use crate::error::HubError;
use crate::ports::{KeptResponse, ResponseStore};

/// How long a kept answer can be followed: OpenAI keeps them 30 days.
pub const KEPT_FOR_SECS: u64 = 30 * 24 * 60 * 60;

/// The kept answers: written by a task of their own, so the answer never waits for the
/// store, and found meanwhile in `pending` (a client that chains at once finds its
/// answer before the row is written). A graceful stop writes them all (the hub's task
/// tracker waits).
pub struct KeptResponses {
    store: Arc<dyn ResponseStore>,
    tasks: TaskTracker,
    /// By completion id, until written (or failed to be: logged).
    pending: Mutex<HashMap<String, KeptResponse>>,
}

impl std::fmt::Debug for KeptResponses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptResponses").finish_non_exhaustive()
    }
}

impl KeptResponses {
    /// Answers kept in `store` by tasks of `tasks`.
    pub fn new(store: Arc<dyn ResponseStore>, tasks: TaskTracker) -> Arc<Self> {
        Arc::new(Self {
            store,
            tasks,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// The conversation of the answer `id` of `client`, or `NotFound` (the caller names
    /// the id as its client knows it).
    pub(crate) async fn previous(
        &self,
        client: &str,
        id: &str,
    ) -> Result<Vec<ChatMessage>, HubError> {
        let waiting = {
            let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending
                .get(id)
                .filter(|kept| kept.client == client)
                .map(|kept| kept.messages.clone())
        };
        if let Some(messages) = waiting {
            return Ok(messages);
        }
        // A row leaves `pending` only once written: a miss there is found here.
        self.store
            .kept_response(id, client, KEPT_FOR_SECS)
            .await?
            .ok_or_else(|| HubError::NotFound(format!("a kept response `{id}` of this client")))
    }

    /// Keeps `response`: at once for [`Self::previous`], in the store by a task.
    fn keep(self: &Arc<Self>, response: KeptResponse) {
        let id = response.id.clone();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), response.clone());
        let this = Arc::clone(self);
        self.tasks.spawn(async move {
            // A failure is logged, not the call's: the answer was made, paid for and
            // is the client's; only following it will fail.
            if let Err(error) = this.store.keep_response(response).await {
                tracing::error!(id, %error, "a Responses answer could not be kept for previous_response_id");
            }
            this.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
    }
}

/// Where and how an admitted call's conversation is kept once answered.
pub(crate) struct Keep {
    pub kept: Arc<KeptResponses>,
    /// Leading messages that are not kept (the `instructions`).
    pub skip: usize,
}

impl Keep {
    /// Keeps `messages` and `answer` under `id`.
    pub fn keep(self, id: &str, client: &str, messages: &[ChatMessage], answer: &ChatResponse) {
        let mut kept: Vec<ChatMessage> = messages.iter().skip(self.skip).cloned().collect();
        let text = (!answer.content.is_empty()).then(|| answer.content.clone());
        kept.push(ChatMessage::assistant(text, answer.tool_calls.clone()));
        self.kept.keep(KeptResponse {
            id: id.to_owned(),
            client: client.to_owned(),
            messages: kept,
        });
    }
}
