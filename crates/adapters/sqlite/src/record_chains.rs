//! The record chains on SQLite (ADR 0048): the gateway's `model_calls` and the MCP
//! gateway's `mcp_calls`, each one chain in the order its records are stored.
//!
//! `link` runs on the writer thread inside the savepoint that inserts the record: it
//! reads the chain's tip from `audit_chains`, gives the record the next position and its
//! hash, and moves the tip, so a rolled-back insert takes its link with it and the chain
//! has no gap. The reads return every hashed column as stored text, for the verifier.

use agentplane_core::audit::{ChainedRecord, RecordChain, record_hash, to_hex};
use agentplane_engine::ports::{RecordChainTip, StoreError};
use rusqlite::{Connection, params};

use crate::rows::backend;

/// A record's place in its chain, given when it is stored.
pub(crate) struct Link {
    pub pos: i64,
    pub hash: String,
}

/// The next link of `chain` for a record whose hashed columns are `values` (in
/// [`RecordChain::columns`] order, as they will be stored). The caller inserts the
/// record with it, then calls [`advance`] in the same savepoint.
pub(crate) fn next(
    c: &Connection,
    chain: RecordChain,
    values: &[Option<&str>],
) -> Result<Link, StoreError> {
    let (last_pos, last_hash): (i64, Option<String>) = c
        .prepare_cached("SELECT last_pos, last_hash FROM audit_chains WHERE chain = ?1")
        .and_then(|mut select| {
            select.query_row([chain.name()], |row| Ok((row.get(0)?, row.get(1)?)))
        })
        .map_err(backend)?;
    let prev = match last_hash.as_deref() {
        None => agentplane_core::audit::GENESIS,
        Some(hex) => agentplane_core::audit::from_hex(hex).ok_or_else(|| {
            StoreError::Backend(format!("the {} chain's last hash is damaged", chain.name()))
        })?,
    };
    let pos = last_pos.saturating_add(1);
    let hash = record_hash(&prev, chain, pos.unsigned_abs(), values);
    Ok(Link {
        pos,
        hash: to_hex(&hash),
    })
}

/// Moves `chain`'s tip to the record just inserted with `link`.
pub(crate) fn advance(c: &Connection, chain: RecordChain, link: &Link) -> Result<(), StoreError> {
    c.prepare_cached("UPDATE audit_chains SET last_pos = ?1, last_hash = ?2 WHERE chain = ?3")
        .and_then(|mut update| update.execute(params![link.pos, link.hash, chain.name()]))
        .map_err(backend)?;
    Ok(())
}

/// The chain's records with `chain_pos > after`, by position, at most `limit`.
pub(crate) fn records(
    c: &Connection,
    chain: RecordChain,
    after: u64,
    limit: usize,
) -> Result<Vec<ChainedRecord>, StoreError> {
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let columns = chain.columns();
    // Integers read back as the decimal text they were hashed as; text as stored.
    let select = columns
        .iter()
        .map(|c| format!("CAST({c} AS TEXT)"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT chain_pos, hash, {select} FROM {} WHERE chain_pos > ?1
         ORDER BY chain_pos LIMIT ?2",
        chain.name()
    );
    c.prepare_cached(&sql)
        .and_then(|mut query| {
            query
                .query_map(params![after, limit], |row| {
                    let values = (0..columns.len())
                        .map(|i| row.get::<_, Option<String>>(i + 2))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    Ok(ChainedRecord {
                        chain,
                        // The column's CHECK keeps it positive; 0 would read as a gap.
                        pos: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                        hash: row.get(1)?,
                        values,
                    })
                })?
                .collect()
        })
        .map_err(backend)
}

/// Where the chain ends, and how many records predate it.
pub(crate) fn tip(c: &Connection, chain: RecordChain) -> Result<RecordChainTip, StoreError> {
    let (last_pos, last_hash): (i64, Option<String>) = c
        .prepare_cached("SELECT last_pos, last_hash FROM audit_chains WHERE chain = ?1")
        .and_then(|mut select| {
            select.query_row([chain.name()], |row| Ok((row.get(0)?, row.get(1)?)))
        })
        .map_err(backend)?;
    let unchained: i64 = c
        .prepare_cached(&format!(
            "SELECT count(*) FROM {} WHERE chain_pos IS NULL",
            chain.name()
        ))
        .and_then(|mut select| select.query_row([], |row| row.get(0)))
        .map_err(backend)?;
    Ok(RecordChainTip {
        last_pos: u64::try_from(last_pos).unwrap_or(0),
        last_hash,
        unchained: u64::try_from(unchained).unwrap_or(0),
    })
}
