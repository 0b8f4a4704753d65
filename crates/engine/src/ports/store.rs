//! `EventStore`: threads, turns and the append-only event log.
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

use agentplane_core::{
    ErrorCode, Event, EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, TurnId,
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

/// Durable threads, turns and events.
#[async_trait]
pub trait EventStore: Send + Sync {
    async fn create_thread(&self, thread: NewThread) -> Result<ThreadRecord, StoreError>;

    /// A thread that exists and is not deleted.
    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError>;

    /// A client's threads, newest first, deleted ones left out.
    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError>;

    /// Marks a thread deleted; its turns and events stay for audit. `NotFound` if it
    /// does not exist (or is already deleted), `Conflict` while a turn is running.
    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError>;

    /// Replaces the thread's compaction summary.
    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError>;

    /// Starts a turn. `NotFound` without the thread, `Conflict` while another turn of
    /// the thread is running.
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError>;

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

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError>;

    /// A thread's turns in the order they began (internal ones included).
    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError>;

    /// All events of a turn, by `seq`.
    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError>;

    /// Events of a thread with `seq > after`, by `seq`, at most `limit`.
    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError>;

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

    /// At start-up: ends every turn left running by a previous process as
    /// `interrupted` and returns their ids. Each pending permission of those turns is
    /// first resolved as declined with a reason saying the process stopped (with its
    /// `permission_resolved` event); then `turn_completed` is appended.
    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError>;
}
