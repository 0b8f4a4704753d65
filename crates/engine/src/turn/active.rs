//! A turn the store has begun: `BegunTurn`, the proof a caller holds, and `ActiveTurn`,
//! the running turn every step of the loop records through, with the policy facts each
//! step selects on. The loop itself (`mod.rs`) and the steps (the sibling files) add
//! their own methods; nothing here calls a model or a tool.

use std::sync::Arc;

use agentplane_core::policy::PolicySet;
use agentplane_core::{Event, EventPayload, FINISH_TASK, ThreadId, TurnId, Usage};

use super::outcome::TurnObserver;
use super::request::{TurnDeps, TurnRequest};
use crate::governance::rules::{self, RequestContext};
use crate::models::TaskSize;

/// A turn the store has begun: proof that it is the thread's one running turn.
/// Only `begin_turn` makes one, and `run_turn` consumes it, so a turn runs once.
#[derive(Debug)]
pub struct BegunTurn {
    pub(super) thread: ThreadId,
    pub(super) turn: TurnId,
    /// Its `turn_started`, when it was stored with the turn ([`start_turn`]): the
    /// driver shows it to the observer instead of recording it again.
    pub(super) started: Option<Event>,
}

impl BegunTurn {
    /// Its stored `turn_started`, taken once by the driver that shows it.
    pub(crate) fn take_started(&mut self) -> Option<Event> {
        self.started.take()
    }

    pub fn thread(&self) -> &ThreadId {
        &self.thread
    }

    pub fn turn(&self) -> &TurnId {
        &self.turn
    }
}

/// A turn that has begun in the store: the only way to record its events.
pub(super) struct ActiveTurn<'a> {
    pub(super) deps: &'a TurnDeps,
    pub(super) thread: ThreadId,
    pub(super) turn: TurnId,
    pub(super) observer: &'a dyn TurnObserver,
    pub(super) usage: Usage,
    /// The agent's data scopes in force, given to every tool call.
    pub(super) scope: Option<Arc<Vec<agentplane_core::policy::DataScope>>>,
    /// The names of the `data_scope` policies behind `scope`, for refusals.
    pub(super) scope_policies: String,
    /// The task-size hint for routing (the request's, or the suspended turn's).
    pub(super) size: Option<TaskSize>,
    /// Events held for the turn's next write ([`Self::hold`]).
    pub(super) held: std::sync::Mutex<Vec<EventPayload>>,
}

impl ActiveTurn<'_> {
    /// Whether the tool `name` is offered to the model: listed, and named in the
    /// "unknown tool" answer. A tool a policy denies outright is neither, so that
    /// answer never names what the list hides.
    pub(super) fn offers(&self, policies: &PolicySet, request: &TurnRequest, name: &str) -> bool {
        name == FINISH_TASK
            || !rules::denied_outright(policies, &self.policy_ctx(request, Some(name)))
    }

    pub(super) fn policy_ctx<'r>(
        &self,
        request: &'r TurnRequest,
        tool: Option<&'r str>,
    ) -> RequestContext<'r> {
        RequestContext::new(&request.agent.name, &request.agent.tags, &request.client)
            .tool(tool)
            .version(request.agent_version.as_deref())
            .workspace(request.workspace.as_path())
            .roles(&request.roles)
    }
}
