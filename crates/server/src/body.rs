//! The JSON bodies shared by several endpoint groups (threads, turns, events,
//! permissions, agents, history), with their OpenAPI schemas. A body that only one
//! group uses lives beside that group's handlers in `routes/` (approvals, costs,
//! executions, versions, policies; `routes/gateway/` for OpenAI's and Anthropic's formats).
//!
//! Responses are built from the hub's records by plain `From` conversions. Requests
//! refuse unknown fields, so a typo (`"titel"`) is a 400, not a silently ignored value.
//! Nothing here calls the hub.

use agentplane_core::{Event, PermissionDecision, StopReason};
use agentplane_engine::hub::{Compaction, History, HistoryTurn};
use agentplane_engine::models::ModelStatus;
use agentplane_engine::ports::{
    PermissionRecord, PermissionStatus, ThreadRecord, TurnRecord, TurnStatus,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

// ----- requests ------------------------------------------------------------------------

/// `POST /v1/threads`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateThreadBody {
    /// The agent's name, as listed by `GET /v1/agents`.
    pub agent: String,
    /// The thread's working directory: absolute and existing.
    #[schema(pattern = "^/", min_length = 1)]
    pub cwd: String,
    /// A title for people (at most 200 characters).
    #[serde(default)]
    #[schema(max_length = 200)]
    pub title: Option<String>,
    /// Pin the thread to this staging or production version of the agent; left out,
    /// the version is drawn by the agent's traffic weights (ADR 0016).
    #[serde(default)]
    #[schema(max_length = 64)]
    pub agent_version: Option<String>,
}

/// `POST /v1/threads/{id}/turns`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartTurnBody {
    /// What the user asks: not blank, at most 65,536 characters (the hub's
    /// `MAX_INPUT_CHARS`).
    #[schema(min_length = 1, max_length = 65536, pattern = "\\S")]
    pub input: String,
    /// A task-size hint for provider routing (`[[routing.rules]] size`); without it
    /// the size is estimated from the conversation's user text.
    #[serde(default)]
    pub size: Option<TaskSizeName>,
}

/// A task size's wire name.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskSizeName {
    Small,
    Medium,
    Large,
}

impl From<TaskSizeName> for agentplane_engine::models::TaskSize {
    fn from(size: TaskSizeName) -> Self {
        match size {
            TaskSizeName::Small => Self::Small,
            TaskSizeName::Medium => Self::Medium,
            TaskSizeName::Large => Self::Large,
        }
    }
}

/// `POST /v1/permissions/{id}`. Anything but exactly `approved` or `declined` is a 400
/// and declines the permission (fail-closed).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    #[schema(value_type = DecisionName)]
    pub decision: String,
}

/// A decision's wire name (documentation of [`DecisionBody::decision`]).
#[allow(dead_code)] // Only describes the wire for the OpenAPI document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionName {
    Approved,
    Declined,
}

// ----- responses -----------------------------------------------------------------------

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub ok: bool,
}

/// `GET /v1/agents`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

/// An agent and the model its turns would use right now.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    /// The agent's name; threads name their agent by it.
    pub id: String,
    pub name: String,
    pub description: String,
    /// Its tool ensembles (`fs`, `shell`, `web`).
    pub ensembles: Vec<String>,
    pub model: ModelView,
    /// The providers its turns go to, in failover order, each with its health (the
    /// route of a small task; `[routing]` rules by size may pick others).
    pub providers: Vec<ProviderView>,
    /// Its versions, lowest first (ADR 0016).
    pub versions: Vec<VersionSummary>,
    /// Percent of new threads per version.
    pub traffic: std::collections::BTreeMap<String, u32>,
    /// The version that gets a shadow copy of production turns, if any.
    pub shadow: Option<String>,
    /// How the processes its tools start are confined by the kernel (ADR 0023).
    pub sandbox: SandboxView,
}

/// An agent's kernel confinement, as in force on this machine.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxView {
    /// False only where the operator opted out (`sandbox.required = false`).
    pub required: bool,
    /// What the kernel enforces, in words; says so loudly when the agent opted out
    /// or processes are refused.
    pub in_force: String,
    /// Paths readable besides the defaults (`sandbox.read_only`).
    pub read_only: Vec<String>,
    /// Paths writable besides the workspace (`sandbox.read_write`).
    pub read_write: Vec<String>,
}

/// A model provider and its health (circuit breaker over upstream failures).
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderView {
    /// Its name in `[providers.NAME]` (`default` for `[llm]`).
    pub name: String,
    /// The API it speaks (`openai`, `anthropic`; `openai-compatible` for `[llm]`).
    pub kind: String,
    /// The model it always uses, when configured.
    pub model: Option<String>,
    /// False while its circuit is open: it is skipped while others can answer.
    pub up: bool,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    /// RFC 3339.
    pub last_success: Option<String>,
    /// RFC 3339.
    pub last_failure: Option<String>,
    /// Seconds until an open circuit lets a call through again.
    pub retry_in_secs: Option<u64>,
}

impl From<agentplane_engine::models::ProviderReport> for ProviderView {
    fn from(report: agentplane_engine::models::ProviderReport) -> Self {
        let health = report.health;
        Self {
            name: report.name,
            kind: report.kind,
            model: report.model,
            up: health.up,
            consecutive_failures: health.consecutive_failures,
            last_error: health.last_error,
            last_success: health.last_success,
            last_failure: health.last_failure,
            retry_in_secs: health.retry_in_secs,
        }
    }
}

/// One version of an agent, in the agent list.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionSummary {
    pub version: String,
    /// `draft`, `staging` or `production`.
    #[schema(pattern = "^(draft|staging|production)$")]
    pub stage: String,
    /// Percent of new threads it gets.
    pub weight: u32,
    pub shadow: bool,
    /// The agent's configured definition.
    pub baseline: bool,
}

/// Whether an agent's model is usable.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelView {
    pub status: ModelState,
    /// The model turns will call; when unavailable, the one that was asked for.
    pub model: String,
    /// Why a substitute is used or why no model is usable.
    pub detail: Option<String>,
    /// What the model server says the model can do (probed at discovery; ADR 0032).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<CapabilitiesView>,
}

/// What a model server says a model can do; `null`: it did not say.
#[derive(Debug, Serialize, ToSchema)]
pub struct CapabilitiesView {
    /// Whether the server returns native `tool_calls` for this model.
    pub native_tools: Option<bool>,
    /// Whether the server constrains answers to a JSON schema (`constrained` mode).
    pub json_schema: Option<bool>,
    /// Where this came from: `llama.cpp /props`, `ollama /api/show`, or empty.
    pub source: String,
}

impl From<&agentplane_engine::ports::Capabilities> for CapabilitiesView {
    fn from(c: &agentplane_engine::ports::Capabilities) -> Self {
        Self {
            native_tools: c.native_tools,
            json_schema: c.json_schema,
            source: c.source.clone(),
        }
    }
}

/// Where an agent's model stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelState {
    /// The configured model is on the server.
    Ready,
    /// The configured model is missing; another one will be used.
    Substitute,
    /// No usable model (the server is down, or offers none that fits).
    Unavailable,
}

impl From<&ModelStatus> for ModelView {
    fn from(status: &ModelStatus) -> Self {
        match status {
            ModelStatus::Ready { model } => Self {
                status: ModelState::Ready,
                model: model.clone(),
                detail: None,
                capabilities: None,
            },
            ModelStatus::Substitute { wanted, model } => Self {
                status: ModelState::Substitute,
                model: model.clone(),
                detail: Some(format!("`{wanted}` is not on the model server")),
                capabilities: None,
            },
            ModelStatus::Unavailable { wanted, error } => Self {
                status: ModelState::Unavailable,
                model: wanted.clone(),
                detail: Some(error.clone()),
                capabilities: None,
            },
        }
    }
}

/// `GET /v1/threads`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadList {
    pub threads: Vec<ThreadView>,
    /// The `cursor` of the next page; absent on the last one (so a listing that fits
    /// one page keeps the shape it always had).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A thread of the calling client.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadView {
    #[schema(example = "thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    pub id: String,
    pub agent: String,
    /// The canonical working directory.
    pub cwd: String,
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The latest compaction summary.
    pub summary: Option<String>,
    /// The agent version the thread is pinned to (ADR 0016).
    pub agent_version: Option<String>,
    /// For a hidden shadow thread: the thread whose turns it copies.
    pub shadow_of: Option<String>,
}

impl From<ThreadRecord> for ThreadView {
    fn from(thread: ThreadRecord) -> Self {
        Self {
            id: thread.id.to_string(),
            agent: thread.agent,
            cwd: thread.cwd,
            title: thread.title,
            created_at: thread.created_at,
            summary: thread.summary,
            agent_version: thread.agent_version,
            shadow_of: thread.shadow_of.map(|t| t.to_string()),
        }
    }
}

/// `GET /v1/threads/{id}/history`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryView {
    pub thread: ThreadView,
    /// In the order they began.
    pub turns: Vec<TurnView>,
}

impl From<History> for HistoryView {
    fn from(history: History) -> Self {
        Self {
            thread: history.thread.into(),
            turns: history.turns.into_iter().map(TurnView::from).collect(),
        }
    }
}

/// A turn in a history.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnView {
    #[schema(example = "turn_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    pub id: String,
    pub input: String,
    pub status: TurnState,
    /// Why it ended; absent while running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReasonName>,
    pub created_at: String,
    pub ended_at: Option<String>,
    /// Compaction turns; hidden unless `includeInternal=1`.
    pub internal: bool,
    /// The agent version the turn ran (ADR 0016); `null` for turns from before versions.
    pub agent_version: Option<String>,
    /// The `turn_completed` result; `null` while running or without one.
    #[schema(value_type = Value)]
    pub result: Value,
    /// Its events by `seq`; only with `includeEvents=1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<EventView>>)]
    pub events: Option<Vec<Event>>,
}

/// Whether a turn still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    Running,
    Ended,
}

/// Why a turn ended (see `turn_completed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReasonName {
    Finished,
    TextAnswer,
    StepLimit,
    Cancelled,
    Error,
    Interrupted,
}

impl From<StopReason> for StopReasonName {
    fn from(reason: StopReason) -> Self {
        match reason {
            StopReason::Finished => Self::Finished,
            StopReason::TextAnswer => Self::TextAnswer,
            StopReason::StepLimit => Self::StepLimit,
            StopReason::Cancelled => Self::Cancelled,
            StopReason::Error => Self::Error,
            StopReason::Interrupted => Self::Interrupted,
        }
    }
}

impl From<HistoryTurn> for TurnView {
    fn from(entry: HistoryTurn) -> Self {
        let turn: TurnRecord = entry.turn;
        let (status, stop_reason) = match turn.status {
            TurnStatus::Running => (TurnState::Running, None),
            TurnStatus::Ended(reason) => (TurnState::Ended, Some(reason.into())),
        };
        Self {
            id: turn.id.to_string(),
            input: turn.input,
            status,
            stop_reason,
            created_at: turn.created_at,
            ended_at: turn.ended_at,
            internal: turn.internal,
            agent_version: turn.agent_version,
            result: turn.result.unwrap_or(Value::Null),
            events: entry.events,
        }
    }
}

/// One Server-Sent Event of a turn or thread stream. (In OpenAPI 3.1 the schema of a
/// `text/event-stream` response describes each of its events.)
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Describes what `sse.rs` writes, for the OpenAPI document.
pub struct StreamedEvent {
    /// The event's `seq`; absent on the `error` event of a failed stream.
    #[schema(pattern = "^[0-9]+$")]
    pub id: Option<String>,
    /// The event's kind (an `EventKind`), or `error` for a failed stream.
    #[schema(pattern = "^[a-z_]+$")]
    pub event: String,
    /// The stored event (an `EventView`) as JSON; for a failed stream, the error
    /// envelope.
    #[schema(content_media_type = "application/json")]
    pub data: String,
}

/// A stored event: these fields, plus the fields of its kind. Also the `data:` of each
/// SSE event, whose `id:` is `seq` and whose `event:` is `kind`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Describes `agentplane_core::Event` for the OpenAPI document.
pub struct EventView {
    pub thread_id: String,
    pub turn_id: String,
    /// Gapless and increasing per thread, from 1.
    pub seq: u64,
    /// RFC 3339, UTC.
    pub ts: String,
    pub kind: EventKind,
}

/// The kinds of events.
#[allow(dead_code)] // Only describes the wire for the OpenAPI document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    TurnStarted,
    MessageDelta,
    ToolCallPlanned,
    /// An external agent sent a planned call's arguments after planning it.
    ToolCallArguments,
    ToolCallResult,
    PermissionRequired,
    PermissionResolved,
    /// A connection a tool's program asked of the egress proxy: `destination`,
    /// `allowed`, `detail` (where it went, or why not).
    Egress,
    SecurityEvent,
    Usage,
    Cost,
    ApprovalRequested,
    ApprovalDecided,
    PolicyViolation,
    /// A policy refused a turn or a tool call before it happened.
    PolicyDenied,
    /// What an audit-mode policy would have decided of a request (never enforced).
    PolicyAudited,
    /// A content policy's finding: detector, surface, place, action (never the text).
    ContentFinding,
    ProviderFailover,
    /// An external (ACP) agent's plan.
    Plan,
    Error,
    /// Files created, modified and deleted in the workspace during a turn.
    WorkspaceChanged,
    /// An A2A request served ("in") or sent ("out") on the thread: method, ids,
    /// protocol version, outcome (never the message).
    A2aRequest,
    TurnCompleted,
}

/// `POST /v1/turns/{id}/cancel`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cancelled {
    pub cancelled: bool,
}

/// `POST /v1/threads/{id}/compact`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompactionView {
    /// The internal turn that wrote the summary.
    pub turn_id: String,
    /// The thread's new summary.
    pub summary: String,
}

/// The head of a chain: the last chained event (ADR 0048).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainHeadView {
    pub seq: u64,
    /// Lowercase hex SHA-256, as `docs/audit.md` computes it.
    pub hash: String,
}

/// `GET /v1/threads/{id}/audit`: what an outside system anchors.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadAuditView {
    pub thread_id: String,
    /// The last chained event; `null` until the thread has one.
    pub head: Option<ChainHeadView>,
    /// How many events the thread has.
    pub events: u64,
    /// The first seq the chain covers; earlier events predate the chain (docs/audit.md).
    pub chained_since_seq: u64,
}

impl From<agentplane_engine::services::reports::ThreadAudit> for ThreadAuditView {
    fn from(audit: agentplane_engine::services::reports::ThreadAudit) -> Self {
        Self {
            thread_id: audit.thread_id.to_string(),
            head: audit.head.map(|h| ChainHeadView {
                seq: h.seq,
                hash: h.hash,
            }),
            events: audit.events,
            chained_since_seq: audit.chained_since_seq,
        }
    }
}

impl From<Compaction> for CompactionView {
    fn from(compaction: Compaction) -> Self {
        Self {
            turn_id: compaction.turn.to_string(),
            summary: compaction.summary,
        }
    }
}

/// A permission request and its outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionView {
    #[schema(example = "perm_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f")]
    pub id: String,
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    /// The tool that waits.
    pub tool: String,
    /// The exact arguments it will be called with.
    #[schema(value_type = Value)]
    pub arguments: Value,
    pub options: Vec<String>,
    pub status: PermissionState,
    /// Who or what resolved it (a client, a timeout, a disconnect, a restart).
    pub reason: Option<String>,
    pub created_at: String,
}

/// Where a permission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionState {
    Pending,
    Approved,
    Declined,
}

impl From<PermissionRecord> for PermissionView {
    fn from(record: PermissionRecord) -> Self {
        Self {
            id: record.id.to_string(),
            thread_id: record.thread_id.to_string(),
            turn_id: record.turn_id.to_string(),
            call_id: record.call_id,
            tool: record.tool,
            arguments: record.arguments,
            options: record.options,
            status: match record.status {
                PermissionStatus::Pending => PermissionState::Pending,
                PermissionStatus::Resolved(PermissionDecision::Approved) => {
                    PermissionState::Approved
                }
                PermissionStatus::Resolved(PermissionDecision::Declined) => {
                    PermissionState::Declined
                }
            },
            reason: record.reason,
            created_at: record.created_at,
        }
    }
}

#[cfg(test)]
mod event_kind_tests {
    use agentplane_core::EventPayload;

    use super::EventKind;

    /// Exhaustive on purpose: a new event kind does not compile here until the
    /// documented `EventKind` has it too.
    fn documented(payload: &EventPayload) -> EventKind {
        match payload {
            EventPayload::TurnStarted { .. } => EventKind::TurnStarted,
            EventPayload::MessageDelta { .. } => EventKind::MessageDelta,
            EventPayload::ToolCallPlanned { .. } => EventKind::ToolCallPlanned,
            EventPayload::ToolCallArguments { .. } => EventKind::ToolCallArguments,
            EventPayload::WorkspaceChanged { .. } => EventKind::WorkspaceChanged,
            EventPayload::ToolCallResult { .. } => EventKind::ToolCallResult,
            EventPayload::PermissionRequired { .. } => EventKind::PermissionRequired,
            EventPayload::PermissionResolved { .. } => EventKind::PermissionResolved,
            EventPayload::Egress { .. } => EventKind::Egress,
            EventPayload::SecurityEvent { .. } => EventKind::SecurityEvent,
            EventPayload::Usage { .. } => EventKind::Usage,
            EventPayload::Cost { .. } => EventKind::Cost,
            EventPayload::ApprovalRequested { .. } => EventKind::ApprovalRequested,
            EventPayload::ApprovalDecided { .. } => EventKind::ApprovalDecided,
            EventPayload::PolicyViolation { .. } => EventKind::PolicyViolation,
            EventPayload::PolicyDenied { .. } => EventKind::PolicyDenied,
            EventPayload::PolicyAudited { .. } => EventKind::PolicyAudited,
            EventPayload::ContentFinding { .. } => EventKind::ContentFinding,
            EventPayload::ProviderFailover { .. } => EventKind::ProviderFailover,
            EventPayload::Plan { .. } => EventKind::Plan,
            EventPayload::Error { .. } => EventKind::Error,
            EventPayload::A2aRequest { .. } => EventKind::A2aRequest,
            EventPayload::TurnCompleted { .. } => EventKind::TurnCompleted,
        }
    }

    #[test]
    fn documented_kinds_are_the_wire_kinds() {
        let samples = [
            EventPayload::Cost {
                provider: "p".into(),
                model: "m".into(),
                input_tokens: 1,
                output_tokens: 1,
                usd_micros: 1,
                usd: 0.000001,
            },
            EventPayload::PolicyViolation {
                policy: "p".into(),
                tool: None,
                call_id: None,
                detail: "d".into(),
            },
            EventPayload::MessageDelta { text: "t".into() },
            EventPayload::ProviderFailover {
                from: "a".into(),
                to: "b".into(),
                code: agentplane_core::ErrorCode::UpstreamUnavailable,
                message: "m".into(),
            },
        ];
        for payload in samples {
            let documented = serde_json::to_value(documented(&payload)).expect("kind");
            assert_eq!(documented, payload.kind());
        }
    }
}
