//! [`MeteredStore`]: any [`EventStore`] with every operation counted and timed.
//!
//! It forwards each call unchanged (same arguments, same result, same errors), so it
//! keeps every invariant of the store it wraps; it only adds
//! `store_operations_total{op,outcome}` and `store_operation_duration_seconds{op}`.
//! An operation whose future is dropped before it finishes (a cancelled turn) is not
//! recorded: it has no outcome.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, Event, EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, TurnId,
};
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStore, CallStore, CostQuery, CostRow,
    EventStore, McpCallQuery, McpCallRecord, ModelCallRecord, NewApproval, NewPermission,
    NewThread, PermissionRecord, StoreError, ThreadRecord, ThreadStore, TurnLog, TurnRecord,
};
use async_trait::async_trait;

use crate::metrics::Metrics;

/// An event store that records how each of its operations went. Give the hub this
/// instead of the store it wraps.
pub struct MeteredStore {
    inner: Arc<dyn EventStore>,
    metrics: Arc<Metrics>,
}

impl MeteredStore {
    /// Wraps `inner`; its operations are recorded in `metrics`.
    pub fn new(inner: Arc<dyn EventStore>, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }

    /// Runs one operation and records its outcome and duration under `op`.
    async fn timed<T>(
        &self,
        op: &'static str,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = operation.await;
        self.metrics
            .observe_store(op, outcome(&result), started.elapsed());
        result
    }
}

/// The `outcome` label of a result.
fn outcome<T>(result: &Result<T, StoreError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(StoreError::NotFound(_)) => "not_found",
        Err(StoreError::Conflict(_)) => "conflict",
        Err(StoreError::Backend(_)) => "error",
    }
}

#[async_trait]
impl ThreadStore for MeteredStore {
    async fn create_thread(&self, thread: NewThread) -> Result<ThreadRecord, StoreError> {
        self.timed("create_thread", self.inner.create_thread(thread))
            .await
    }

    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        self.timed("thread", self.inner.thread(id)).await
    }

    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError> {
        self.timed("list_threads", self.inner.list_threads(client_id))
            .await
    }

    async fn threads_active_since(
        &self,
        since: Option<Timestamp>,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        self.timed(
            "threads_active_since",
            self.inner.threads_active_since(since),
        )
        .await
    }

    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError> {
        self.timed("delete_thread", self.inner.delete_thread(id))
            .await
    }

    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError> {
        self.timed("set_summary", self.inner.set_summary(id, summary))
            .await
    }
}

#[async_trait]
impl TurnLog for MeteredStore {
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError> {
        self.timed(
            "begin_turn",
            self.inner.begin_turn(thread, turn, input, internal),
        )
        .await
    }

    async fn start_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
        started: EventPayload,
    ) -> Result<(TurnRecord, Event), StoreError> {
        self.timed(
            "start_turn",
            self.inner
                .start_turn(thread, turn, input, internal, started),
        )
        .await
    }

    async fn append(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<Event, StoreError> {
        self.timed("append", self.inner.append(thread, turn, payload))
            .await
    }

    async fn complete_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<Event, StoreError> {
        self.timed(
            "complete_turn",
            self.inner.complete_turn(thread, turn, stop_reason, result),
        )
        .await
    }

    async fn append_all(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError> {
        self.timed("append_all", self.inner.append_all(thread, turn, payloads))
            .await
    }

    async fn complete_turn_after(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        before: Vec<EventPayload>,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<(Vec<Event>, Event), StoreError> {
        self.timed(
            "complete_turn_after",
            self.inner
                .complete_turn_after(thread, turn, before, stop_reason, result),
        )
        .await
    }

    async fn answered_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        self.timed("answered_turns", self.inner.answered_turns(thread, limit))
            .await
    }

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
        self.timed("turn", self.inner.turn(id)).await
    }

    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError> {
        self.timed("list_turns", self.inner.list_turns(thread))
            .await
    }

    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
        self.timed("turn_events", self.inner.turn_events(turn))
            .await
    }

    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.timed(
            "thread_events",
            self.inner.thread_events(thread, after, limit),
        )
        .await
    }

    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError> {
        self.timed(
            "interrupt_running_turns",
            self.inner.interrupt_running_turns(),
        )
        .await
    }
}

#[async_trait]
impl ApprovalStore for MeteredStore {
    async fn create_permission(
        &self,
        permission: NewPermission,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        self.timed(
            "create_permission",
            self.inner.create_permission(permission),
        )
        .await
    }

    async fn resolve_permission(
        &self,
        id: &PermissionId,
        decision: PermissionDecision,
        reason: &str,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        self.timed(
            "resolve_permission",
            self.inner.resolve_permission(id, decision, reason),
        )
        .await
    }

    async fn permission(&self, id: &PermissionId) -> Result<Option<PermissionRecord>, StoreError> {
        self.timed("permission", self.inner.permission(id)).await
    }

    async fn create_approval(
        &self,
        approval: NewApproval,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        self.timed("create_approval", self.inner.create_approval(approval))
            .await
    }

    async fn decide_approval(
        &self,
        id: &ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        self.timed("decide_approval", self.inner.decide_approval(id, decision))
            .await
    }

    async fn claim_approval(&self, id: &ApprovalId) -> Result<ApprovalRecord, StoreError> {
        self.timed("claim_approval", self.inner.claim_approval(id))
            .await
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        self.timed("approval", self.inner.approval(id)).await
    }

    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.timed("list_approvals", self.inner.list_approvals(query))
            .await
    }
}

#[async_trait]
impl CallStore for MeteredStore {
    async fn costs(&self, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
        self.timed("costs", self.inner.costs(query)).await
    }

    async fn record_model_call(&self, call: ModelCallRecord) -> Result<(), StoreError> {
        self.timed("record_model_call", self.inner.record_model_call(call))
            .await
    }

    async fn record_mcp_call(&self, call: McpCallRecord) -> Result<(), StoreError> {
        self.timed("record_mcp_call", self.inner.record_mcp_call(call))
            .await
    }

    async fn mcp_calls(&self, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError> {
        self.timed("mcp_calls", self.inner.mcp_calls(query)).await
    }
}
