//! `ReplicaStore`: several `serve` processes (replicas) sharing one database (ADR 0019).
//!
//! Each process is a replica with a fresh `ReplicaId`. The store records it on every turn
//! it begins (or resumes after an approval) and every execution it claims. A replica
//! beats a heartbeat; one whose last heartbeat is older than the timeout is dead, and
//! one survivor at a time claims it and recovers its work: its running turns end as
//! `interrupted` (turns suspended on an approval are not running anywhere and are left
//! alone) and its running executions are recovered per `on_restart`. The claim lasts
//! until the claimer reports the replica `recovered`, or dies: then the dead replica is
//! claimable again, so a recovery cut short by a second death is finished by another
//! survivor (ADR 0027).
//!
//! Invariants every implementation keeps:
//! - `claim_dead_replica` hands each dead replica to one live caller at a time, also
//!   when several survivors ask at once, and again to another once that caller is dead;
//! - `interrupt_turns_of` touches only the named replica's turns, with the same events
//!   and order as `EventStore::interrupt_running_turns`;
//! - `announcements` reports every event committed and every cancel requested by any
//!   process on the database, after the commit (the process's own may be included; a
//!   consumer reads the store for the truth); when it may have missed some, it says so
//!   (`Announcement::Resumed`) before announcing anything newer.

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

/// What the feed of a shared database announces. Each is a wake-up: the store holds
/// the truth, and a consumer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announcement {
    /// An event was committed.
    Appended(Appended),
    /// Someone asked for a running turn to be cancelled (`request_cancel`); the replica
    /// running it stops it.
    CancelRequested(TurnId),
    /// The feed was interrupted (the connection behind it dropped) and is whole again:
    /// anything may have been committed or requested meanwhile without an announcement,
    /// so the consumer reads the store at once (events after those it published, and
    /// `cancels_requested`).
    Resumed,
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
    /// `stale_after` and that no other live replica has claimed (unclaimed, or claimed
    /// by one that is itself stale or gone). The claimer recovers its work and then
    /// calls [`Self::recovered`]; until then no other live survivor gets it, and the
    /// claimer gets it again (after every unclaimed one) to retry a failed recovery.
    /// `None` when there is nothing to claim.
    async fn claim_dead_replica(
        &self,
        stale_after: Duration,
    ) -> Result<Option<ReplicaId>, StoreError>;

    /// Removes a claimed replica from the registry once all its work is recovered.
    async fn recovered(&self, replica: &ReplicaId) -> Result<(), StoreError>;

    /// Leaves the registry at a clean shutdown.
    async fn leave(&self) -> Result<(), StoreError>;

    /// Ends the turns `replica` left running as `interrupted` (pending permissions of
    /// those turns declined first, with their events) and returns their ids.
    async fn interrupt_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError>;

    /// The running turns recorded on `replica` that no approval suspends, oldest first.
    /// A live replica compares them with the turns it runs: one it does not run is an
    /// orphan (a write that ended it failed, or its start failed halfway).
    async fn running_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError>;

    /// Ends one running turn as `interrupted`, as `interrupt_turns_of` ends each of a
    /// replica's; `false` when it is not running or an approval suspends it.
    async fn interrupt_turn(&self, turn: &TurnId) -> Result<bool, StoreError>;

    /// The executions `replica` claimed that are still `running`.
    async fn executions_of(&self, replica: &ReplicaId) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// Records a cancel request for `turn` if it is running, and announces it to every
    /// replica (`Announcement::CancelRequested`, then durably in the store for
    /// `cancels_requested`). `false` when the turn is not running.
    async fn request_cancel(&self, turn: &TurnId) -> Result<bool, StoreError>;

    /// The running turns someone asked to cancel (any replica's: a consumer stops those
    /// it runs). Read after `Announcement::Resumed`, and now and then.
    async fn cancels_requested(&self) -> Result<Vec<TurnId>, StoreError>;

    /// A feed of announcements from every process on the database, taken once (later
    /// calls get `None`). `None` too when the database is not shared.
    fn announcements(&self) -> Option<tokio::sync::mpsc::Receiver<Announcement>>;
}
