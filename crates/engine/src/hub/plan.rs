//! A turn planned in one place, then driven (ADR 0043).
//!
//! [`Hub::plan_turn`] decides everything a turn needs before it begins, in this order:
//! the input's limits, the thread (tenancy), the agent version its traffic routes to,
//! the workspace checked at use (ADR 0040), admission (`admission.rs`), the context
//! (summary, recent turns, input), the task's size (once, for the whole turn), the
//! model and whether its server makes native calls, and the driver (our own loop, or
//! an external agent over ACP). It then begins the turn in the store and returns a
//! [`TurnPlan`]. [`TurnPlan::drive`] runs it; nothing goes back to the hub in between.

use std::sync::Arc;

use agentplane_core::{ChatMessage, ThreadId, ToolCallMode};
use tokio_util::sync::CancellationToken;

use super::shadows::ShadowCopy;
use super::state::Hub;
use crate::context::{self, PastTurn};
use crate::error::HubError;
use crate::external_turn::run_external_turn;
use crate::models::TaskSize;
use crate::ports::ExternalAgent;
use crate::services::versions::Routed;
use crate::turn::{
    BegunTurn, EngineError, PermissionSettings, TurnDeps, TurnObserver, TurnOutcome, TurnRequest,
    run_turn, start_turn,
};

/// Longest accepted turn input, in characters (what the API documents).
pub const MAX_INPUT_CHARS: usize = 65_536;

/// What runs a turn.
pub(super) enum Driver {
    /// The model-and-tools loop (`crate::turn`).
    Native,
    /// An external agent over ACP (`crate::external_turn`).
    External(Arc<dyn ExternalAgent>),
}

/// A turn begun in the store with everything it needs to run.
pub(super) struct TurnPlan {
    pub(super) begun: BegunTurn,
    pub(super) request: TurnRequest,
    pub(super) driver: Driver,
    /// What a shadow run of the agent's shadow version copies, if it has one.
    pub(super) shadow: Option<ShadowCopy>,
}

impl TurnPlan {
    /// Runs the turn with its driver.
    pub(super) async fn drive(
        self,
        deps: &TurnDeps,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, EngineError> {
        match self.driver {
            Driver::External(agent) => {
                run_external_turn(
                    deps,
                    self.begun,
                    self.request,
                    agent.as_ref(),
                    observer,
                    cancel,
                )
                .await
            }
            Driver::Native => run_turn(deps, self.begun, self.request, observer, cancel).await,
        }
    }
}

impl Hub {
    /// Plans a turn of `client` on `thread` and begins it (see the module comment).
    /// `hint` is the caller's task size for routing; `None`: estimated from the user
    /// text. An internal turn (a compaction) is not admitted and has no shadow.
    pub(super) async fn plan_turn(
        &self,
        (client, roles): (&str, Vec<String>),
        thread: &ThreadId,
        input: String,
        internal: bool,
        hint: Option<TaskSize>,
    ) -> Result<TurnPlan, HubError> {
        self.accepting()?;
        if input.trim().is_empty() {
            return Err(HubError::InvalidArgument(
                "input must not be empty".to_owned(),
            ));
        }
        if input.chars().count() > MAX_INPUT_CHARS {
            return Err(HubError::InvalidArgument(format!(
                "input is longer than {MAX_INPUT_CHARS} characters"
            )));
        }
        let record = self.thread(client, thread).await?;
        let Routed {
            agent,
            version: agent_version,
            shadowed,
        } = self.versions.route(&record).await?;
        // Checked again at every turn, before anything runs in it (ADR 0040).
        let workspace = self
            .usable_workspace(thread, &agent.name, &input, &record.cwd)
            .await?;
        if !internal {
            self.admit_turn(client, thread, &agent, &input, &record.cwd)
                .await?;
        }
        // Content policies on the input, before it is stored anywhere.
        let (input, notes) = if internal {
            (input, Vec::new())
        } else {
            self.check_input(
                (client, &roles),
                thread,
                &agent,
                &agent_version,
                input,
                &record.cwd,
            )
            .await?
        };
        let past = self
            .past_turns(thread, self.config.context.recent_turns)
            .await?;
        let context = context::build(
            record.summary.as_deref(),
            &past,
            &input,
            self.config.context,
        );
        // Estimated once, from the user text, for every call of the turn.
        let size = hint.unwrap_or_else(|| {
            let mut messages = context.history.clone();
            messages.push(ChatMessage::user(context.input.clone()));
            TaskSize::estimate(&messages)
        });
        let external = self.external.get(&agent.name).cloned();
        // An external agent's "model" is the agent process itself: nothing to resolve.
        let model = match &external {
            Some(external) => external.label(),
            None => self.resolve_model(&agent, size).await?,
        };
        // `auto` constrains from the first call when the server cannot make native calls,
        // or the model was seen writing its calls as text in an earlier turn. Only an
        // agent with a result to constrain to can use what the probe says.
        let native_tools = match agent.tool_calls {
            ToolCallMode::Auto if agent.output_schema.is_some() && external.is_none() => {
                if self.deps.providers.text_calls_seen(&model) {
                    Some(false)
                } else {
                    self.model_capabilities(&agent).await.native_tools
                }
            }
            _ => None,
        };
        let shadow = (!internal && shadowed).then(|| ShadowCopy {
            thread: record.clone(),
            version: agent_version.clone(),
            input: input.clone(),
        });
        let request = TurnRequest {
            ensembles: self.toolbox.ensembles(&agent, thread, client),
            agent,
            client: client.to_owned(),
            model,
            input: context.input,
            history: context.history,
            permissions: Some(PermissionSettings {
                broker: self.broker.clone(),
                timeout: self.config.permission_timeout,
            }),
            workspace,
            size: Some(size),
            agent_version: Some(agent_version),
            shadow_of: None,
            native_tools,
            notes,
            roles,
        };
        let begun = start_turn(&self.deps, thread, &input, internal, &request).await?;
        Ok(TurnPlan {
            begun,
            request,
            driver: external.map_or(Driver::Native, Driver::External),
            shadow,
        })
    }

    /// The thread's last `limit` answered, non-internal turns as context. A turn's
    /// context reads as many as it considers (`ContextBudget::recent_turns`), not the
    /// thread's whole past.
    pub(super) async fn past_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<PastTurn>, HubError> {
        Ok(self
            .deps
            .store
            .answered_turns(thread, limit)
            .await?
            .into_iter()
            .map(|t| PastTurn {
                answer: t
                    .result
                    .as_ref()
                    .map(context::answer_text)
                    .unwrap_or_default(),
                input: t.input,
            })
            .collect())
    }
}
