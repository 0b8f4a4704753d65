//! Suspending a turn on an approval and resuming it from the decision: the turn's
//! state (the snapshot) is stored with the approval, so no task waits for a person.

use std::collections::HashMap;
use std::time::Instant;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, ApprovalOutcome, ChatMessage, ErrorCode, ToolCall, ToolErrorKind, args_preview_hash,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::active::*;
use super::progress::*;
use super::request::*;
use super::tool_gate::*;
use super::tools::*;
use crate::governance::ArgsRetention;
use crate::governance::rules::PolicyExplanation;
use crate::harmony;
use crate::ports::{ApprovalRecord, ApprovalStatus, NewApproval, ToolContext, ToolError};

/// What a suspended turn needs to go on, stored in its approval. Versioned so a
/// snapshot written by an older build is refused clearly rather than misread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Snapshot {
    pub(super) version: u32,
    pub(super) model: String,
    /// Model calls made so far.
    pub(super) step: u32,
    pub(super) messages: Vec<ChatMessage>,
    /// The call waiting for the decision, with its parsed arguments.
    pub(super) pending: ToolCall,
    pub(super) arguments: Value,
    /// The tool's parameter schema, to check edited arguments against.
    pub(super) schema: Value,
    /// The calls of the same step after the waiting one.
    pub(super) queue: Vec<QueuedCall>,
    /// The caller's task-size hint, kept so the resumed turn routes as it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) size: Option<String>,
    /// Four eyes (`separate_approver`): the turn's client may not decide.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) separate_approver: bool,
    /// The hash of the policy set the approval was requested under; the resumed call
    /// is decided again against the set then in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) policy_set: Option<String>,
    /// The roles of the caller who started the turn: the resumed call is decided for
    /// the same caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) roles: Vec<String>,
}

pub(super) const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct QueuedCall {
    pub(super) call: ToolCall,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) refused: Option<(ToolErrorKind, String)>,
    /// Recovered from the model's text (ADR 0032).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) recovered: bool,
}

impl QueuedCall {
    pub(super) fn of(call: &PlannedCall) -> Self {
        match call {
            PlannedCall::Ready(call) => Self {
                call: call.clone(),
                refused: None,
                recovered: false,
            },
            PlannedCall::Recovered(call) => Self {
                call: call.clone(),
                refused: None,
                recovered: true,
            },
            PlannedCall::Refused(call, error) => Self {
                call: call.clone(),
                refused: Some((error.kind, error.message.clone())),
                recovered: false,
            },
        }
    }

    pub(super) fn planned(self) -> PlannedCall {
        match self.refused {
            None if self.recovered => PlannedCall::Recovered(self.call),
            None => PlannedCall::Ready(self.call),
            Some((kind, message)) => {
                let tool = Some(self.call.name.clone());
                PlannedCall::Refused(
                    self.call,
                    harmony::HarmonyError {
                        kind,
                        tool,
                        message,
                    },
                )
            }
        }
    }
}

/// The snapshot of an approval this build wrote (a turn's, or an MCP gateway call's,
/// which says `kind`), as a JSON object; `None` for anything else.
fn known_snapshot(approval: &ApprovalRecord) -> Option<&serde_json::Map<String, Value>> {
    let object = approval.snapshot.as_object()?;
    let ours = object.get("version").and_then(Value::as_u64) == Some(u64::from(SNAPSHOT_VERSION))
        || object.get("kind").and_then(Value::as_str).is_some();
    ours.then_some(object)
}

/// The schema of the tool a suspended call waits to call: what an edit must satisfy.
/// `None` when the approval's snapshot is not one this build wrote.
pub fn approval_schema(approval: &ApprovalRecord) -> Option<Value> {
    known_snapshot(approval)?.get("schema").cloned()
}

/// Whether the approval's policy asked for four eyes. An unreadable snapshot says yes
/// (fail-closed: the owner cannot decide it).
pub fn approval_separate(approval: &ApprovalRecord) -> bool {
    known_snapshot(approval).is_none_or(|s| {
        s.get("separate_approver")
            .is_some_and(|v| v.as_bool() != Some(false))
    })
}

/// The roles of the caller whose call waits on this approval (none when unreadable).
pub fn approval_roles(approval: &ApprovalRecord) -> Vec<String> {
    known_snapshot(approval)
        .and_then(|s| s.get("roles"))
        .and_then(|roles| serde_json::from_value(roles.clone()).ok())
        .unwrap_or_default()
}

/// The model a suspended turn was using.
pub fn approval_model(approval: &ApprovalRecord) -> Option<String> {
    let snapshot: Snapshot = serde_json::from_value(approval.snapshot.clone()).ok()?;
    Some(snapshot.model)
}

impl ActiveTurn<'_> {
    /// Restores a suspended turn from its claimed approval and settles the waiting
    /// call by the decision: run as approved or edited, or answered with the rejection.
    pub(super) async fn take_decision(
        &self,
        approval: ApprovalRecord,
        tools: &HashMap<String, ToolEntry>,
        request: &TurnRequest,
        ctx: &ToolContext,
        cancel: &CancellationToken,
    ) -> Result<(Progress, CallEnd), Stop> {
        let snapshot: Snapshot = serde_json::from_value(approval.snapshot.clone())
            .ok()
            .filter(|s: &Snapshot| s.version == SNAPSHOT_VERSION)
            .ok_or_else(|| {
                failed(
                    ErrorCode::Internal,
                    format!(
                        "approval {} holds a turn state this agentplane cannot read",
                        approval.id
                    ),
                )
            })?;
        let progress = Progress {
            step: snapshot.step,
            messages: snapshot.messages,
            queue: snapshot
                .queue
                .into_iter()
                .map(QueuedCall::planned)
                .collect(),
        };
        let call = snapshot.pending;
        let started = Instant::now();
        let mut span = tracing::Span::none();
        let outcome = match approval.status {
            ApprovalStatus::Decided(outcome) if outcome.runs() => {
                let args = match outcome {
                    ApprovalOutcome::Edited => approval
                        .edited_arguments
                        .clone()
                        .unwrap_or(snapshot.arguments),
                    _ => snapshot.arguments,
                };
                match self
                    .execute(
                        &call,
                        args,
                        tools,
                        request,
                        ctx,
                        cancel,
                        Some(
                            snapshot
                                .policy_set
                                .as_deref()
                                .unwrap_or("an unrecorded set"),
                        ),
                    )
                    .await
                    .map(|(gated, gated_span)| {
                        span = gated_span;
                        gated
                    })? {
                    Gated::Done(outcome) => outcome,
                    // Approved calls are not sent back for approval.
                    Gated::Suspend { .. } => Err(ToolError::new(
                        ToolErrorKind::Rejected,
                        "the approval could not be applied",
                    )),
                }
            }
            status => {
                let why = match status {
                    ApprovalStatus::Decided(ApprovalOutcome::Expired) => {
                        "nobody decided before the approval expired".to_owned()
                    }
                    _ => "a reviewer rejected it".to_owned(),
                };
                let feedback = approval
                    .feedback
                    .as_deref()
                    .map(|f| format!("; feedback: {f}"))
                    .unwrap_or_default();
                Err(ToolError::new(
                    ToolErrorKind::Rejected,
                    format!("`{}` was not run: {why}{feedback}", call.name),
                ))
            }
        };
        let end = self
            .finish_call(call, outcome, started, ctx, request, &span)
            .await?;
        Ok((progress, end))
    }

    /// Stores the approval a call waits for, with the turn's state: the turn is
    /// suspended from here until the decision.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn suspend(
        &self,
        call: &ToolCall,
        arguments: Value,
        schema: Value,
        (policy, approvers, separate, explanation): (String, Vec<String>, bool, PolicyExplanation),
        request: &TurnRequest,
        progress: &Progress,
    ) -> Result<ApprovalId, Stop> {
        let governance = &self.deps.governance;
        let expires = Timestamp::now()
            .checked_add(governance.approval_ttl)
            .unwrap_or(Timestamp::MAX);
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            model: request.model.clone(),
            step: progress.step,
            messages: progress.messages.clone(),
            pending: call.clone(),
            arguments: arguments.clone(),
            schema,
            queue: progress.queue.iter().map(QueuedCall::of).collect(),
            size: self.size.map(|s| s.as_str().to_owned()),
            separate_approver: separate,
            policy_set: Some(explanation.policy_set.clone()),
            roles: request.roles.clone(),
        };
        let snapshot = serde_json::to_value(&snapshot)
            .map_err(|e| failed(ErrorCode::Internal, format!("turn state: {e}")))?;
        let id = ApprovalId::new();
        // `approval_required` follows what was held, and the turn waits from here.
        self.flush().await?;
        let (_, event) = self
            .deps
            .store
            .create_approval(NewApproval {
                id: id.clone(),
                thread_id: self.thread.clone(),
                turn_id: self.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                args_preview_hash: args_preview_hash(&arguments),
                arguments,
                arguments_in_event: governance.retention == ArgsRetention::Full,
                policy,
                approvers,
                expires_at: expires.to_string(),
                explanation: Some(explanation),
                snapshot,
            })
            .await?;
        self.observer.on_event(&event);
        Ok(id)
    }
}
