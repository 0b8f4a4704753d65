//! The turns of the hub's callers: start one in the background or in the caller's
//! task, follow a thread, cancel a turn, answer a permission, decline what a client
//! that left can no longer answer. Each entry checks the caller's role once, plans the
//! turn (`plan.rs`) and drives the plan; live state is `live.rs`'s.

use std::sync::Arc;

use agentplane_core::{PermissionDecision, PermissionId, ThreadId, TurnId};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::feeds::{DisconnectGuard, FeedObserver, TeeObserver};
use super::stream::{EventStream, Scope};
use super::{Hub, HubError};
use crate::identity::{Access, AsCaller, Caller};
use crate::models::TaskSize;
use crate::permissions;
use crate::ports::{PermissionPolicy, PermissionRecord, TurnStatus};
use crate::services::identity::security_event;
use crate::turn::{BegunTurn, TurnObserver, TurnOutcome};

/// A turn started in the background, with the stream of its events.
pub struct StartedTurn {
    pub thread: ThreadId,
    pub turn: TurnId,
    pub events: EventStream,
    /// Declines the turn's pending permissions if dropped before the turn ends: a
    /// client that goes away cannot approve anything (fail-closed).
    pub guard: DisconnectGuard,
}

impl Hub {
    /// Starts a turn in the background and returns the stream of its events.
    /// `Conflict` while another turn of the thread runs.
    pub async fn start_turn(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
    ) -> Result<StartedTurn, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "starting a turn")?;
        self.start_planned(caller.client(), caller.roles().names(), thread, input, None)
            .await
    }

    /// [`Hub::start_turn`] with the caller's task-size hint for provider routing
    /// (`None`: estimated from the conversation's user text).
    pub async fn start_turn_sized(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
        size: Option<TaskSize>,
    ) -> Result<StartedTurn, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "starting a turn")?;
        let client = caller.client();
        self.start_planned(client, caller.roles().names(), thread, input, size)
            .await
    }

    /// Plans the turn, then drives it on a task of its own.
    async fn start_planned(
        self: &Arc<Self>,
        client: &str,
        roles: Vec<String>,
        thread: &ThreadId,
        input: String,
        size: Option<TaskSize>,
    ) -> Result<StartedTurn, HubError> {
        let (live, lease) = self.subscribe_feed(thread);
        let mut plan = self
            .plan_turn((client, roles), thread, input, false, size)
            .await?;
        let turn = plan.begun.turn().clone();
        let cancel = self.register(&plan.begun, client);
        let hub = self.clone();
        self.tasks.spawn(
            async move {
                let agent = plan.request.agent.name.clone();
                let observer = FeedObserver {
                    hub: &hub,
                    agent: &agent,
                };
                let turn = plan.begun.turn().clone();
                let shadow = plan.shadow.take();
                if let Err(e) = plan.drive(&hub.deps, &observer, cancel).await {
                    tracing::error!(%turn, error = %e, "a turn could not be recorded");
                }
                hub.unregister(&turn);
                hub.shadow_turn(shadow);
            }
            // The request's span (if traces are exported) is the turn's parent.
            .in_current_span(),
        );
        Ok(StartedTurn {
            thread: thread.clone(),
            turn: turn.clone(),
            events: EventStream::new(
                self.clone(),
                thread.clone(),
                Scope::Turn { turn: turn.clone() },
                live,
                lease,
            ),
            guard: DisconnectGuard {
                hub: self.clone(),
                turn,
            },
        })
    }

    /// Runs a turn in the caller's task with the caller's observer (the CLI), while
    /// still publishing its events to subscribers. Nobody can answer permission
    /// requests of such a turn, so they are declined at once (fail-closed).
    pub async fn run_turn_here(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        input: String,
        observer: &dyn TurnObserver,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "starting a turn")?;
        let client = caller.client();
        // No shadow copy: the caller (the CLI's one-shot `run`) exits right after, and
        // a shadow turn cut off by the exit would only be left `interrupted`.
        let mut plan = self
            .plan_turn((client, caller.roles().names()), thread, input, false, None)
            .await?;
        plan.request.permissions = None;
        let turn = plan.begun.turn().clone();
        // The turn stops on either the caller's token or the registered one (a cancel
        // through the hub, from this replica or another: an execution's turn).
        let registered = self.register(&plan.begun, client);
        let stop = registered.clone();
        let forward = cancel.clone();
        let watcher = tokio::spawn(async move {
            forward.cancelled().await;
            registered.cancel();
        });
        let agent = plan.request.agent.name.clone();
        let observer = TeeObserver {
            hub: self,
            agent: &agent,
            inner: observer,
        };
        let outcome = plan.drive(&self.deps, &observer, stop).await;
        watcher.abort();
        self.unregister(&turn);
        Ok(outcome?)
    }

    /// Events of a thread after `after`, then live ones, each exactly once.
    pub async fn subscribe(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        thread: &ThreadId,
        after: u64,
    ) -> Result<EventStream, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "following a thread")?;
        let client = caller.client();
        self.thread(client, thread).await?;
        let (live, lease) = self.subscribe_feed(thread);
        Ok(EventStream::new(
            self.clone(),
            thread.clone(),
            Scope::Thread { after },
            live,
            lease,
        ))
    }

    /// Cancels a running turn of this client.
    pub async fn cancel_turn(
        &self,
        caller: &(impl AsCaller + ?Sized),
        turn: &TurnId,
    ) -> Result<(), HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "cancelling a turn")?;
        let client = caller.client();
        let token = self.live.cancel_token(turn, Some(client));
        if let Some(token) = token {
            token.cancel();
            return Ok(());
        }
        match self.cancel_suspended(client, turn).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            // Decided and resumed meanwhile, here or elsewhere: it runs; cancel it below.
            Err(HubError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        // Not running here: tell "finished" apart from "no such turn" for its owner only.
        let record = self.deps.store.turn(turn).await?;
        match record {
            // Another replica on the same database runs it: the request reaches it
            // through the store (ADR 0027), and the answer is the owner's.
            Some(record)
                if record.status == TurnStatus::Running
                    && self.thread(client, &record.thread_id).await.is_ok() =>
            {
                self.cancel_elsewhere(turn).await
            }
            Some(record) if self.thread(client, &record.thread_id).await.is_ok() => {
                Err(HubError::Conflict(format!("turn {turn} is not running")))
            }
            _ => Err(HubError::NotFound(format!("turn {turn}"))),
        }
    }

    /// A person's decision on a permission. A malformed decision declines it
    /// (fail-closed) and is reported as `InvalidArgument`.
    pub async fn resolve_permission(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &PermissionId,
        decision: &str,
    ) -> Result<PermissionRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "answering a permission")?;
        let client = caller.client();
        let record = self
            .deps
            .store
            .permission(id)
            .await?
            .ok_or_else(|| HubError::NotFound(format!("permission {id}")))?;
        match &record.policy {
            // An approval policy asked for a person: decided as its approvals are.
            Some(asked) => self.may_decide_asked(&caller, &record, asked).await?,
            None => {
                self.thread(client, &record.thread_id)
                    .await
                    .map_err(|_| HubError::NotFound(format!("permission {id}")))?;
            }
        }
        let (decision, reason, malformed) = match permissions::parse_decision(decision) {
            Ok(decision) => (
                decision,
                format!("{} by client {client}", decision.as_str()),
                None,
            ),
            Err(message) => (
                PermissionDecision::Declined,
                "declined: the decision was malformed".to_owned(),
                Some(message),
            ),
        };
        let (record, event) = permissions::settle(
            self.deps.store.as_ref(),
            &self.broker,
            id,
            decision,
            &reason,
        )
        .await?;
        let Some(event) = event else {
            return Err(HubError::Conflict(format!(
                "permission {id} was already resolved"
            )));
        };
        self.publish(&event);
        match malformed {
            Some(message) => Err(HubError::InvalidArgument(message)),
            None => Ok(record),
        }
    }

    /// Who may answer a permission an approval policy asked for: with approvers, only
    /// they (by client, or by a role they hold), else the thread's owner; with four
    /// eyes, never the client whose turn asked; and always with the right to approve.
    async fn may_decide_asked(
        &self,
        caller: &Caller,
        record: &PermissionRecord,
        asked: &PermissionPolicy,
    ) -> Result<(), HubError> {
        let id = &record.id;
        let not_found = || HubError::NotFound(format!("permission {id}"));
        let owner = self
            .deps
            .store
            .thread(&record.thread_id)
            .await?
            .ok_or_else(not_found)?
            .client_id;
        let addressed = super::approvals::names_approver(&asked.approvers, caller);
        if owner != caller.client() && !addressed {
            return Err(not_found());
        }
        self.identity.require(
            caller,
            Access::Approve,
            "answering a permission a policy asked for",
        )?;
        if !asked.approvers.is_empty() && !addressed {
            security_event(
                caller,
                "forbidden",
                &format!("permission {id} is not addressed to it"),
            );
            return Err(HubError::Forbidden(format!(
                "permission {id} is asked by policy `{}` and may be decided only by {}",
                asked.policy,
                asked.approvers.join(", ")
            )));
        }
        if asked.separate && owner == caller.client() {
            security_event(caller, "forbidden", &format!("self-approval of {id}"));
            return Err(HubError::Forbidden(format!(
                "permission {id} needs a separate approver (policy `{}`): the client whose \
                 turn asked cannot decide it",
                asked.policy
            )));
        }
        Ok(())
    }

    /// Registers a begun turn as running here, so it can be cancelled.
    pub(super) fn register(&self, begun: &BegunTurn, client: &str) -> CancellationToken {
        self.live.register(begun.turn(), begun.thread(), client)
    }

    /// Forgets a turn that ended here, and its feed if nobody follows it.
    pub(super) fn unregister(&self, turn: &TurnId) {
        if let Some(thread) = self.live.unregister(turn) {
            self.release_feed(&thread);
        }
    }

    /// Declines the pending permissions of a turn whose client went away.
    pub(super) async fn client_gone(&self, turn: &TurnId) {
        for id in self.broker.pending_of(turn) {
            match permissions::settle(
                self.deps.store.as_ref(),
                &self.broker,
                &id,
                PermissionDecision::Declined,
                "declined: the client disconnected",
            )
            .await
            {
                Ok((_, Some(event))) => self.publish(&event),
                Ok((_, None)) => {}
                Err(e) => tracing::warn!(%id, error = %e, "could not decline a permission"),
            }
        }
    }
}
