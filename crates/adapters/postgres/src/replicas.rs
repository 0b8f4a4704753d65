//! `ReplicaStore` on PostgreSQL: the registry of live replicas (a heartbeat row each,
//! stamped by the database's clock), the hand-over of a dead one to exactly one
//! survivor, and the recovery queries scoped to one replica.
//!
//! `claim_dead_replica` deletes the stale row it picked with `FOR UPDATE SKIP LOCKED`
//! in one statement: survivors asking at once each lock a different row (or none), so
//! a dead replica is recovered once.

use std::sync::PoisonError;
use std::time::Duration;

use agentplane_core::{ReplicaId, TurnId};
use agentplane_engine::ports::{Appended, ExecutionRecord, ReplicaStore, StoreError};
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::events::text;
use crate::store::{in_tx, on_conn};
use crate::{PostgresStore, events, executions, pg};

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
        let row = conn
            .query_opt(
                "DELETE FROM replicas WHERE id = (
                     SELECT id FROM replicas
                     WHERE id <> $1 AND heartbeat_at < now() - make_interval(secs => $2)
                     ORDER BY heartbeat_at LIMIT 1
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

    async fn executions_of(&self, replica: &ReplicaId) -> Result<Vec<ExecutionRecord>, StoreError> {
        on_conn!(self, |db| executions::running_of(db, replica))
    }

    fn appended(&self) -> Option<mpsc::Receiver<Appended>> {
        self.appended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}
