//! The record chains on PostgreSQL (ADR 0048), as on SQLite (`record_chains.rs` there):
//! `model_calls` and `mcp_calls`, each one chain in the order its records are stored.
//!
//! `next` takes the chain's row in `audit_chains` `FOR UPDATE` inside the transaction
//! that inserts the record, so whichever replica stores a record waits for the one
//! before it to commit, and reads the tip that one committed (READ COMMITTED re-reads
//! the locked row): one gapless chain across replicas. The hash covers the text as
//! stored (after the NUL escape).

use agentplane_core::audit::{ChainedRecord, GENESIS, RecordChain, from_hex, record_hash, to_hex};
use agentplane_engine::ports::{RecordChainTip, StoreError};

use crate::db::Db;
use crate::rows::{damaged, pg};

/// A record's place in its chain, given when it is stored.
pub(crate) struct Link {
    pub pos: i64,
    pub hash: String,
}

/// The next link of `chain` for a record whose hashed columns are `values` (in
/// [`RecordChain::columns`] order, as they will be stored). Must run in the
/// transaction that inserts the record and then calls [`advance`].
pub(crate) async fn next(
    db: Db<'_>,
    chain: RecordChain,
    values: &[Option<&str>],
) -> Result<Link, StoreError> {
    let row = db
        .query_opt(
            "SELECT last_pos, last_hash FROM audit_chains WHERE chain = $1 FOR UPDATE",
            &[&chain.name()],
        )
        .await
        .map_err(pg)?
        .ok_or_else(|| damaged(format_args!("the {} chain has no row", chain.name())))?;
    let last_pos: i64 = row.try_get(0).map_err(pg)?;
    let last_hash: Option<String> = row.try_get(1).map_err(pg)?;
    let prev = match last_hash.as_deref() {
        None => GENESIS,
        Some(hex) => from_hex(hex)
            .ok_or_else(|| damaged(format_args!("the {} chain's last hash", chain.name())))?,
    };
    let pos = last_pos.saturating_add(1);
    Ok(Link {
        pos,
        hash: to_hex(&record_hash(&prev, chain, pos.unsigned_abs(), values)),
    })
}

/// Moves `chain`'s tip to the record just inserted with `link`.
pub(crate) async fn advance(db: Db<'_>, chain: RecordChain, link: &Link) -> Result<(), StoreError> {
    db.execute(
        "UPDATE audit_chains SET last_pos = $1, last_hash = $2 WHERE chain = $3",
        &[&link.pos, &link.hash, &chain.name()],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// The chain's records with `chain_pos > after`, by position, at most `limit`.
pub(crate) async fn records(
    db: Db<'_>,
    chain: RecordChain,
    after: u64,
    limit: usize,
) -> Result<Vec<ChainedRecord>, StoreError> {
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let columns = chain.columns();
    let select = columns
        .iter()
        .map(|c| format!("{c}::TEXT"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT chain_pos, hash, {select} FROM {} WHERE chain_pos > $1
         ORDER BY chain_pos LIMIT $2",
        chain.name()
    );
    db.query(&sql, &[&after, &limit])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| {
            let pos: i64 = row.try_get(0).map_err(pg)?;
            let values = (0..columns.len())
                .map(|i| row.try_get::<_, Option<String>>(i + 2).map_err(pg))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(ChainedRecord {
                chain,
                pos: u64::try_from(pos).unwrap_or(0),
                hash: row.try_get(1).map_err(pg)?,
                values,
            })
        })
        .collect()
}

/// Where the chain ends, and how many records predate it.
pub(crate) async fn tip(db: Db<'_>, chain: RecordChain) -> Result<RecordChainTip, StoreError> {
    let row = db
        .query_opt(
            "SELECT last_pos, last_hash FROM audit_chains WHERE chain = $1",
            &[&chain.name()],
        )
        .await
        .map_err(pg)?
        .ok_or_else(|| damaged(format_args!("the {} chain has no row", chain.name())))?;
    let last_pos: i64 = row.try_get(0).map_err(pg)?;
    let last_hash: Option<String> = row.try_get(1).map_err(pg)?;
    let unchained: i64 = db
        .query_opt(
            &format!(
                "SELECT count(*) FROM {} WHERE chain_pos IS NULL",
                chain.name()
            ),
            &[],
        )
        .await
        .map_err(pg)?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(pg)?
        .unwrap_or(0);
    Ok(RecordChainTip {
        last_pos: u64::try_from(last_pos).unwrap_or(0),
        last_hash,
        unchained: u64::try_from(unchained).unwrap_or(0),
    })
}
