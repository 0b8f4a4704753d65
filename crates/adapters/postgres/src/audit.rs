//! `AuditStore` on PostgreSQL: the audit chain read back (ADR 0048). The hashes are
//! written by the one event append (`rows.rs`); this file only reads the columns exactly
//! as stored (no NUL decoding: ids, kinds, times and JSON never carry the escape).

use agentplane_core::ThreadId;
use agentplane_core::audit::ledger::{Entry, PolicySetLoaded};
use agentplane_core::audit::{ChainedEvent, ChainedRecord, RecordChain};
use agentplane_engine::ports::{
    AuditStore, AuditedApproval, AuditedKey, AuditedThread, AuditedTurn, ChainHead, RecordChainTip,
    StoreError,
};
use async_trait::async_trait;
use tokio_postgres::Row;

use crate::PostgresStore;
use crate::db::Db;
use crate::rows::{damaged, pg, text};
use crate::store::{in_tx, on_conn};

#[async_trait]
impl AuditStore for PostgresStore {
    async fn audited_threads(
        &self,
        id: Option<&ThreadId>,
    ) -> Result<Vec<AuditedThread>, StoreError> {
        on_conn!(self, |db| audited_threads(db, id))
    }

    async fn chained_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedEvent>, StoreError> {
        on_conn!(self, |db| chained_events(db, thread, after, limit))
    }

    async fn chain_head(&self, thread: &ThreadId) -> Result<Option<ChainHead>, StoreError> {
        on_conn!(self, |db| chain_head(db, thread))
    }

    async fn chained_records(
        &self,
        chain: RecordChain,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedRecord>, StoreError> {
        on_conn!(self, |db| crate::record_chains::records(
            db, chain, after, limit
        ))
    }

    async fn record_chain_tip(&self, chain: RecordChain) -> Result<RecordChainTip, StoreError> {
        on_conn!(self, |db| crate::record_chains::tip(db, chain))
    }

    async fn audited_keys(&self) -> Result<Vec<AuditedKey>, StoreError> {
        on_conn!(self, |db| audited_keys(db))
    }

    async fn audited_turns(&self, thread: &ThreadId) -> Result<Vec<AuditedTurn>, StoreError> {
        on_conn!(self, |db| audited_turns(db, thread))
    }

    async fn audited_approvals(
        &self,
        thread: &ThreadId,
    ) -> Result<Vec<AuditedApproval>, StoreError> {
        on_conn!(self, |db| audited_approvals(db, thread))
    }

    async fn record_policy_set(
        &self,
        hash: &str,
        by: &str,
        policies: u64,
    ) -> Result<(), StoreError> {
        let loaded = Entry::PolicySetLoaded(PolicySetLoaded {
            by: by.to_owned(),
            policies,
        });
        in_tx!(self, |db| crate::ledger::append(db, &loaded, hash))
    }
}

// The rows below are read decoded (the NUL escape undone): the ledger records the
// values agentplane wrote, in JSON, where a NUL needs no escape.

async fn audited_keys(db: Db<'_>) -> Result<Vec<AuditedKey>, StoreError> {
    db.query(
        "SELECT id, client_id, digest, roles, created_at, expires_at, revoked_at
         FROM api_keys ORDER BY pos",
        &[],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|row| {
        Ok(AuditedKey {
            id: row.try_get(0).map_err(pg)?,
            client_id: text(row, 1)?,
            digest: row.try_get(2).map_err(pg)?,
            roles: text(row, 3)?,
            created_at: row.try_get(4).map_err(pg)?,
            expires_at: row.try_get(5).map_err(pg)?,
            revoked_at: row.try_get(6).map_err(pg)?,
        })
    })
    .collect()
}

async fn audited_turns(db: Db<'_>, thread: &ThreadId) -> Result<Vec<AuditedTurn>, StoreError> {
    db.query(
        "SELECT id, input, status, result FROM turns WHERE thread_id = $1
         ORDER BY created_at, id",
        &[&thread.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|row| {
        Ok(AuditedTurn {
            id: row.try_get(0).map_err(pg)?,
            input: text(row, 1)?,
            status: row.try_get(2).map_err(pg)?,
            result: row.try_get(3).map_err(pg)?,
        })
    })
    .collect()
}

async fn audited_approvals(
    db: Db<'_>,
    thread: &ThreadId,
) -> Result<Vec<AuditedApproval>, StoreError> {
    db.query(
        "SELECT id, turn_id, tool, policy, status, decided_by, feedback, decided_at
         FROM approvals WHERE thread_id = $1 ORDER BY created_at, id",
        &[&thread.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|row| {
        Ok(AuditedApproval {
            id: row.try_get(0).map_err(pg)?,
            turn_id: row.try_get(1).map_err(pg)?,
            tool: text(row, 2)?,
            policy: text(row, 3)?,
            status: row.try_get(4).map_err(pg)?,
            decided_by: crate::rows::opt_text(row, 5)?,
            feedback: crate::rows::opt_text(row, 6)?,
            decided_at: row.try_get(7).map_err(pg)?,
        })
    })
    .collect()
}

async fn audited_threads(
    db: Db<'_>,
    id: Option<&ThreadId>,
) -> Result<Vec<AuditedThread>, StoreError> {
    let id = id.map(ThreadId::as_str);
    db.query(
        "SELECT id, client_id, chained_since, next_seq - 1, agent, cwd, created_at, deleted_at
         FROM threads WHERE $1::TEXT IS NULL OR id = $1 ORDER BY pos",
        &[&id],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|row| {
        let id = text(row, 0)?;
        let since: i64 = row.try_get(2).map_err(pg)?;
        let events: i64 = row.try_get(3).map_err(pg)?;
        Ok(AuditedThread {
            id: ThreadId::parse(&id).map_err(|_| damaged(format_args!("thread id {id}")))?,
            client_id: text(row, 1)?,
            agent: text(row, 4)?,
            cwd: text(row, 5)?,
            created_at: row.try_get(6).map_err(pg)?,
            deleted_at: row.try_get(7).map_err(pg)?,
            chained_since: u64::try_from(since)
                .map_err(|_| damaged(format_args!("chained_since of thread {id}")))?,
            events: u64::try_from(events)
                .map_err(|_| damaged(format_args!("next_seq of thread {id}")))?,
        })
    })
    .collect()
}

async fn chained_events(
    db: Db<'_>,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<ChainedEvent>, StoreError> {
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    db.query(
        "SELECT thread_id, seq, turn_id, kind, ts, payload, hash FROM events
         WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        &[&thread.as_str(), &after, &limit],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(chained_event)
    .collect()
}

/// A row as stored. A negative `seq` cannot pass the table's CHECK; read as 0 it would
/// be reported as a gap by the verifier, not trusted.
fn chained_event(row: &Row) -> Result<ChainedEvent, StoreError> {
    let seq: i64 = row.try_get(1).map_err(pg)?;
    Ok(ChainedEvent {
        thread_id: row.try_get(0).map_err(pg)?,
        seq: u64::try_from(seq).unwrap_or(0),
        turn_id: row.try_get(2).map_err(pg)?,
        kind: row.try_get(3).map_err(pg)?,
        ts: row.try_get(4).map_err(pg)?,
        payload: row.try_get(5).map_err(pg)?,
        hash: row.try_get(6).map_err(pg)?,
    })
}

async fn chain_head(db: Db<'_>, thread: &ThreadId) -> Result<Option<ChainHead>, StoreError> {
    let Some(row) = db
        .query_opt(
            "SELECT seq, hash FROM events WHERE thread_id = $1 AND hash IS NOT NULL
             ORDER BY seq DESC LIMIT 1",
            &[&thread.as_str()],
        )
        .await
        .map_err(pg)?
    else {
        return Ok(None);
    };
    let seq: i64 = row.try_get(0).map_err(pg)?;
    Ok(Some(ChainHead {
        seq: u64::try_from(seq).map_err(|_| damaged(format_args!("seq of thread {thread}")))?,
        hash: row.try_get(1).map_err(pg)?,
    }))
}
