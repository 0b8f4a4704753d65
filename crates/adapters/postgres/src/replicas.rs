//! `ReplicaStore` on PostgreSQL: the registry of live replicas (a heartbeat row each,
//! stamped by the database's clock), the hand-over of a dead one to exactly one
//! survivor, and the recovery queries scoped to one replica.
//!
//! `claim_dead_replica` marks the stale row it picked (`FOR UPDATE SKIP LOCKED`, in one
//! statement) with the claimer's id: survivors asking at once each lock a different
//! row (or none), so a dead replica is recovered by one survivor at a time. The row
//! stays until the claimer reports it `recovered`; should the claimer die first, its
//! own heartbeat goes stale and the dead replica is claimable again (ADR 0027), so a
//! recovery cut short by a second death is finished by another survivor.
//!
//! A cancel request is a flag on the running turn plus a `NOTIFY` on the cancel
//! channel, in one transaction: the notification wakes the replica running the turn
//! at commit; the flag is what a replica that missed it reads (`cancels_requested`).

use std::sync::PoisonError;
use std::time::Duration;

use agentplane_core::{ReplicaId, ThreadId, TurnId};
use agentplane_engine::ports::{Announcement, ExecutionRecord, ReplicaStore, StoreError};
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::rows::{damaged, pg, text};
use crate::store::{in_tx, on_conn};
use crate::{PostgresStore, events, executions, schema};

#[async_trait]
impl ReplicaStore for PostgresStore {
    fn replica(&self) -> &ReplicaId {
        self.replica_id()
    }

    fn shared(&self) -> bool {
        true
    }

    fn budget_ledger(&self) -> Option<std::sync::Arc<dyn agentplane_engine::ports::BudgetLedger>> {
        Some(std::sync::Arc::new(crate::PostgresLedger::new(
            self.pool().clone(),
            self.replica_id().clone(),
        )))
    }

    async fn heartbeat(&self) -> Result<(), StoreError> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO replicas (id, joined_at, heartbeat_at) VALUES ($1, now(), now())
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
            &[&self.replica_id().as_str()],
        )
        .await
        .map_err(pg)?;
        Ok(())
    }

    async fn claim_dead_replica(
        &self,
        stale_after: Duration,
    ) -> Result<Option<ReplicaId>, StoreError> {
        let conn = self.conn().await?;
        // PostgreSQL intervals end near 178 million years; a century means "never".
        let seconds = stale_after.as_secs_f64().min(100.0 * 365.25 * 86_400.0);
        // Claimable: stale, and not claimed by another replica that is alive (a claimer
        // that is stale or gone left its recovery unfinished). Its own earlier claims
        // (a recovery that failed) come last, after every unclaimed one.
        let row = conn
            .query_opt(
                "UPDATE replicas SET claimed_by = $1 WHERE id = (
                     SELECT dead.id FROM replicas dead
                     WHERE dead.id <> $1
                       AND dead.heartbeat_at < now() - make_interval(secs => $2)
                       AND (dead.claimed_by IS NULL OR dead.claimed_by = $1
                            OR NOT EXISTS (
                                SELECT 1 FROM replicas claimer
                                WHERE claimer.id = dead.claimed_by
                                  AND claimer.heartbeat_at >=
                                      now() - make_interval(secs => $2)))
                     ORDER BY dead.claimed_by IS NOT DISTINCT FROM $1, dead.heartbeat_at
                     LIMIT 1
                     FOR UPDATE SKIP LOCKED)
                 RETURNING id",
                &[&self.replica_id().as_str(), &seconds],
            )
            .await
            .map_err(pg)?;
        row.map(|row| {
            ReplicaId::parse(&text(&row, 0)?)
                .map_err(|e| StoreError::Backend(format!("stored replica id is damaged: {e}")))
        })
        .transpose()
    }

    async fn recovered(&self, replica: &ReplicaId) -> Result<(), StoreError> {
        let conn = self.conn().await?;
        conn.execute(
            "DELETE FROM replicas WHERE id = $1 AND claimed_by = $2",
            &[&replica.as_str(), &self.replica_id().as_str()],
        )
        .await
        .map_err(pg)?;
        Ok(())
    }

    async fn leave(&self) -> Result<(), StoreError> {
        let conn = self.conn().await?;
        conn.execute(
            "DELETE FROM replicas WHERE id = $1",
            &[&self.replica_id().as_str()],
        )
        .await
        .map_err(pg)?;
        Ok(())
    }

    async fn interrupt_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError> {
        in_tx!(self, |db| events::interrupt_turns(db, Some(replica)))
    }

    async fn running_turns_of(&self, replica: &ReplicaId) -> Result<Vec<TurnId>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id FROM turns WHERE status = 'running' AND replica = $1
                   AND NOT EXISTS (SELECT 1 FROM approvals
                                   WHERE approvals.turn_id = turns.id
                                     AND approvals.resumed_at IS NULL)
                 ORDER BY pos",
                &[&replica.as_str()],
            )
            .await
            .map_err(pg)?;
        rows.iter()
            .map(|row| TurnId::parse(&text(row, 0)?).map_err(|_| damaged("turn id")))
            .collect()
    }

    async fn interrupt_turn(&self, turn: &TurnId) -> Result<bool, StoreError> {
        in_tx!(self, |db| async move {
            let row = db
                .query_opt(
                    "SELECT thread_id FROM turns WHERE id = $1 AND status = 'running'
                     FOR UPDATE",
                    &[&turn.as_str()],
                )
                .await
                .map_err(pg)?;
            let Some(row) = row else {
                return Ok(false);
            };
            let thread = ThreadId::parse(&text(&row, 0)?).map_err(|_| damaged("thread id"))?;
            events::interrupt_locked(db, &thread, turn).await
        })
    }

    async fn executions_of(&self, replica: &ReplicaId) -> Result<Vec<ExecutionRecord>, StoreError> {
        on_conn!(self, |db| executions::running_of(db, replica))
    }

    async fn request_cancel(&self, turn: &TurnId) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(pg)?;
        let changed = tx
            .execute(
                "UPDATE turns SET cancel_requested = TRUE WHERE id = $1 AND status = 'running'",
                &[&turn.as_str()],
            )
            .await
            .map_err(pg)?;
        if changed == 0 {
            return Ok(false);
        }
        // Delivered at commit, to every replica listening (this one included).
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&schema::CANCEL_CHANNEL, &turn.as_str()],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(true)
    }

    async fn cancels_requested(&self) -> Result<Vec<TurnId>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id FROM turns WHERE status = 'running' AND cancel_requested ORDER BY pos",
                &[],
            )
            .await
            .map_err(pg)?;
        rows.iter()
            .map(|row| TurnId::parse(&text(row, 0)?).map_err(|_| damaged("turn id")))
            .collect()
    }

    fn announcements(&self) -> Option<mpsc::Receiver<Announcement>> {
        self.announcements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}
