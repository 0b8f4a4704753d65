//! `ReplicaStore`: several `serve` processes (replicas) sharing one database (ADR 0019).
//!
//! Each process is a replica with a fresh `ReplicaId`. The store records it on every turn
//! it begins and every execution it claims. A replica beats a heartbeat; one whose last
//! heartbeat is older than the timeout is dead, and exactly one survivor claims it and
//! recovers its work: its running turns end as `interrupted` (turns suspended on an
//! approval are not running anywhere and are left alone) and its running executions are
//! recovered per `on_restart`.
//!
//! Invariants every implementation keeps:
//! - `claim_dead_replica` hands each dead replica to one caller only, also when several
//!   survivors ask at once;
//! - `interrupt_turns_of` touches only the named replica's turns, with the same events
//!   and order as `EventStore::interrupt_running_turns`;
//! - `appended` reports every event committed by any process on the database, after the
//!   commit (the process's own may be included; a consumer reads the store for the truth).

use std::time::Duration;

use agentplane_core::{ReplicaId, ThreadId, TurnId};
use async_trait::async_trait;

use super::executions::ExecutionRecord;
use super::store::StoreError;

/// An event committed somewhere: its thread and its `seq` there. A wake-up, not the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub thread: ThreadId,
    pub seq: u64,
}

/// Liveness of the replicas on one database, and the recovery of a dead one's work.
#[async_trait]
pub trait ReplicaStore: Send + Sync {
    /// This process's replica id, recorded on its turns and claimed executions.
    fn replica(&self) -> &ReplicaId;

    /// Whether other processes may share the database (PostgreSQL). When `false` (the
    /// SQLite file, locked to one process) every other replica is dead at start-up.
    fn shared(&self) -> bool;

    /// The budget ledger the replicas share, for a shared store; `None`: budgets are
    /// kept in this process's memory (one process on the store).
    fn budget_ledger(&self) -> Option<std::sync::Arc<dyn super::BudgetLedger>> {
        None
    }

    /// Records that this replica is alive now; the first call joins the registry.
    async fn heartbeat(&self) -> Result<(), StoreError>;

    /// Claims one replica other than this one whose last heartbeat is older than
    /// `stale_after`, removing it from the registry so no other survivor recovers it.
    /// `None` when every other replica is alive.
    async fn claim_dead_replica(
        &self,
        stale_after: Duration,
    ) -> Result<Option<ReplicaId>, StoreError>;

    /// Leaves the registry at a clean shutdown.
    async fn leave(&self) -> Result<(), StoreError>;

    /// Ends the turns `replica` left running as `interrupted` (pending permissions of
    /// those turns declined first, with their events) and returns their ids.
    async fn interrupt_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError>;

    /// The executions `replica` claimed that are still `running`.
    async fn executions_of(&self, replica: &ReplicaId) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// A feed of events committed by any process on the database, taken once (later
    /// calls get `None`). `None` too when the database is not shared.
    fn appended(&self) -> Option<tokio::sync::mpsc::Receiver<Appended>>;
}
