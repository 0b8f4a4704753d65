//! Shadow runs (ADR 0016): the agent's shadow version replays a production turn that
//! has just ended on a hidden copy of its thread, never executing a tool whose spec says
//! `side_effects`; and the hidden shadow threads of a client's thread.

use std::sync::Arc;

use agentplane_core::{Stage, ThreadId};

use super::{Hub, HubError};
use crate::identity::{Access, AsCaller};
use crate::ports::{NewThread, ThreadRecord};
use crate::turn::{NoObserver, TurnRequest, run_turn, start_turn};

/// A production turn to copy to the agent's shadow version, taken when it began.
pub(super) struct ShadowCopy {
    pub(super) thread: ThreadRecord,
    /// The version the production turn ran.
    pub(super) version: String,
    pub(super) input: String,
}

impl Hub {
    /// Starts the agent's shadow version on a copy of a production turn that has just
    /// ended, in the background, when there is a shadow. Called after the production
    /// turn, so the shadow never competes with it for the model (a local model serves
    /// one request at a time) and never delays its result. Never fails and never waits:
    /// whatever happens to the shadow run is logged and recorded on its hidden thread.
    pub(super) fn shadow_turn(self: &Arc<Self>, copy: Option<ShadowCopy>) {
        let Some(copy) = copy else {
            return;
        };
        if !self.versions.stored() {
            return;
        }
        let hub = self.clone();
        self.tasks.spawn(async move {
            if let Err(e) = hub
                .run_shadow(&copy.thread, &copy.version, copy.input)
                .await
            {
                tracing::warn!(thread = %copy.thread.id, error = %e, "shadow run skipped");
            }
        });
    }

    async fn run_shadow(
        self: &Arc<Self>,
        original: &ThreadRecord,
        running: &str,
        input: String,
    ) -> Result<(), HubError> {
        let catalog = self.versions.catalog(&original.agent).await?;
        let Some(shadow) = catalog.shadow() else {
            return Ok(());
        };
        // Only production traffic is copied, and a version is not its own shadow.
        let running_stage = catalog.find(running).map(|(stage, _)| stage);
        if shadow.version == running || running_stage != Some(Stage::Production) {
            return Ok(());
        }
        self.accepting()?;
        let store = self.versions.version_store()?;
        let existing = store
            .shadow_threads(&original.id)
            .await?
            .into_iter()
            .find(|t| t.agent_version.as_deref() == Some(shadow.version.as_str()));
        let thread = match existing {
            Some(thread) => thread,
            None => {
                store
                    .create_shadow_thread(
                        NewThread {
                            id: ThreadId::new(),
                            client_id: original.client_id.clone(),
                            agent: original.agent.clone(),
                            cwd: original.cwd.clone(),
                            title: Some(format!("shadow {} of {}", shadow.version, original.id)),
                            agent_version: None,
                        },
                        &original.id,
                        &shadow.version,
                    )
                    .await?
            }
        };
        let agent = shadow.spec.apply_to(&catalog.baseline);
        let past = self
            .past_turns(&thread.id, self.config.context.recent_turns)
            .await?;
        let context = crate::context::build(
            thread.summary.as_deref(),
            &past,
            &input,
            self.config.context,
        );
        // Routed as the production turn would be: the same estimate from the same text.
        let mut messages = context.history.clone();
        messages.push(agentplane_core::ChatMessage::user(context.input.clone()));
        let size = crate::models::TaskSize::estimate(&messages);
        let model = self.resolve_model(&agent, size).await?;
        let workspace = self.workspace_for_copy(&thread.cwd)?;
        let request = TurnRequest {
            ensembles: self
                .toolbox
                .ensembles(&agent, &thread.id, &thread.client_id),
            agent,
            client: thread.client_id.clone(),
            model,
            input: context.input,
            history: context.history,
            // Nobody answers a shadow's questions; such calls are not executed anyway.
            permissions: None,
            workspace,
            size: Some(size),
            agent_version: Some(shadow.version.clone()),
            shadow_of: Some(original.id.clone()),
            native_tools: None,
            notes: Vec::new(),
            roles: Vec::new(),
        };
        // A previous shadow run still going: this copy is skipped (`Conflict`).
        let begun = start_turn(&self.deps, &thread.id, &input, false, &request).await?;
        let turn = begun.turn().clone();
        let cancel = self.register(&begun, &thread.client_id);
        let outcome = run_turn(&self.deps, begun, request, &NoObserver, cancel).await;
        self.unregister(&turn);
        outcome?;
        Ok(())
    }

    /// The hidden shadow threads of one of the client's threads.
    pub async fn shadow_threads(
        &self,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
    ) -> Result<Vec<ThreadRecord>, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "reading shadow threads")?;
        let client = caller.client();
        self.thread(client, thread).await?;
        match self.versions.version_store() {
            Ok(store) => Ok(store.shadow_threads(thread).await?),
            Err(_) => Ok(Vec::new()),
        }
    }
}
