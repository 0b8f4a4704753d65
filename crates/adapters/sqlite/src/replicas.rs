//! `ReplicaStore` on SQLite (ADR 0019): the registry of processes with their heartbeats
//! and the recovery of a dead one's work. The file is locked to one process
//! (`connection::lock`), so `shared()` is `false` and nothing is ever appended by
//! another process; the registry still records this process's life for operators.

use std::time::Duration;

use agentplane_core::{ReplicaId, TurnId};
use agentplane_engine::ports::records::{stored_before, stored_now};
use agentplane_engine::ports::{Announcement, ExecutionRecord, ReplicaStore, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows::backend;
use crate::{SqliteStore, executions, writer};

/// Records `replica` alive now, joining the registry on the first beat.
fn heartbeat(c: &Connection, replica: &str) -> Result<(), StoreError> {
    let now = stored_now();
    c.prepare_cached(
        "INSERT INTO replicas (id, started_at, heartbeat_at) VALUES (?1, ?2, ?2)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
    )
    .and_then(|mut upsert| upsert.execute(params![replica, now]))
    .map_err(backend)?;
    Ok(())
}

/// Removes and returns one replica other than `me` whose last beat is before `before`.
/// The writer runs one command at a time, so two callers never get the same one; and
/// the file is one process's, so a claimer that dies mid-recovery takes nothing with
/// it: the next process recovers every running turn at start.
fn claim_dead(c: &Connection, me: &str, before: &str) -> Result<Option<ReplicaId>, StoreError> {
    let dead: Option<String> = c
        .prepare_cached(
            "DELETE FROM replicas WHERE id = (
                 SELECT id FROM replicas WHERE id != ?1 AND heartbeat_at < ?2
                 ORDER BY heartbeat_at LIMIT 1)
             RETURNING id",
        )
        .and_then(|mut delete| {
            delete
                .query_row(params![me, before], |row| row.get(0))
                .optional()
        })
        .map_err(backend)?;
    dead.map(|id| ReplicaId::parse(&id).map_err(StoreError::Backend))
        .transpose()
}

fn leave(c: &Connection, replica: &str) -> Result<(), StoreError> {
    c.prepare_cached("DELETE FROM replicas WHERE id = ?1")
        .and_then(|mut delete| delete.execute([replica]))
        .map_err(backend)?;
    Ok(())
}

#[async_trait]
impl ReplicaStore for SqliteStore {
    fn replica(&self) -> &ReplicaId {
        &self.replica
    }

    fn shared(&self) -> bool {
        false
    }

    async fn heartbeat(&self) -> Result<(), StoreError> {
        let me = self.replica.as_str().to_owned();
        self.write(|reply| writer::job(move |c| heartbeat(c, &me), reply))
            .await
    }

    async fn claim_dead_replica(
        &self,
        stale_after: Duration,
    ) -> Result<Option<ReplicaId>, StoreError> {
        let me = self.replica.as_str().to_owned();
        let before = stored_before(stale_after);
        self.write(|reply| writer::job(move |c| claim_dead(c, &me, &before), reply))
            .await
    }

    async fn leave(&self) -> Result<(), StoreError> {
        let me = self.replica.as_str().to_owned();
        self.write(|reply| writer::job(move |c| leave(c, &me), reply))
            .await
    }

    async fn interrupt_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError> {
        let replica = replica.as_str().to_owned();
        self.write(|reply| writer::job(move |c| writer::interrupt_turns(c, Some(&replica)), reply))
            .await
    }

    async fn running_turns_of(&self, _replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError> {
        // One process, which is never swept for orphans: what it leaves running is
        // interrupted at its next start.
        Ok(Vec::new())
    }

    async fn interrupt_turn(&self, _turn: &TurnId) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn executions_of(&self, replica: &ReplicaId) -> Result<Vec<ExecutionRecord>, StoreError> {
        let replica = replica.as_str().to_owned();
        self.read(move |c| executions::running_of(c, &replica))
            .await
    }

    async fn recovered(&self, _replica: &ReplicaId) -> Result<(), StoreError> {
        // Removed when claimed (`claim_dead`).
        Ok(())
    }

    async fn request_cancel(&self, _turn: &TurnId) -> Result<bool, StoreError> {
        // One process: a turn running here is in the hub's memory, and is cancelled there.
        Ok(false)
    }

    async fn cancels_requested(&self) -> Result<Vec<TurnId>, StoreError> {
        Ok(Vec::new())
    }

    fn announcements(&self) -> Option<tokio::sync::mpsc::Receiver<Announcement>> {
        None
    }
}
