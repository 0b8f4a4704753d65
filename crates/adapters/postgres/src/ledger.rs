//! The ledger on PostgreSQL, as on SQLite (`ledger.rs` there): appended in the
//! transaction of the change it records, after taking the ledger's row in
//! `audit_chains` `FOR UPDATE` (`record_chains::next`), so every replica appends to one
//! gapless ledger. Values are recorded as agentplane wrote them (the NUL escape undone,
//! JSON needs none), which is what `audit verify` reads back and compares. The genesis is written by the migration that
//! creates the table (`begin`), in its transaction.

use std::collections::BTreeMap;

use agentplane_core::audit::RecordChain;
use agentplane_core::audit::ledger::{
    Entry, Genesis, KeyCreated, KeyRevoked, ThreadCreated, ThreadDeleted,
};
use agentplane_engine::ports::StoreError;
use agentplane_engine::ports::records::stored_now;

use crate::db::Db;
use crate::record_chains;
use crate::rows::{pg, text};

/// Appends `entry` about `subject` as the ledger's next record.
pub(crate) async fn append(db: Db<'_>, entry: &Entry, subject: &str) -> Result<(), StoreError> {
    let ts = stored_now();
    let detail = entry.detail();
    let values = [
        Some(entry.kind()),
        Some(ts.as_str()),
        Some(subject),
        Some(detail.as_str()),
    ];
    let link = record_chains::next(db, RecordChain::Ledger, &values).await?;
    db.execute(
        "INSERT INTO audit_ledger (chain_pos, kind, ts, subject, detail, hash)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[&link.pos, &entry.kind(), &ts, &subject, &detail, &link.hash],
    )
    .await
    .map_err(pg)?;
    record_chains::advance(db, RecordChain::Ledger, &link).await
}

/// The genesis and the threads and keys that exist when the ledger begins.
pub(crate) async fn begin(db: Db<'_>, schema: u32) -> Result<(), StoreError> {
    let threads = db
        .query(
            "SELECT id, client_id, agent, cwd, created_at, deleted_at, chained_since
             FROM threads ORDER BY pos",
            &[],
        )
        .await
        .map_err(pg)?;
    let mut genesis = Genesis {
        schema,
        threads_chained_since: BTreeMap::new(),
        unchained_records: BTreeMap::new(),
    };
    let mut created = Vec::new();
    for row in &threads {
        let id: String = row.try_get(0).map_err(pg)?;
        let since: i64 = row.try_get(6).map_err(pg)?;
        if since > 1 {
            genesis
                .threads_chained_since
                .insert(id.clone(), since.unsigned_abs());
        }
        let thread = ThreadCreated {
            client_id: text(row, 1)?,
            agent: text(row, 2)?,
            cwd: text(row, 3)?,
            created_at: row.try_get(4).map_err(pg)?,
        };
        let deleted_at: Option<String> = row.try_get(5).map_err(pg)?;
        created.push((id, thread, deleted_at));
    }
    for chain in [RecordChain::ModelCalls, RecordChain::McpCalls] {
        let unchained = record_chains::tip(db, chain).await?.unchained;
        genesis
            .unchained_records
            .insert(chain.name().to_owned(), unchained);
    }
    append(db, &Entry::Genesis(genesis), "").await?;
    for (id, thread, deleted_at) in created {
        append(db, &Entry::ThreadCreated(thread), &id).await?;
        if let Some(deleted_at) = deleted_at {
            append(db, &Entry::ThreadDeleted(ThreadDeleted { deleted_at }), &id).await?;
        }
    }
    let keys = db
        .query(
            "SELECT id, client_id, digest, roles, created_at, expires_at, revoked_at
             FROM api_keys ORDER BY created_at, id",
            &[],
        )
        .await
        .map_err(pg)?;
    for row in &keys {
        let id: String = row.try_get(0).map_err(pg)?;
        let key = KeyCreated {
            client_id: text(row, 1)?,
            digest: row.try_get(2).map_err(pg)?,
            roles: text(row, 3)?,
            created_at: row.try_get(4).map_err(pg)?,
            expires_at: row.try_get(5).map_err(pg)?,
        };
        append(db, &Entry::KeyCreated(key), &id).await?;
        let revoked_at: Option<String> = row.try_get(6).map_err(pg)?;
        if let Some(revoked_at) = revoked_at {
            append(db, &Entry::KeyRevoked(KeyRevoked { revoked_at }), &id).await?;
        }
    }
    Ok(())
}
