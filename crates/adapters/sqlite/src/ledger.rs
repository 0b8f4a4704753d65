//! The ledger on SQLite (`agentplane_core::audit::ledger`, docs/audit.md): a record of
//! what no event holds, appended in the savepoint of the change it records (a thread
//! created or deleted, a key created or revoked, a policy set loaded), so the change
//! and its record commit together or not at all. Its genesis is written once, by the
//! migration that creates the table (`begin`).

use std::collections::BTreeMap;

use agentplane_core::audit::RecordChain;
use agentplane_core::audit::ledger::{
    Entry, Genesis, KeyCreated, KeyRevoked, ThreadCreated, ThreadDeleted,
};
use agentplane_engine::ports::StoreError;
use agentplane_engine::ports::records::stored_now;
use rusqlite::{Connection, params};

use crate::record_chains;
use crate::rows::backend;

/// Appends `entry` about `subject` (a thread or key id, a policy set's hash) as the
/// ledger's next record.
pub(crate) fn append(c: &Connection, entry: &Entry, subject: &str) -> Result<(), StoreError> {
    let ts = stored_now();
    let detail = entry.detail();
    let values = [
        Some(entry.kind()),
        Some(ts.as_str()),
        Some(subject),
        Some(detail.as_str()),
    ];
    let link = record_chains::next(c, RecordChain::Ledger, &values)?;
    c.prepare_cached(
        "INSERT INTO audit_ledger (chain_pos, kind, ts, subject, detail, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut insert| {
        insert.execute(params![
            link.pos,
            entry.kind(),
            ts,
            subject,
            detail,
            link.hash
        ])
    })
    .map_err(backend)?;
    record_chains::advance(c, RecordChain::Ledger, &link)
}

/// The genesis and the state the ledger starts from: which threads have events from
/// before the event chain (and from which seq they are chained), how many gateway
/// records predate their chains, and every thread and key that exists now. Runs once,
/// in the migration's transaction.
pub(crate) fn begin(c: &Connection, schema: u32) -> Result<(), StoreError> {
    let threads: Vec<(String, ThreadCreated, Option<String>, i64)> = c
        .prepare(
            "SELECT id, client_id, agent, cwd, created_at, deleted_at, chained_since
             FROM threads ORDER BY rowid",
        )
        .and_then(|mut select| {
            select
                .query_map([], |row| {
                    Ok((
                        row.get(0)?,
                        ThreadCreated {
                            client_id: row.get(1)?,
                            agent: row.get(2)?,
                            cwd: row.get(3)?,
                            created_at: row.get(4)?,
                        },
                        row.get(5)?,
                        row.get(6)?,
                    ))
                })?
                .collect()
        })
        .map_err(backend)?;
    let mut genesis = Genesis {
        schema,
        threads_chained_since: threads
            .iter()
            .filter(|(_, _, _, since)| *since > 1)
            .map(|(id, _, _, since)| (id.clone(), since.unsigned_abs()))
            .collect(),
        unchained_records: BTreeMap::new(),
    };
    for chain in [RecordChain::ModelCalls, RecordChain::McpCalls] {
        let unchained = record_chains::tip(c, chain)?.unchained;
        genesis
            .unchained_records
            .insert(chain.name().to_owned(), unchained);
    }
    append(c, &Entry::Genesis(genesis), "")?;
    for (id, created, deleted_at, _) in threads {
        append(c, &Entry::ThreadCreated(created), &id)?;
        if let Some(deleted_at) = deleted_at {
            append(c, &Entry::ThreadDeleted(ThreadDeleted { deleted_at }), &id)?;
        }
    }
    let keys: Vec<(String, KeyCreated, Option<String>)> = c
        .prepare(
            "SELECT id, client_id, digest, roles, created_at, expires_at, revoked_at
             FROM api_keys ORDER BY rowid",
        )
        .and_then(|mut select| {
            select
                .query_map([], |row| {
                    Ok((
                        row.get(0)?,
                        KeyCreated {
                            client_id: row.get(1)?,
                            digest: row.get(2)?,
                            roles: row.get(3)?,
                            created_at: row.get(4)?,
                            expires_at: row.get(5)?,
                        },
                        row.get(6)?,
                    ))
                })?
                .collect()
        })
        .map_err(backend)?;
    for (id, created, revoked_at) in keys {
        append(c, &Entry::KeyCreated(created), &id)?;
        if let Some(revoked_at) = revoked_at {
            append(c, &Entry::KeyRevoked(KeyRevoked { revoked_at }), &id)?;
        }
    }
    Ok(())
}
