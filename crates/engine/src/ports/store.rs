//! The store ports: threads (`ThreadStore`), turns and the append-only event log
//! (`TurnLog`), permissions and approvals (`ApprovalStore`), calls and their costs
//! (`CallStore`); `EventStore` is all four, for the turn and the composition root.
//!
//! Invariants every implementation keeps:
//! - `seq` is assigned by the store, starts at 1 and is gapless and increasing per thread;
//! - an event is durable (committed) before `append` returns, so anything streamed from
//!   it can be replayed after a crash;
//! - at most one turn per thread is running; `begin_turn` on a busy thread is `Conflict`;
//! - `complete_turn` writes the `turn_completed` event and the turn's end in one
//!   transaction, so a turn never looks ended without its event or the other way round;
//! - a permission and its `permission_required` event are written together, and so are
//!   its resolution and `permission_resolved`; a permission is resolved at most once;
//! - deleted threads are kept (the log is an audit record) but are never returned.

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, ApprovalOutcome, ErrorCode, Event, EventPayload, PermissionDecision, PermissionId,
    StopReason, ThreadId, TurnId,
};
use async_trait::async_trait;

/// A thread to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewThread {
    pub id: ThreadId,
    /// The owner (`X-Client-ID`); the CLI uses `"local"`.
    pub client_id: String,
    pub agent: String,
    /// The working directory, absolute.
    pub cwd: String,
    pub title: Option<String>,
    /// The version of its agent the thread is pinned to from the start (ADR 0036), so
    /// creating a pinned thread is one write; `None` leaves it to the first turn.
    pub agent_version: Option<String>,
}

/// A stored thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    pub id: ThreadId,
    pub client_id: String,
    pub agent: String,
    pub cwd: String,
    pub title: Option<String>,
    pub created_at: String,
    /// The latest compaction summary of the thread's earlier turns.
    pub summary: Option<String>,
    /// The agent version the thread is pinned to (ADR 0016); `None` until its first
    /// turn for threads created before versions existed.
    pub agent_version: Option<String>,
    /// For a hidden shadow thread: the thread whose turns it copies (ADR 0016).
    pub shadow_of: Option<ThreadId>,
}

/// Where a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStatus {
    Running,
    Ended(StopReason),
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    pub id: TurnId,
    pub thread_id: ThreadId,
    pub input: String,
    pub status: TurnStatus,
    pub created_at: String,
    pub ended_at: Option<String>,
    /// Internal turns (compaction) are hidden from history by default.
    pub internal: bool,
    /// The `turn_completed` result, once ended.
    pub result: Option<serde_json::Value>,
    /// The agent version the turn ran: its thread's, when it began (ADR 0016).
    pub agent_version: Option<String>,
}

/// A permission request to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPermission {
    pub id: PermissionId,
    pub thread_id: ThreadId,
    pub turn_id: TurnId,
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub options: Vec<String>,
    /// What will actually run, when the ensemble can say ([`super::Ensemble::preview`]).
    pub runs: Option<String>,
    /// The approval policy that asked for a person, when one did.
    pub policy: Option<PermissionPolicy>,
}

/// The `approval_required` policy a permission answers for (an external agent's ask
/// that a policy wants approved): as with an approval, only its approvers decide it,
/// and with four eyes not the client whose turn asked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PermissionPolicy {
    pub policy: String,
    #[serde(default)]
    pub approvers: Vec<String>,
    #[serde(default)]
    pub separate: bool,
}

/// Where a permission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionStatus {
    Pending,
    Resolved(PermissionDecision),
}

/// A stored permission request.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRecord {
    pub id: PermissionId,
    pub thread_id: ThreadId,
    pub turn_id: TurnId,
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub options: Vec<String>,
    pub status: PermissionStatus,
    /// Why it was resolved so (a person, a timeout, a disconnect, a restart).
    pub reason: Option<String>,
    pub created_at: String,
    /// The approval policy that asked for a person, when one did.
    pub policy: Option<PermissionPolicy>,
}

/// An approval to store: the exact call, and what the turn needs to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub id: ApprovalId,
    pub thread_id: ThreadId,
    pub turn_id: TurnId,
    pub call_id: String,
    pub tool: String,
    /// The exact arguments, kept in the approval whatever events retain.
    pub arguments: serde_json::Value,
    /// Whether `approval_requested` shows the arguments (`retention.tool_args`).
    pub arguments_in_event: bool,
    pub args_preview_hash: String,
    /// The policy that demanded it.
    pub policy: String,
    pub approvers: Vec<String>,
    /// RFC 3339; an approval still pending then is expired (a rejection).
    pub expires_at: String,
    /// Why policy asked for it, for the `approval_requested` event.
    pub explanation: Option<agentplane_core::event::PolicyExplanation>,
    /// The suspended turn's state, opaque to the store.
    pub snapshot: serde_json::Value,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalStatus {
    Pending,
    Decided(ApprovalOutcome),
}

impl ApprovalStatus {
    /// The name used on the wire and in the store: `pending` or the outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Decided(outcome) => outcome.as_str(),
        }
    }
}

/// A decision to record.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalDecision {
    pub outcome: ApprovalOutcome,
    /// For `Edited`: the arguments to run instead (already validated).
    pub arguments: Option<serde_json::Value>,
    pub feedback: Option<String>,
    /// A client id, or `expiry`.
    pub by: String,
    /// The decider's proof (`key:key_…`, `token`…); `None` for an expiry.
    pub decider: Option<String>,
    /// Whether `approval_decided` shows edited arguments (`retention.tool_args`).
    pub arguments_in_event: bool,
}

/// A stored approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    pub id: ApprovalId,
    pub thread_id: ThreadId,
    pub turn_id: TurnId,
    /// The thread's owner.
    pub client_id: String,
    /// The thread's agent.
    pub agent: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub policy: String,
    pub approvers: Vec<String>,
    pub status: ApprovalStatus,
    /// The arguments an `edited` decision runs.
    pub edited_arguments: Option<serde_json::Value>,
    pub feedback: Option<String>,
    pub decided_by: Option<String>,
    pub created_at: String,
    pub expires_at: String,
    pub decided_at: Option<String>,
    /// Whether the turn has taken the decision and resumed.
    pub resumed: bool,
    pub snapshot: serde_json::Value,
}

/// Which approvals to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalQuery {
    /// Only this client's (through the thread's owner).
    pub client: Option<String>,
    /// Only pending ones.
    pub pending_only: bool,
    /// Only decided ones whose turn has not resumed yet.
    pub awaiting_resume: bool,
    /// At most this many, oldest first.
    pub limit: usize,
}

/// Which model calls to sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostQuery {
    pub client: Option<String>,
    pub agent: Option<String>,
    pub thread: Option<ThreadId>,
    /// RFC 3339, inclusive.
    pub since: Option<String>,
    /// RFC 3339, exclusive.
    pub until: Option<String>,
    /// Also split rows by thread and turn (for per-turn totals; use with a filter).
    pub by_turn: bool,
}

/// Model calls summed over one combination of agent, client, provider, model and UTC
/// day (and thread and turn when asked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostRow {
    pub agent: String,
    pub client: String,
    pub provider: String,
    pub model: String,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub thread: Option<ThreadId>,
    pub turn: Option<TurnId>,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub usd_micros: u64,
}

/// One model call made outside any turn (through the OpenAI-compatible gateway), as
/// recorded for cost reports and budgets. It has no thread and no turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCallRecord {
    /// The gateway completion id (`chatcmpl-…`): unique, sent to the client.
    pub id: agentplane_core::CompletionId,
    /// The calling client (`X-Client-ID`).
    pub client: String,
    /// The agent name policies and budgets saw the call under.
    pub agent: String,
    /// The provider that answered (`ChatModel::provider`).
    pub provider: String,
    /// The model that answered, as the server named it.
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The price of the call, in micro-dollars.
    pub usd_micros: u64,
}

/// One tool call through the MCP gateway, as its log keeps it: who called which tool,
/// what became of it, what it cost. Never its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallRecord {
    pub id: agentplane_core::McpCallId,
    /// RFC 3339, the store's clock; ignored when recording.
    pub ts: String,
    /// The calling client.
    pub client: String,
    /// The agent name policies and budgets saw the call under (`[mcp.gateway] agent`).
    pub agent: String,
    pub server: String,
    /// The tool as the gateway offers it: `SERVER__TOOL`.
    pub tool: String,
    /// `ok`, `error`, `denied`, `rate_limited`, `budget_exceeded`, `rejected`,
    /// `expired` or `invalid`.
    pub status: String,
    /// Why it did not succeed (an error, a refusal's reason); never an argument.
    pub detail: Option<String>,
    /// The policy that refused it or asked for the approval.
    pub policy: Option<String>,
    /// The approval it waited for.
    pub approval: Option<agentplane_core::ApprovalId>,
    pub duration_ms: u64,
    /// What it was charged (`[prices.tools]`), in micro-dollars.
    pub usd_micros: u64,
    /// The answer given, kept for a call that waited for an approval (a task's result
    /// outlives the request that asked for it).
    pub result: Option<serde_json::Value>,
}

/// Which MCP gateway calls to list: newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpCallQuery {
    /// Only this client's.
    pub client: Option<String>,
    /// Only the call that waited for this approval.
    pub approval: Option<agentplane_core::ApprovalId>,
    /// At most this many (0: no limit).
    pub limit: usize,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// The database could not be opened, read or written.
    #[error("event store failure: {0}")]
    Backend(String),
}

impl StoreError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::Conflict(_) => ErrorCode::Conflict,
            Self::Backend(_) => ErrorCode::Internal,
        }
    }
}

/// Threads: who owns them, where they work, their summary.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    async fn create_thread(&self, thread: NewThread) -> Result<ThreadRecord, StoreError>;

    /// A thread that exists and is not deleted.
    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError>;

    /// A client's threads, newest first, deleted ones left out.
    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError>;

    /// Every client's live threads that had a turn begin at or after `since` (every
    /// live thread when `None`), oldest (created first) first; shadow threads left out,
    /// as in [`Self::list_threads`]. For reading the log across clients, as `policy
    /// replay` does; nothing a client sees goes through it.
    async fn threads_active_since(
        &self,
        since: Option<Timestamp>,
    ) -> Result<Vec<ThreadRecord>, StoreError>;

    /// Marks a thread deleted; its turns and events stay for audit. `NotFound` if it
    /// does not exist (or is already deleted), `Conflict` while a turn is running.
    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError>;

    /// Replaces the thread's compaction summary.
    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError>;
}

/// Turns and the append-only event log they write.
#[async_trait]
pub trait TurnLog: Send + Sync {
    /// Starts a turn. `NotFound` without the thread, `Conflict` while another turn of
    /// the thread is running.
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError>;

    /// Starts a turn and appends its first event, `started` (its `turn_started`), in one
    /// transaction, so no crash leaves a turn without its start. Errors as
    /// [`Self::begin_turn`]; nothing is written when either write is refused.
    async fn start_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
        started: EventPayload,
    ) -> Result<(TurnRecord, Event), StoreError>;

    /// Appends one event to a running turn and returns it with its `seq` and `ts`.
    async fn append(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<Event, StoreError>;

    /// Ends a running turn: appends `turn_completed` and records the end, atomically.
    async fn complete_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<Event, StoreError>;

    /// Appends `payloads` to a running turn in order, in one transaction: all or none.
    /// One round trip for the events of one step of a turn (its usage and cost, say).
    /// The stored events come back in order; a store that adds events of its own (the
    /// redacting store's held-back text) returns those too, where they were written.
    async fn append_all(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError>;

    /// [`Self::append_all`] of `before`, then [`Self::complete_turn`], in one
    /// transaction: a turn's last events and its end are one write.
    async fn complete_turn_after(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        before: Vec<EventPayload>,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<(Vec<Event>, Event), StoreError>;

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError>;

    /// A thread's turns in the order they began (internal ones included).
    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError>;

    /// The last `limit` turns of a thread that ended with an answer (`finished` or
    /// `text_answer`), internal ones left out, in the order they began: what a new
    /// turn's context is built from, read without the thread's whole past.
    async fn answered_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<TurnRecord>, StoreError>;

    /// All events of a turn, by `seq`.
    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError>;

    /// Events of a thread with `seq > after`, by `seq`, at most `limit`.
    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError>;

    /// At start-up: ends every turn left running by a previous process as
    /// `interrupted` and returns their ids. A turn suspended on an approval (one whose
    /// approval has not been taken by a resume) is not running and is left alone. Each pending permission of those turns is
    /// first resolved as declined with a reason saying the process stopped (with its
    /// `permission_resolved` event); then `turn_completed` is appended.
    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError>;
}

/// Permissions (a running turn's question) and approvals (a suspended turn's, or a
/// gateway call's, decision), each written with its event.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a pending permission of a running turn and appends its
    /// `permission_required` event, atomically.
    async fn create_permission(
        &self,
        permission: NewPermission,
    ) -> Result<(PermissionRecord, Event), StoreError>;

    /// Resolves a pending permission and appends `permission_resolved`, atomically.
    /// `NotFound` for an unknown id, `Conflict` if it was already resolved.
    async fn resolve_permission(
        &self,
        id: &PermissionId,
        decision: PermissionDecision,
        reason: &str,
    ) -> Result<(PermissionRecord, Event), StoreError>;

    async fn permission(&self, id: &PermissionId) -> Result<Option<PermissionRecord>, StoreError>;

    /// Stores a pending approval of a running turn, which is suspended from then on,
    /// and appends its `approval_requested` event, atomically.
    async fn create_approval(
        &self,
        approval: NewApproval,
    ) -> Result<(ApprovalRecord, Event), StoreError>;

    /// Decides a pending approval and appends `approval_decided`, atomically.
    /// `NotFound` for an unknown id, `Conflict` if it was already decided.
    async fn decide_approval(
        &self,
        id: &ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(ApprovalRecord, Event), StoreError>;

    /// Marks a decided approval as taken by its resuming turn. `Conflict` if it is
    /// pending or was already taken, so a turn resumes exactly once.
    async fn claim_approval(&self, id: &ApprovalId) -> Result<ApprovalRecord, StoreError>;

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;

    /// Approvals matching the query, oldest first.
    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;
}

/// Calls made outside turns (model and MCP gateway calls) and what every call cost.
#[async_trait]
pub trait CallStore: Send + Sync {
    /// Cost events and recorded model calls (`record_model_call`) summed per agent,
    /// client, provider, model and UTC day. Model calls have no thread: a thread filter
    /// leaves them out, and per-turn rows show them with `thread` and `turn` unset.
    async fn costs(&self, query: &CostQuery) -> Result<Vec<CostRow>, StoreError>;

    /// Records a model call made outside any turn (the gateway's), timestamped by the
    /// store. `Conflict` if its id was recorded already.
    async fn record_model_call(&self, call: ModelCallRecord) -> Result<(), StoreError>;

    /// Records a finished MCP gateway call, timestamped by the store. `Conflict` if
    /// its id was recorded already. A call with a charge counts in [`Self::costs`]
    /// (provider `mcp`, the tool as the model) and so in the budgets.
    async fn record_mcp_call(&self, call: McpCallRecord) -> Result<(), StoreError>;

    /// MCP gateway calls, newest first.
    async fn mcp_calls(&self, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError>;
}

/// Every store port at once: what a turn writes (its thread, its events, its
/// permissions and approvals, what its calls cost). The composition root opens one
/// store and hands each service only the ports it uses; `Arc<dyn EventStore>` coerces
/// to any of them.
pub trait EventStore: ThreadStore + TurnLog + ApprovalStore + CallStore {}

impl<T: ThreadStore + TurnLog + ApprovalStore + CallStore + ?Sized> EventStore for T {}
