//! The hub's governance entry points: turn-level policy checks, and approvals —
//! listing, deciding, resuming the suspended turn, and expiring what nobody decided.
//!
//! A suspended turn holds no task: its state is in the approval. A decision (or the
//! expiry sweep) records the outcome, then the turn is claimed (exactly once, by the
//! store) and resumed in a new task. A decision that lands while no process runs is
//! resumed by the next start-up's sweep, so approvals survive restarts.

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::policy::Timestamp;
use agentplane_core::{ApprovalId, ApprovalOutcome, StopReason};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::feeds::FeedObserver;
use super::{Hub, HubError};
use crate::identity::{Access, AsCaller, Caller};
use crate::ports::{ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStatus};
use crate::schema::Schema;
use crate::services::identity::security_event;
use crate::services::versions::Routed;
use crate::turn::{self, PermissionSettings, TurnRequest};

/// Longest feedback accepted with a rejection, in characters.
pub const MAX_FEEDBACK_CHARS: usize = 4_000;
/// How often pending approvals are checked for expiry.
const EXPIRY_SWEEP: Duration = Duration::from_secs(1);

/// A person's answer to an approval.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalAnswer {
    /// Run the call as planned.
    Approve,
    /// Run it with these arguments instead (checked against the tool's schema).
    Edit { arguments: Value },
    /// Do not run it; the feedback goes back to the model.
    Reject { feedback: Option<String> },
}

impl Hub {
    /// Approvals a caller may see: those of its client's threads, and those naming it
    /// as an approver (by client, or `role:NAME` for a role it holds). Oldest first.
    pub async fn list_approvals(
        &self,
        caller: &(impl AsCaller + ?Sized),
        pending_only: bool,
    ) -> Result<Vec<ApprovalRecord>, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Approve, "listing approvals")?;
        let all = self
            .deps
            .store
            .list_approvals(&ApprovalQuery {
                pending_only,
                ..ApprovalQuery::default()
            })
            .await?;
        Ok(all.into_iter().filter(|a| visible_to(a, &caller)).collect())
    }

    /// One approval the caller may see; any other is `NotFound`.
    pub async fn approval(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ApprovalId,
    ) -> Result<ApprovalRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Approve, "reading an approval")?;
        match self.deps.store.approval(id).await? {
            Some(record) if visible_to(&record, &caller) => Ok(record),
            _ => Err(HubError::NotFound(format!("approval {id}"))),
        }
    }

    /// Decides a pending approval and resumes its turn. When the approval names
    /// approvers, only they may decide (by client, or by a role they hold); otherwise
    /// the owner decides. With four eyes (`separate_approver`), the client whose turn
    /// made the call never decides it. The decision records the decider's proof.
    pub async fn decide_approval(
        self: &Arc<Self>,
        caller: &(impl AsCaller + ?Sized),
        id: &ApprovalId,
        answer: ApprovalAnswer,
    ) -> Result<ApprovalRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Approve, "deciding an approval")?;
        let client = caller.client();
        let record = self.approval(&*caller, id).await?;
        if !record.approvers.is_empty() && !names_approver(&record.approvers, &caller) {
            security_event(
                &caller,
                "forbidden",
                &format!("approval {id} is not addressed to it"),
            );
            return Err(HubError::Forbidden(format!(
                "approval {id} may be decided only by {}",
                record.approvers.join(", ")
            )));
        }
        if record.client_id == client && turn::approval_separate(&record) {
            security_event(&caller, "forbidden", &format!("self-approval of {id}"));
            return Err(HubError::Forbidden(format!(
                "approval {id} needs a separate approver: the client that made the call \
                 cannot decide it"
            )));
        }
        if let ApprovalStatus::Decided(outcome) = record.status {
            return Err(HubError::Conflict(format!(
                "approval {id} was already {}",
                outcome.as_str()
            )));
        }
        let (outcome, arguments, feedback) = match answer {
            ApprovalAnswer::Approve => (ApprovalOutcome::Approved, None, None),
            ApprovalAnswer::Edit { arguments } => {
                let schema = turn::approval_schema(&record).ok_or_else(|| {
                    HubError::Conflict(format!(
                        "approval {id} was stored by another agentplane version and cannot be edited"
                    ))
                })?;
                let schema = Schema::compile(&schema).map_err(HubError::InvalidArgument)?;
                schema.check(&arguments).map_err(|problems| {
                    HubError::InvalidArgument(format!(
                        "the edited arguments do not match the schema of `{}`: {problems}",
                        record.tool
                    ))
                })?;
                (ApprovalOutcome::Edited, Some(arguments), None)
            }
            ApprovalAnswer::Reject { feedback } => {
                if let Some(text) = &feedback
                    && text.chars().count() > MAX_FEEDBACK_CHARS
                {
                    return Err(HubError::InvalidArgument(format!(
                        "feedback is longer than {MAX_FEEDBACK_CHARS} characters"
                    )));
                }
                (ApprovalOutcome::Rejected, None, feedback)
            }
        };
        let decided = self
            .record_decision(
                id,
                outcome,
                arguments,
                feedback,
                (client, Some(caller.principal().to_string())),
            )
            .await?;
        self.resume(id).await;
        Ok(decided)
    }

    /// Writes a decision and shows its event to the thread's subscribers.
    async fn record_decision(
        &self,
        id: &ApprovalId,
        outcome: ApprovalOutcome,
        arguments: Option<Value>,
        feedback: Option<String>,
        (by, decider): (&str, Option<String>),
    ) -> Result<ApprovalRecord, HubError> {
        let governance = &self.deps.governance;
        let (record, event) = self
            .deps
            .store
            .decide_approval(
                id,
                ApprovalDecision {
                    outcome,
                    arguments,
                    feedback,
                    by: by.to_owned(),
                    decider,
                    arguments_in_event: governance.retention
                        == crate::governance::ArgsRetention::Full,
                },
            )
            .await?;
        self.publish(&event);
        governance.tap(&record.agent, &event);
        Ok(record)
    }

    /// Claims a decided approval and runs the rest of its turn in the background. A
    /// claim that fails (already taken, still pending) means someone else resumes it.
    pub(super) async fn resume(self: &Arc<Self>, id: &ApprovalId) {
        if self.accepting().is_err() {
            // The next start-up resumes it.
            return;
        }
        // A gateway call's approval resumes no turn of an agent (`services/mcp_gateway`).
        if self.mcp_gateway.resume(id).await {
            return;
        }
        let (begun, approval) = match turn::claim_approval(&self.deps, id).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::debug!(%id, error = %e, "approval not resumed here");
                return;
            }
        };
        let thread = match self.deps.store.thread(begun.thread()).await {
            Ok(Some(thread)) => thread,
            other => {
                tracing::error!(%id, ?other, "the thread of a decided approval is gone");
                return;
            }
        };
        // The thread's version, as when the turn began (ADR 0016).
        let (agent, agent_version) = match self.versions.route(&thread).await {
            Ok(Routed { agent, version, .. }) => (agent, version),
            Err(e) => {
                // The agent or its version was removed while the turn waited: end the
                // turn rather than leave it suspended forever.
                let message = match e {
                    HubError::InvalidArgument(_) | HubError::NotFound(_) => {
                        format!("agent `{}` no longer exists", thread.agent)
                    }
                    other => other.to_string(),
                };
                self.end_orphan(&begun, &message).await;
                return;
            }
        };
        // The workspace is checked again before the waiting call runs in it (ADR 0040).
        let workspace = match self.workspace_at_use(&thread.cwd) {
            Ok(workspace) => workspace,
            Err(refusal) => {
                self.end_moved(&begun, refusal).await;
                return;
            }
        };
        let model =
            turn::approval_model(&approval).unwrap_or_else(|| self.wanted_model(&agent).to_owned());
        let request = TurnRequest {
            size: None,
            ensembles: self
                .toolbox
                .ensembles(&agent, begun.thread(), &thread.client_id),
            agent,
            client: thread.client_id.clone(),
            model,
            input: String::new(),
            history: Vec::new(),
            permissions: Some(PermissionSettings {
                broker: self.broker.clone(),
                timeout: self.config.permission_timeout,
            }),
            workspace,
            agent_version: Some(agent_version),
            shadow_of: None,
            native_tools: None,
            notes: Vec::new(),
            // The roles of whoever started the turn, kept with the approval.
            roles: turn::approval_roles(&approval),
        };
        let (_live, lease) = self.subscribe_feed(begun.thread());
        let cancel = self.register(&begun, &thread.client_id);
        let hub = self.clone();
        self.tasks.spawn(async move {
            let _lease = lease;
            let agent = request.agent.name.clone();
            let observer = FeedObserver {
                hub: &hub,
                agent: &agent,
            };
            let turn = begun.turn().clone();
            if let Err(e) =
                turn::resume_turn(&hub.deps, begun, request, approval, &observer, cancel).await
            {
                tracing::error!(%turn, error = %e, "a resumed turn could not be recorded");
            }
            hub.unregister(&turn);
        });
    }

    /// Ends a suspended turn whose workspace can no longer be used: a moved one is
    /// a breach (`security_event` `workspace_moved`, `error` `FORBIDDEN`).
    async fn end_moved(
        &self,
        begun: &turn::BegunTurn,
        refusal: super::workspaces::WorkspaceRefusal,
    ) {
        use super::workspaces::{WORKSPACE_MOVED, WorkspaceRefusal};
        let message = match refusal {
            WorkspaceRefusal::Gone(message) => message,
            WorkspaceRefusal::Moved(detail) => {
                let why = [
                    agentplane_core::EventPayload::SecurityEvent {
                        event_type: WORKSPACE_MOVED.to_owned(),
                        tool: None,
                        detail: detail.clone(),
                    },
                    agentplane_core::EventPayload::Error {
                        code: agentplane_core::ErrorCode::Forbidden,
                        message: detail.clone(),
                    },
                ];
                for payload in why {
                    match self
                        .deps
                        .store
                        .append(begun.thread(), begun.turn(), payload)
                        .await
                    {
                        Ok(event) => self.publish(&event),
                        Err(e) => {
                            tracing::error!(turn = %begun.turn(), error = %e, "could not record a refusal")
                        }
                    }
                }
                detail
            }
        };
        self.end_orphan(begun, &message).await;
    }

    async fn end_orphan(&self, begun: &turn::BegunTurn, message: &str) {
        let ended = self
            .deps
            .store
            .complete_turn(
                begun.thread(),
                begun.turn(),
                StopReason::Error,
                serde_json::json!({ "error": message }),
            )
            .await;
        match ended {
            Ok(event) => self.publish(&event),
            Err(e) => tracing::error!(turn = %begun.turn(), error = %e, "could not end a turn"),
        }
    }

    /// Cancels a turn suspended on an approval: the approval is rejected and the turn
    /// ends `cancelled`. `false` when the turn is not suspended.
    pub(super) async fn cancel_suspended(
        &self,
        client: &str,
        turn: &agentplane_core::TurnId,
    ) -> Result<bool, HubError> {
        let open = self
            .deps
            .store
            .list_approvals(&ApprovalQuery {
                client: Some(client.to_owned()),
                ..ApprovalQuery::default()
            })
            .await?
            .into_iter()
            .find(|a| &a.turn_id == turn && !a.resumed);
        let Some(approval) = open else {
            return Ok(false);
        };
        if approval.status == ApprovalStatus::Pending {
            self.record_decision(
                &approval.id,
                ApprovalOutcome::Rejected,
                None,
                Some("the turn was cancelled".to_owned()),
                (client, None),
            )
            .await?;
        }
        let (begun, _) = turn::claim_approval(&self.deps, &approval.id).await?;
        let event = self
            .deps
            .store
            .complete_turn(
                begun.thread(),
                begun.turn(),
                StopReason::Cancelled,
                Value::Null,
            )
            .await?;
        self.publish(&event);
        self.deps.governance.tap(&approval.agent, &event);
        Ok(true)
    }

    /// Runs until shutdown: at start, resumes turns whose approval was decided while
    /// no process ran; then, every second, expires pending approvals past their time
    /// (a rejection) and resumes their turns.
    pub fn start_governance(self: &Arc<Self>) {
        let hub = self.clone();
        let stopping = self.stopping.clone();
        tokio::spawn(async move {
            hub.resume_decided().await;
            loop {
                tokio::select! {
                    _ = stopping.cancelled() => return,
                    _ = tokio::time::sleep(EXPIRY_SWEEP) => {}
                }
                hub.expire_due().await;
            }
        });
    }

    async fn resume_decided(self: &Arc<Self>) {
        let waiting = self
            .deps
            .store
            .list_approvals(&ApprovalQuery {
                awaiting_resume: true,
                ..ApprovalQuery::default()
            })
            .await;
        match waiting {
            Ok(waiting) => {
                for approval in waiting {
                    self.resume(&approval.id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not list decided approvals"),
        }
    }

    async fn expire_due(self: &Arc<Self>) {
        let pending = match self
            .deps
            .store
            .list_approvals(&ApprovalQuery {
                pending_only: true,
                ..ApprovalQuery::default()
            })
            .await
        {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e, "could not list pending approvals");
                return;
            }
        };
        let now = Timestamp::now();
        for approval in pending {
            let due = approval
                .expires_at
                .parse::<Timestamp>()
                .map(|at| at <= now)
                // An unreadable expiry fails closed: it counts as expired.
                .unwrap_or(true);
            if !due {
                continue;
            }
            match self
                .record_decision(
                    &approval.id,
                    ApprovalOutcome::Expired,
                    None,
                    None,
                    ("expiry", None),
                )
                .await
            {
                Ok(_) => self.resume(&approval.id).await,
                // Decided meanwhile by a person: that decision resumes it.
                Err(HubError::Conflict(_)) => {}
                Err(e) => tracing::warn!(id = %approval.id, error = %e, "could not expire"),
            }
        }
    }

    /// A token cancelled when the hub shuts down.
    pub fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }
}

/// The thread's owner and the named approvers see an approval.
fn visible_to(approval: &ApprovalRecord, caller: &Caller) -> bool {
    approval.client_id == caller.client() || names_approver(&approval.approvers, caller)
}

/// Whether the approval's `approvers` name the caller: its client, or `role:NAME` for
/// a role it holds. An approval with an approver list is decided only by them.
pub(super) fn names_approver(approvers: &[String], caller: &Caller) -> bool {
    approvers.iter().any(|a| match a.strip_prefix("role:") {
        Some(role) => caller.roles().has_named(role),
        None => a == caller.client(),
    })
}
