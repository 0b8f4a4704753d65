//! `EventStore`: threads, turns and the append-only event log.
//!
//! Invariants every implementation keeps:
//! - `seq` is assigned by the store, starts at 1 and is gapless and increasing per thread;
//! - an event is durable (committed) before `append` returns, so anything streamed from
//!   it can be replayed after a crash;
//! - at most one turn per thread is running; `begin_turn` on a busy thread is `Conflict`;
//! - `complete_turn` writes the `turn_completed` event and the turn's end in one
//!   transaction, so a turn never looks ended without its event or the other way round.

use agentplane_core::{ErrorCode, Event, EventPayload, StopReason, ThreadId, TurnId};
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

    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError>;

    /// Starts a turn. `NotFound` without the thread, `Conflict` while another turn of
    /// the thread is running.
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
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
    /// `interrupted` (with its `turn_completed` event) and returns their ids.
    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError>;
}
