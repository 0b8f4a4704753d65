//! `AuditStore`: the tamper-evident chain over the event log (ADR 0048), read back for
//! `agentplane audit verify|export` and `GET /v1/threads/{id}/audit`. A port of its own,
//! like `KeyStore`, so the event-store decorators stay as they are.
//!
//! Invariants every implementation keeps:
//! - every event appended carries `hash = event_hash(previous event's hash, event)`
//!   (`agentplane_core::audit`), computed in the transaction that appends it, under the
//!   same serialization as its `seq`: the chain of a thread is gapless across crashes
//!   and replicas;
//! - events appended before the chain existed keep no hash, and the thread records the
//!   first seq that is chained (`chained_since`);
//! - reads return the columns as stored (the payload's text byte for byte), never a
//!   re-serialized value: a verifier must recompute from what is stored.

use agentplane_core::ThreadId;
use agentplane_core::audit::ChainedEvent;
use async_trait::async_trait;

use super::store::StoreError;

/// A thread as the audit sees it (deleted threads included: the log is kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedThread {
    pub id: ThreadId,
    pub client_id: String,
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
}
