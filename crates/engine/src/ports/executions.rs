//! `ExecutionStore`: the durable queue of asynchronous executions and of their webhook
//! deliveries. A port of its own rather than more methods on `EventStore`, which the
//! redacting and metered decorators forward by hand: executions are a separate concern
//! with their own table, and only `SqliteStore` implements them.
//!
//! Invariants every implementation keeps:
//! - an execution is claimed by at most one worker at a time: `claim_execution` moves
//!   one due `queued` row to `running` atomically (claim-once), and never claims an
//!   execution whose thread already has a `running` one;
//! - a terminal execution (`succeeded`, `failed`, `cancelled`, `interrupted`) never
//!   changes again, so a webhook body rendered from it is the same at every attempt;
//! - finishing an execution that has a webhook URL enqueues its delivery in the same
//!   transaction: a finished execution without its pending delivery cannot be observed
//!   (at-least-once);
//! - the idempotency key is unique per client.
//!
//! Time is the store's: delays are given as durations and the store adds them to its
//! own clock, so the engine needs no clock to schedule.

use std::time::Duration;

use agentplane_core::{DeliveryId, ErrorCode, ExecutionId, ThreadId, TurnId};
use async_trait::async_trait;

use super::store::StoreError;

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionStatus {
    /// Waiting for a worker (new, or between retries).
    Queued,
    /// A worker runs one of its attempts, or its turn waits for an approval.
    Running,
    /// The turn finished with a result.
    Succeeded,
    /// The turn failed and no retry is left (or the failure is not retried).
    Failed,
    /// Cancelled by its client.
    Cancelled,
    /// The process stopped while it ran, and `on_restart = "interrupt"`.
    Interrupted,
}

impl ExecutionStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }

    /// The status of that name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether it can never change again.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

/// An execution to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExecution {
    pub id: ExecutionId,
    pub client_id: String,
    pub agent: String,
    pub input: String,
    /// The thread every attempt runs a turn of (given, or created for it).
    pub thread_id: ThreadId,
    pub webhook_url: Option<String>,
    /// Unique per client; a second `create_execution` with it returns the first.
    pub idempotency_key: Option<String>,
    /// What else identifies the request (the thread or directory asked for, the
    /// webhook), compared on an idempotent replay besides agent and input.
    pub fingerprint: String,
    /// Turns this execution may take, retries included (at least 1).
    pub max_attempts: u32,
}

/// Why an execution failed, as the turn (or the hub) reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionFailure {
    pub code: ErrorCode,
    pub message: String,
}

/// A stored execution.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    pub id: ExecutionId,
    pub client_id: String,
    pub agent: String,
    pub input: String,
    pub thread_id: ThreadId,
    /// The turn of the latest attempt, once it began.
    pub turn_id: Option<TurnId>,
    pub status: ExecutionStatus,
    /// Attempts begun so far.
    pub attempts: u32,
    pub max_attempts: u32,
    /// The result of the successful turn.
    pub output: Option<serde_json::Value>,
    /// The latest failure: the final one when `failed`, the one being retried when
    /// `queued` again.
    pub error: Option<ExecutionFailure>,
    pub webhook_url: Option<String>,
    pub idempotency_key: Option<String>,
    pub fingerprint: String,
    /// Its client asked to cancel it while it ran.
    pub cancel_requested: bool,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
    /// When the first attempt began.
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// When a queued execution becomes due.
    pub next_attempt_at: Option<String>,
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionEnd {
    /// A terminal status.
    pub status: ExecutionStatus,
    pub turn_id: Option<TurnId>,
    pub output: Option<serde_json::Value>,
    pub error: Option<ExecutionFailure>,
    /// The id of its webhook delivery (enqueued only if it has a webhook URL).
    pub delivery: DeliveryId,
}

/// Which executions to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionQuery {
    /// Only this client's; `None` (start-up recovery) lists everyone's.
    pub client: Option<String>,
    pub status: Option<ExecutionStatus>,
    pub agent: Option<String>,
    pub thread: Option<ThreadId>,
    /// At most this many, newest first.
    pub limit: usize,
}

/// What `cancel_execution` did.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// It was queued and is now `cancelled` (its webhook enqueued).
    Cancelled(ExecutionRecord),
    /// It is running: `cancel_requested` is set; the worker ends its turn.
    Requested(ExecutionRecord),
}

/// What start-up does with executions a stopped process left `running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartMode {
    /// Back to `queued` (the interrupted attempt counts), or `interrupted` when no
    /// attempt is left.
    Retry,
    /// `interrupted`, with their webhook enqueued.
    Interrupt,
}

/// Where a webhook delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    /// Every attempt failed, or the address was refused.
    Failed,
}

impl DeliveryStatus {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }
}

/// A stored webhook delivery: one per finished execution with a webhook URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub id: DeliveryId,
    pub execution_id: ExecutionId,
    pub url: String,
    pub status: DeliveryStatus,
    /// POSTs begun so far.
    pub attempts: u32,
    pub next_attempt_at: Option<String>,
    /// The HTTP status of the latest answer.
    pub last_status: Option<u16>,
    /// Why the latest attempt failed.
    pub last_error: Option<String>,
    pub created_at: String,
    pub delivered_at: Option<String>,
}

/// The outcome of one POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    pub delivered: bool,
    pub status: Option<u16>,
    pub error: Option<String>,
    /// When not delivered: try again after this long, or `None` to give up (`failed`).
    pub retry_after: Option<Duration>,
}

/// The durable execution queue and its webhook deliveries.
#[async_trait]
pub trait ExecutionStore: Send + Sync {
    /// Enqueues an execution, or, when one of this client has the same idempotency
    /// key, returns that one unchanged. The flag says whether it was created.
    async fn create_execution(
        &self,
        execution: NewExecution,
    ) -> Result<(ExecutionRecord, bool), StoreError>;

    async fn execution(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>, StoreError>;

    /// The client's execution with this idempotency key.
    async fn execution_by_key(
        &self,
        client: &str,
        key: &str,
    ) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Executions matching the query, newest first.
    async fn list_executions(
        &self,
        query: &ExecutionQuery,
    ) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// Claims the oldest due `queued` execution whose thread runs no other one: it
    /// becomes `running` with one more attempt, owned by `worker`. `None` if none is due.
    async fn claim_execution(&self, worker: &str) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Records the turn of the running attempt.
    async fn set_execution_turn(&self, id: &ExecutionId, turn: &TurnId) -> Result<(), StoreError>;

    /// Ends a running execution (and enqueues its webhook delivery, atomically).
    /// `Conflict` unless it is running.
    async fn finish_execution(
        &self,
        id: &ExecutionId,
        end: ExecutionEnd,
    ) -> Result<ExecutionRecord, StoreError>;

    /// Puts a running execution back in the queue, due after `delay`, with the failure
    /// that is being retried. `Conflict` unless it is running.
    async fn retry_execution(
        &self,
        id: &ExecutionId,
        delay: Duration,
        error: ExecutionFailure,
    ) -> Result<ExecutionRecord, StoreError>;

    /// Gives a claimed execution back to the queue without counting the attempt (the
    /// process is stopping and could not begin it).
    async fn release_execution(&self, id: &ExecutionId) -> Result<(), StoreError>;

    /// Cancels a queued execution at once, or flags a running one for its worker.
    /// `Conflict` for a finished one.
    async fn cancel_execution(
        &self,
        id: &ExecutionId,
        delivery: DeliveryId,
    ) -> Result<CancelOutcome, StoreError>;

    /// Ends one execution a previous process left running, per `mode`.
    async fn recover_execution(
        &self,
        id: &ExecutionId,
        mode: RestartMode,
        delivery: DeliveryId,
    ) -> Result<ExecutionRecord, StoreError>;

    /// How many executions are queued (due or not).
    async fn queued_executions(&self) -> Result<u64, StoreError>;

    /// Claims the oldest due pending delivery: one more attempt, and not due again for
    /// `lease` (so a crash mid-POST resends it later: at-least-once).
    async fn claim_delivery(&self, lease: Duration) -> Result<Option<DeliveryRecord>, StoreError>;

    /// Records the outcome of a delivery's latest attempt.
    async fn record_delivery(
        &self,
        id: &DeliveryId,
        attempt: DeliveryAttempt,
    ) -> Result<DeliveryRecord, StoreError>;

    /// The deliveries of an execution, oldest first.
    async fn deliveries(&self, execution: &ExecutionId) -> Result<Vec<DeliveryRecord>, StoreError>;
}
