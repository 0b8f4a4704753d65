//! Events: the immutable, sequenced record of everything that happens in a turn.
//!
//! The event log is the source of truth (design, "Events are the source of truth"): the
//! CLI's progress, the runlog export and later the SSE stream, history, costs and audit
//! are all views of these records. A kind, once written, keeps its meaning; new fields
//! are added as optional so old logs still read.

use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;
use crate::ids::{ThreadId, TurnId};
use crate::tool::ToolErrorKind;

/// A stored event. `seq` is gapless and increasing per thread; the store assigns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub thread_id: ThreadId,
    pub turn_id: TurnId,
    pub seq: u64,
    /// RFC 3339 UTC timestamp, assigned by the store when written.
    pub ts: String,
    #[serde(flatten)]
    pub payload: EventPayload,
}

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
}

impl ToolStatus {
    /// The name used in events and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
        }
    }
}

/// A person's answer to a permission request. Anything but an explicit approval is a
/// decline: permissions fail closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionDecision {
    Approved,
    Declined,
}

impl PermissionDecision {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Declined => "declined",
        }
    }
}

/// How a person (or the clock) decided an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// Run the call exactly as planned.
    Approved,
    /// Run the call with arguments a person edited (validated against the tool's schema).
    Edited,
    /// Do not run it; the feedback goes back to the model.
    Rejected,
    /// Nobody decided in time: a rejection.
    Expired,
}

impl ApprovalOutcome {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Edited => "edited",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
        }
    }

    /// Whether the call runs.
    pub fn runs(self) -> bool {
        matches!(self, Self::Approved | Self::Edited)
    }
}

/// Micro-dollars as dollars, for display and JSON.
pub fn usd_of_micros(micros: u64) -> f64 {
    micros as f64 / 1_000_000.0
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model called `finish_task` with a valid result.
    Finished,
    /// The model answered in plain text without tool calls (the fallback result).
    TextAnswer,
    /// The turn used its allowed number of model calls.
    StepLimit,
    /// The user or a client cancelled the turn.
    Cancelled,
    /// The turn failed; an `error` event precedes this one.
    Error,
    /// The process ended while the turn was running; set on the next start.
    Interrupted,
}

impl StopReason {
    /// The name used in events, the turns table and exit summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Finished => "finished",
            Self::TextAnswer => "text_answer",
            Self::StepLimit => "step_limit",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
        }
    }

    /// Whether the turn produced a result its caller can use.
    pub fn is_success(self) -> bool {
        matches!(self, Self::Finished | Self::TextAnswer)
    }
}

/// One file in a `workspace_changed` event: its path relative to the workspace, its
/// size and the SHA-256 of its content (for a deleted file: as it was before the turn).
/// `sha256` is absent for a file over the hashing limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Why policy decided a request as it did, recorded with the decision: the policy
/// set's version, the verdict (`allow`, `deny`, `approval`), the deciding policy, every
/// policy that matched and the reason in words. Never holds an argument's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyExplanation {
    /// The set's content hash (`sha256:` and 16 hex digits).
    pub policy_set: String,
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    pub matched: Vec<String>,
    pub reason: String,
}

/// What happened. Serialized with its `kind` beside the event's other fields, so a
/// runlog line reads `{"thread_id":…,"seq":3,"ts":…,"kind":"tool_call_planned",…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventPayload {
    TurnStarted {
        agent: String,
        input: String,
        model: String,
        workspace: String,
        /// The agent version the turn runs (ADR 0016); absent in logs written before
        /// versions existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_version: Option<String>,
        /// Set on a shadow run: the thread whose turn this one copies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shadow_of: Option<String>,
    },
    /// Text streamed by the model. Consecutive deltas may be coalesced into one event.
    MessageDelta {
        text: String,
    },
    ToolCallPlanned {
        call_id: String,
        tool: String,
        /// The parsed arguments; `null` when the model sent text that is not JSON.
        arguments: serde_json::Value,
        args_preview_hash: String,
        /// An external agent's own title for the call, kept beside our tool name
        /// (`tool` is what policies see: `write_file`, `run_command`…).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// The model wrote this call as text (or as its result, for `finish_task`) and
        /// the engine recovered it (ADR 0032). Absent, never `false`, in stored events.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        recovered: bool,
    },
    /// An external agent sent a planned call's arguments later (`rawInput` in a
    /// `tool_call_update`): from here on they, and their hash, are the call's.
    ToolCallArguments {
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
        args_preview_hash: String,
    },
    ToolCallResult {
        call_id: String,
        tool: String,
        status: ToolStatus,
        latency_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_type: Option<ToolErrorKind>,
        /// What the model was told, after the output cap.
        output: String,
        #[serde(default)]
        truncated: bool,
        args_preview_hash: String,
    },
    /// The turn waits for a person to allow one tool call, exactly as planned.
    PermissionRequired {
        permission_id: String,
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
        /// The answers the person may give (`approved`, `declined`).
        options: Vec<String>,
        /// What will actually run if approved (the resolved program, arguments,
        /// environment and confinement of a `run_command`), when the tool can say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runs: Option<String>,
        /// The `approval_required` policy the ask answers for, when one applies (an
        /// external agent's ask): only its approvers may decide it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// The answer, or the reason none came (timeout, disconnect, restart).
    PermissionResolved {
        permission_id: String,
        decision: PermissionDecision,
        reason: String,
    },
    /// A connection a tool's program asked of the egress proxy, and what the proxy
    /// decided (`docs/security.md`): `destination` as asked (`host:port`); `detail`
    /// is where it went (the addresses) or why not. A refused one is also a
    /// `security_event` of type `network_denied`.
    Egress {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        tool: String,
        destination: String,
        allowed: bool,
        detail: String,
    },
    /// A refused attempt to leave the agent's confinement.
    SecurityEvent {
        event_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        detail: String,
    },
    /// Tokens of one model call. `reported` is false when the server sent no usage.
    Usage {
        provider: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        reported: bool,
    },
    /// What one model call cost, priced from the configured table (local models: 0).
    Cost {
        provider: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        /// Exact, for sums.
        usd_micros: u64,
        /// The same amount in dollars, for people.
        usd: f64,
    },
    /// A tool call that policy sends to a person: the turn is suspended (no worker
    /// held) until a decision or the expiry.
    ApprovalRequested {
        approval_id: String,
        call_id: String,
        tool: String,
        /// The exact arguments; `null` when `retention.tool_args = "hash"`.
        arguments: serde_json::Value,
        args_preview_hash: String,
        policy: String,
        approvers: Vec<String>,
        expires_at: String,
        /// Why policy asked for approval; the resumed call is decided again against
        /// the set then in force (its hash is compared with this one's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explanation: Option<Box<PolicyExplanation>>,
    },
    /// The decision; for `edited`, the arguments that will run (`null` under "hash").
    ApprovalDecided {
        approval_id: String,
        outcome: ApprovalOutcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
        /// Who decided: a client id, or `expiry`.
        by: String,
        /// How the decider proved it: `key:key_…`, `oidc:SUBJECT`, `token`, or
        /// `claimed` (a server without keys). Absent for an expiry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decider: Option<String>,
    },
    /// Something the turn did that policy does not allow, found by the audit after it.
    PolicyViolation {
        policy: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        detail: String,
    },
    /// A policy refused something before it happened: a turn (`time_window`,
    /// `tool_access`, `rate_limit`, `budget`) or one tool call (also `data_scope`). Every
    /// refusal by a policy is recorded with this one kind.
    PolicyDenied {
        policy: String,
        /// The policy type: `tool_access`, `time_window`, `data_scope`, `rate_limit`,
        /// `budget`.
        policy_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        detail: String,
        /// Why, as the policies decided it (absent for rate limits and budgets, which
        /// count rather than decide, and in logs written before explanations).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explanation: Option<Box<PolicyExplanation>>,
    },
    /// An audit-mode policy selected a request: what it would have decided (never
    /// carried out).
    PolicyAudited {
        policy: String,
        policy_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// `allow`, `deny` or `approval`.
        would: String,
        reason: String,
        policy_set: String,
    },
    /// A content policy found something on a surface (`turn_input`, `model_output`,
    /// `tool_arguments`, `tool_results`): which detector, where (byte offsets in the text
    /// as the policy saw it; for arguments, in the string at `pointer`), and what it did
    /// (`redact`, `deny`, `flag`). Never the text found.
    ContentFinding {
        policy: String,
        surface: String,
        detector: String,
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pointer: Option<String>,
        start: u64,
        end: u64,
    },
    /// A model call failed upstream on provider `from` and goes on with `to`. Text
    /// streamed before this event came from the failed attempt; the deltas after it
    /// restart the answer. `code` and `message` are the failed attempt's error.
    ProviderFailover {
        from: String,
        to: String,
        code: ErrorCode,
        message: String,
    },
    /// The plan an external (ACP) agent announced, as it sent it; a later plan replaces
    /// an earlier one.
    Plan {
        entries: serde_json::Value,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// What changed in the workspace during a turn (files created, modified and
    /// deleted; never their content), found by comparing scans before and after it.
    /// `complete` is false when the scan stopped at its limits (`limit` says which).
    WorkspaceChanged {
        created: Vec<FileChange>,
        modified: Vec<FileChange>,
        deleted: Vec<FileChange>,
        complete: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
    /// An A2A (Agent2Agent protocol) request that named or created this thread: one
    /// we served (`direction` "in") or one we sent to a remote agent ("out"). The method,
    /// the task and context ids, the protocol version and the outcome (`ok` or the
    /// JSON-RPC error code); never the message's content.
    A2aRequest {
        direction: String,
        method: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
        protocol_version: String,
        outcome: String,
    },
    TurnCompleted {
        stop_reason: StopReason,
        /// The `finish_task` arguments, `{"text": …}` for a text answer, `null` otherwise.
        result: serde_json::Value,
    },
}

impl EventPayload {
    /// The kind's name, as stored in the `kind` column and sent as the SSE `event:`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TurnStarted { .. } => "turn_started",
            Self::MessageDelta { .. } => "message_delta",
            Self::ToolCallPlanned { .. } => "tool_call_planned",
            Self::ToolCallArguments { .. } => "tool_call_arguments",
            Self::ToolCallResult { .. } => "tool_call_result",
            Self::PermissionRequired { .. } => "permission_required",
            Self::PermissionResolved { .. } => "permission_resolved",
            Self::Egress { .. } => "egress",
            Self::SecurityEvent { .. } => "security_event",
            Self::Usage { .. } => "usage",
            Self::Cost { .. } => "cost",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalDecided { .. } => "approval_decided",
            Self::PolicyViolation { .. } => "policy_violation",
            Self::PolicyDenied { .. } => "policy_denied",
            Self::PolicyAudited { .. } => "policy_audited",
            Self::ContentFinding { .. } => "content_finding",
            Self::ProviderFailover { .. } => "provider_failover",
            Self::Plan { .. } => "plan",
            Self::Error { .. } => "error",
            Self::WorkspaceChanged { .. } => "workspace_changed",
            Self::A2aRequest { .. } => "a2a_request",
            Self::TurnCompleted { .. } => "turn_completed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_flat_with_their_kind_and_read_back() {
        let event = Event {
            thread_id: ThreadId::new(),
            turn_id: TurnId::new(),
            seq: 3,
            ts: "2026-01-01T00:00:00Z".into(),
            payload: EventPayload::ToolCallResult {
                call_id: "c1".into(),
                tool: "write_file".into(),
                status: ToolStatus::Error,
                latency_ms: 4,
                error_type: Some(ToolErrorKind::SandboxViolation),
                output: "path escapes the workspace".into(),
                truncated: false,
                args_preview_hash: "ab".into(),
            },
        };
        let json = serde_json::to_value(&event).expect("serialize");
        assert_eq!(json["kind"], "tool_call_result");
        assert_eq!(json["error_type"], "sandbox_violation");
        assert_eq!(json["seq"], 3);
        let back: Event = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, event);
        assert_eq!(back.payload.kind(), "tool_call_result");
    }

    #[test]
    fn a2a_requests_carry_ids_and_outcome_never_content() {
        let payload = EventPayload::A2aRequest {
            direction: "in".into(),
            method: "SendMessage".into(),
            task: Some("turn_1".into()),
            context: Some("thr_1".into()),
            protocol_version: "1.0".into(),
            outcome: "ok".into(),
        };
        let json = serde_json::to_value(&payload).expect("serialize");
        assert_eq!(json["kind"], "a2a_request");
        assert_eq!(payload.kind(), "a2a_request");
        let mut fields: Vec<&String> = json.as_object().expect("object").keys().collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "context",
                "direction",
                "kind",
                "method",
                "outcome",
                "protocol_version",
                "task"
            ]
        );
        let back: EventPayload = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, payload);
    }
}
