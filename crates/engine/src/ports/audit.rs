//! `AuditStore`: the tamper-evident chain over the event log (ADR 0048), read back for
//! `agentplane audit verify|export` and `GET /v1/threads/{id}/audit`. A port of its own,
//! like `KeyStore`, so the event-store decorators stay as they are.
//!
//! Invariants every implementation keeps:
//! - every gateway model call and MCP gateway call stored carries the next position of
//!   its table's chain and `hash = record_hash(previous record's hash, record)`, both
//!   taken under the chain row's lock in the transaction that stores it (the chain's
//!   tip is updated in the same transaction);
//! - every event appended carries `hash = event_hash(previous event's hash, event)`
//!   (`agentplane_core::audit`), computed in the transaction that appends it, under the
//!   same serialization as its `seq`: the chain of a thread is gapless across crashes
//!   and replicas;
//! - events appended before the chain existed keep no hash, and the thread records the
//!   first seq that is chained (`chained_since`);
//! - every thread created or deleted and every key created or revoked appends its
//!   ledger record (`agentplane_core::audit::ledger`) in the transaction of the change,
//!   and the migration that created the ledger wrote its genesis in its own;
//! - reads return the columns as stored (the payload's text byte for byte), never a
//!   re-serialized value: a verifier must recompute from what is stored.

use agentplane_core::ThreadId;
use agentplane_core::audit::{ChainedEvent, ChainedRecord, RecordChain};
use async_trait::async_trait;

use super::store::StoreError;

/// A thread as the audit sees it (deleted threads included: the log is kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedThread {
    pub id: ThreadId,
    pub client_id: String,
    pub agent: String,
    pub cwd: String,
    pub created_at: String,
    pub deleted_at: Option<String>,
    /// The first seq appended after the chain existed (1 for a thread created after).
    pub chained_since: u64,
    /// How many events the thread has.
    pub events: u64,
}

/// The last chained event of a thread: what to anchor outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    pub seq: u64,
    /// Lowercase hex SHA-256.
    pub hash: String,
}

/// Where a record chain ends, as the store's chain row holds it (`audit_chains`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordChainTip {
    /// The last position given; 0 when the chain has no record yet.
    pub last_pos: u64,
    /// The last record's hash, as the chain row holds it.
    pub last_hash: Option<String>,
    /// Records stored before the chain existed (they have no position).
    pub unchained: u64,
}

/// An API key as the audit compares it with the ledger: every column a role check or
/// a lookup rests on, as stored (`roles` the JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedKey {
    pub id: String,
    pub client_id: String,
    pub digest: String,
    pub roles: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

/// A turn's row, as history and `GET /v1/turns` show it, for comparing with its
/// events (`turn_started`, `turn_completed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedTurn {
    pub id: String,
    pub input: String,
    /// `running` or the stop reason.
    pub status: String,
    /// The stored JSON text of the result, if it ended with one.
    pub result: Option<String>,
}

/// An approval's row, for comparing with its events (`approval_requested`,
/// `approval_decided`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedApproval {
    pub id: String,
    pub turn_id: String,
    pub tool: String,
    pub policy: String,
    /// `pending` or the outcome.
    pub status: String,
    pub decided_by: Option<String>,
    pub feedback: Option<String>,
    pub decided_at: Option<String>,
}

/// The audit chain, read back.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Every thread (deleted ones included), oldest first; with `id`, only that one.
    async fn audited_threads(
        &self,
        id: Option<&ThreadId>,
    ) -> Result<Vec<AuditedThread>, StoreError>;

    /// A thread's events with `seq > after`, by `seq`, at most `limit`, as stored.
    async fn chained_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedEvent>, StoreError>;

    /// The thread's last chained event, `None` when it has none.
    async fn chain_head(&self, thread: &ThreadId) -> Result<Option<ChainHead>, StoreError>;

    /// A record chain's records with `pos > after`, by `pos`, at most `limit`, every
    /// hashed column as stored text.
    async fn chained_records(
        &self,
        chain: RecordChain,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedRecord>, StoreError>;

    /// Where a record chain ends, and how many records predate it.
    async fn record_chain_tip(&self, chain: RecordChain) -> Result<RecordChainTip, StoreError>;

    /// Every API key, revoked ones included, in creation order.
    async fn audited_keys(&self) -> Result<Vec<AuditedKey>, StoreError>;

    /// A thread's turns, in creation order.
    async fn audited_turns(&self, thread: &ThreadId) -> Result<Vec<AuditedTurn>, StoreError>;

    /// A thread's approvals, in creation order.
    async fn audited_approvals(
        &self,
        thread: &ThreadId,
    ) -> Result<Vec<AuditedApproval>, StoreError>;

    /// Records in the ledger that the policy set with `hash` (of `policies` policies)
    /// took effect, loaded by `by` (`startup`, `reload`).
    async fn record_policy_set(
        &self,
        hash: &str,
        by: &str,
        policies: u64,
    ) -> Result<(), StoreError>;
}
