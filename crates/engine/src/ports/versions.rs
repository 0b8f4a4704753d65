//! `VersionStore`: agent versions, their traffic history, and which version each thread
//! is pinned to (ADR 0016). A port of its own rather than more `EventStore` methods, so
//! the event-store decorators (redaction, metering) stay as they are.
//!
//! Invariants every implementation keeps:
//! - `(agent, version)` is unique; a version is never deleted;
//! - the spec of a version that left `draft` never changes, and stages only move
//!   forward (draft → staging → production): `Conflict` otherwise, enforced by the store;
//! - at most one version per agent is the shadow;
//! - traffic history is append-only and numbered 1, 2, 3… per agent; recording with a
//!   stale `after_seq` is `Conflict`, so two concurrent changes cannot both win;
//! - a thread's version is set once and never changed; a turn records the version of
//!   its thread when it begins.

use std::collections::BTreeMap;

use agentplane_core::version::TrafficAction;
use agentplane_core::{Stage, ThreadId, TrafficSplit, VersionSpec};
use async_trait::async_trait;

use super::store::{NewThread, StoreError, ThreadRecord};

/// A version to store (always as a draft).
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    pub agent: String,
    /// A valid semantic version, already checked to be above the agent's others.
    pub version: String,
    pub spec: VersionSpec,
    /// The client that created it.
    pub created_by: String,
}

/// A stored version.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRecord {
    pub agent: String,
    pub version: String,
    pub stage: Stage,
    pub spec: VersionSpec,
    /// Whether it gets a shadow copy of the agent's production turns.
    pub shadow: bool,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
}

/// A traffic change to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTraffic {
    pub agent: String,
    /// The `seq` of the agent's latest change the caller saw (0: none).
    pub after_seq: u64,
    pub action: TrafficAction,
    /// The split in force after the change.
    pub split: TrafficSplit,
    pub by: String,
}

/// A recorded traffic change.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficRecord {
    pub agent: String,
    pub seq: u64,
    pub action: TrafficAction,
    pub split: TrafficSplit,
    pub by: String,
    pub at: String,
}

/// Durable versions, traffic and thread assignments.
#[async_trait]
pub trait VersionStore: Send + Sync {
    /// Every stored version of every agent, by agent then creation.
    async fn all_versions(&self) -> Result<BTreeMap<String, Vec<VersionRecord>>, StoreError>;

    /// The stored versions of `agent`, by creation: what every turn reads to pick its
    /// version, so a read of one agent's rows rather than of every agent's.
    async fn versions_of(&self, agent: &str) -> Result<Vec<VersionRecord>, StoreError>;

    /// `Conflict` when the agent already has this version.
    async fn create_version(&self, version: NewVersion) -> Result<VersionRecord, StoreError>;

    /// Replaces a draft's spec. `NotFound` without it, `Conflict` once it left `draft`.
    async fn edit_draft(
        &self,
        agent: &str,
        version: &str,
        spec: VersionSpec,
    ) -> Result<VersionRecord, StoreError>;

    /// Moves a version from `from` to `to`. `NotFound` without it, `Conflict` when it is
    /// not at `from` (someone else promoted it) or `to` is not the next stage.
    async fn set_stage(
        &self,
        agent: &str,
        version: &str,
        from: Stage,
        to: Stage,
    ) -> Result<VersionRecord, StoreError>;

    /// Makes `version` the agent's one shadow, or clears the shadow with `None`.
    async fn set_shadow(&self, agent: &str, version: Option<&str>) -> Result<(), StoreError>;

    /// The agent's traffic changes, oldest first.
    async fn traffic(&self, agent: &str) -> Result<Vec<TrafficRecord>, StoreError>;

    /// Appends a traffic change as `after_seq + 1`; `Conflict` if that seq is taken.
    async fn record_traffic(&self, change: NewTraffic) -> Result<TrafficRecord, StoreError>;

    /// Pins a thread to a version unless it already is; returns the version it is
    /// pinned to (the earlier one wins). `NotFound` without the thread.
    async fn pin_thread(&self, thread: &ThreadId, version: &str) -> Result<String, StoreError>;

    /// Creates the hidden thread a shadow version's runs of `original` go to: pinned to
    /// `version`, linked to `original`, never listed.
    async fn create_shadow_thread(
        &self,
        thread: NewThread,
        original: &ThreadId,
        version: &str,
    ) -> Result<ThreadRecord, StoreError>;

    /// The shadow threads of `original`, oldest first.
    async fn shadow_threads(&self, original: &ThreadId) -> Result<Vec<ThreadRecord>, StoreError>;
}
