//! `AuditStore` on SQLite: the audit chain read back (ADR 0048). The hashes are written
//! by the one event append (`rows.rs`); this file only reads, on the reader connections,
//! the columns exactly as stored.

use agentplane_core::ThreadId;
use agentplane_core::audit::ledger::{Entry, PolicySetLoaded};
use agentplane_core::audit::{ChainedEvent, ChainedRecord, RecordChain};
use agentplane_engine::ports::{
    AuditStore, AuditedApproval, AuditedKey, AuditedThread, AuditedTurn, ChainHead, RecordChainTip,
    StoreError,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::SqliteStore;
use crate::rows::backend;

#[async_trait]
impl AuditStore for SqliteStore {
    async fn audited_threads(
        &self,
        id: Option<&ThreadId>,
    ) -> Result<Vec<AuditedThread>, StoreError> {
        let id = id.map(|id| id.as_str().to_owned());
        self.read(move |c| audited_threads(c, id.as_deref())).await
    }

    async fn chained_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedEvent>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| chained_events(c, &thread, after, limit))
            .await
    }

    async fn chain_head(&self, thread: &ThreadId) -> Result<Option<ChainHead>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| chain_head(c, &thread)).await
    }

    async fn chained_records(
        &self,
        chain: RecordChain,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ChainedRecord>, StoreError> {
        self.read(move |c| crate::record_chains::records(c, chain, after, limit))
            .await
    }

    async fn record_chain_tip(&self, chain: RecordChain) -> Result<RecordChainTip, StoreError> {
        self.read(move |c| crate::record_chains::tip(c, chain))
            .await
    }

    async fn audited_keys(&self) -> Result<Vec<AuditedKey>, StoreError> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT id, client_id, digest, roles, created_at, expires_at, revoked_at
                 FROM api_keys ORDER BY rowid",
            )
            .and_then(|mut select| {
                select
                    .query_map([], |row| {
                        Ok(AuditedKey {
                            id: row.get(0)?,
                            client_id: row.get(1)?,
                            digest: row.get(2)?,
                            roles: row.get(3)?,
                            created_at: row.get(4)?,
                            expires_at: row.get(5)?,
                            revoked_at: row.get(6)?,
                        })
                    })?
                    .collect()
            })
            .map_err(backend)
        })
        .await
    }

    async fn audited_turns(&self, thread: &ThreadId) -> Result<Vec<AuditedTurn>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| {
            c.prepare_cached(
                "SELECT id, input, status, result FROM turns WHERE thread_id = ?1 ORDER BY rowid",
            )
            .and_then(|mut select| {
                select
                    .query_map([thread.as_str()], |row| {
                        Ok(AuditedTurn {
                            id: row.get(0)?,
                            input: row.get(1)?,
                            status: row.get(2)?,
                            result: row.get(3)?,
                        })
                    })?
                    .collect()
            })
            .map_err(backend)
        })
        .await
    }

    async fn audited_approvals(
        &self,
        thread: &ThreadId,
    ) -> Result<Vec<AuditedApproval>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| {
            c.prepare_cached(
                "SELECT id, turn_id, tool, policy, status, decided_by, feedback, decided_at
                 FROM approvals WHERE thread_id = ?1 ORDER BY rowid",
            )
            .and_then(|mut select| {
                select
                    .query_map([thread.as_str()], |row| {
                        Ok(AuditedApproval {
                            id: row.get(0)?,
                            turn_id: row.get(1)?,
                            tool: row.get(2)?,
                            policy: row.get(3)?,
                            status: row.get(4)?,
                            decided_by: row.get(5)?,
                            feedback: row.get(6)?,
                            decided_at: row.get(7)?,
                        })
                    })?
                    .collect()
            })
            .map_err(backend)
        })
        .await
    }

    async fn record_policy_set(
        &self,
        hash: &str,
        by: &str,
        policies: u64,
    ) -> Result<(), StoreError> {
        let hash = hash.to_owned();
        let loaded = PolicySetLoaded {
            by: by.to_owned(),
            policies,
        };
        self.job(move |c| crate::ledger::append(c, &Entry::PolicySetLoaded(loaded), &hash))
            .await
    }
}

fn audited_threads(c: &Connection, id: Option<&str>) -> Result<Vec<AuditedThread>, StoreError> {
    type Row = (String, [String; 4], Option<String>, i64, i64);
    let rows: Vec<Row> = c
        .prepare_cached(
            "SELECT id, client_id, agent, cwd, created_at, deleted_at, chained_since,
                    next_seq - 1
             FROM threads WHERE ?1 IS NULL OR id = ?1 ORDER BY rowid",
        )
        .and_then(|mut select| {
            select
                .query_map([id], |row| {
                    Ok((
                        row.get(0)?,
                        [row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?],
                        row.get(5)?,
                        row.get(6)?,
                        row.get(7)?,
                    ))
                })?
                .collect()
        })
        .map_err(backend)?;
    rows.into_iter()
        .map(
            |(id, [client_id, agent, cwd, created_at], deleted_at, since, events)| {
                let damaged = |what: &str| StoreError::Backend(format!("thread {id}: {what}"));
                Ok(AuditedThread {
                    id: ThreadId::parse(&id).map_err(|e| damaged(&e))?,
                    client_id,
                    agent,
                    cwd,
                    created_at,
                    deleted_at,
                    chained_since: u64::try_from(since).map_err(|_| damaged("chained_since"))?,
                    events: u64::try_from(events).map_err(|_| damaged("next_seq"))?,
                })
            },
        )
        .collect()
}

fn chained_events(
    c: &Connection,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<ChainedEvent>, StoreError> {
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    c.prepare_cached(
        "SELECT thread_id, seq, turn_id, kind, ts, payload, hash FROM events
         WHERE thread_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
    )
    .and_then(|mut select| {
        select
            .query_map(params![thread.as_str(), after, limit], chained_event)?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)
}

/// A row as stored. A negative `seq` cannot pass the table's CHECK; read as 0 it would
/// be reported as a gap by the verifier, not trusted.
fn chained_event(row: &Row<'_>) -> rusqlite::Result<ChainedEvent> {
    Ok(ChainedEvent {
        thread_id: row.get(0)?,
        seq: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
        turn_id: row.get(2)?,
        kind: row.get(3)?,
        ts: row.get(4)?,
        payload: row.get(5)?,
        hash: row.get(6)?,
    })
}

fn chain_head(c: &Connection, thread: &ThreadId) -> Result<Option<ChainHead>, StoreError> {
    let found: Option<(i64, String)> = c
        .prepare_cached(
            "SELECT seq, hash FROM events WHERE thread_id = ?1 AND hash IS NOT NULL
             ORDER BY seq DESC LIMIT 1",
        )
        .and_then(|mut select| {
            select
                .query_row([thread.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(backend)?;
    found
        .map(|(seq, hash)| {
            let seq = u64::try_from(seq)
                .map_err(|_| StoreError::Backend(format!("thread {thread}: negative seq")))?;
            Ok(ChainHead { seq, hash })
        })
        .transpose()
}
