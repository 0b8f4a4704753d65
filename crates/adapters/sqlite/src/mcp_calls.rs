//! The MCP gateway's log: one row per finished tool call (`record`, run by the writer
//! thread) and its read (`list`). Priced calls are summed into costs by `costs.rs`.
//! Nothing here decides what a call cost or how it ended; the engine did.

use agentplane_core::{ApprovalId, McpCallId};
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{McpCallQuery, McpCallRecord, StoreError};
use rusqlite::types::Value;
use rusqlite::{Connection, Row, params};

use agentplane_core::audit::RecordChain;

use crate::record_chains;
use crate::rows::{self, backend};

/// Inserts one call, stamped with the store's clock and linked into the `mcp_calls`
/// chain (in the writer's savepoint). `Conflict` for a known id or a second call of the
/// same approval.
pub(crate) fn record(c: &Connection, call: McpCallRecord) -> Result<(), StoreError> {
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let result = match &call.result {
        Some(value) => Some(
            serde_json::to_string(value)
                .map_err(|e| StoreError::Backend(format!("an MCP call's result: {e}")))?,
        ),
        None => None,
    };
    let ts = stored_now();
    let (duration, usd) = (clamp(call.duration_ms), clamp(call.usd_micros));
    let numbers = [duration.to_string(), usd.to_string()];
    let approval = call.approval.as_ref().map(ApprovalId::as_str);
    let link = record_chains::next(
        c,
        RecordChain::McpCalls,
        &[
            Some(call.id.as_str()),
            Some(&ts),
            Some(&call.client),
            Some(&call.agent),
            Some(&call.server),
            Some(&call.tool),
            Some(&call.status),
            call.detail.as_deref(),
            call.policy.as_deref(),
            approval,
            Some(&numbers[0]),
            Some(&numbers[1]),
            result.as_deref(),
        ],
    )?;
    let inserted = c
        .prepare_cached(
            "INSERT INTO mcp_calls (id, ts, client_id, agent, server, tool, status, detail,
                                    policy, approval_id, duration_ms, usd_micros, result,
                                    chain_pos, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                call.id.as_str(),
                ts,
                call.client,
                call.agent,
                call.server,
                call.tool,
                call.status,
                call.detail,
                call.policy,
                approval,
                duration,
                usd,
                result,
                link.pos,
                link.hash,
            ])
        });
    match inserted {
        Ok(_) => record_chains::advance(c, RecordChain::McpCalls, &link),
        Err(e)
            if matches!(
                e.sqlite_extended_error_code(),
                Some(rows::PRIMARY_KEY_VIOLATION | rows::UNIQUE_VIOLATION)
            ) =>
        {
            Err(StoreError::Conflict(format!(
                "MCP gateway call {} is already recorded",
                call.id
            )))
        }
        Err(e) => Err(backend(e)),
    }
}

/// The calls `query` selects, newest first.
pub(crate) fn list(c: &Connection, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError> {
    let mut sql = String::from(
        "SELECT id, ts, client_id, agent, server, tool, status, detail, policy, approval_id,
                duration_ms, usd_micros, result
         FROM mcp_calls WHERE 1 = 1",
    );
    let mut params: Vec<Value> = Vec::new();
    if let Some(client) = &query.client {
        params.push(Value::Text(client.clone()));
        sql.push_str(&format!(" AND client_id = ?{}", params.len()));
    }
    if let Some(approval) = &query.approval {
        params.push(Value::Text(approval.as_str().to_owned()));
        sql.push_str(&format!(" AND approval_id = ?{}", params.len()));
    }
    sql.push_str(" ORDER BY ts DESC, rowid DESC");
    if query.limit > 0 {
        sql.push_str(&format!(" LIMIT {}", query.limit));
    }
    let mut select = c.prepare_cached(&sql).map_err(backend)?;
    let rows = select
        .query_map(rusqlite::params_from_iter(params), read)
        .map_err(backend)?;
    rows.map(|row| row.map_err(backend)?).collect()
}

fn read(row: &Row<'_>) -> rusqlite::Result<Result<McpCallRecord, StoreError>> {
    let number = |i: usize| -> rusqlite::Result<u64> {
        let n: i64 = row.get(i)?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let id: String = row.get(0)?;
    let approval: Option<String> = row.get(9)?;
    let result: Option<String> = row.get(12)?;
    let record = (|| {
        let corrupt =
            |what: &str| StoreError::Backend(format!("a stored MCP call has a bad {what}"));
        Ok(McpCallRecord {
            id: McpCallId::parse(&id).map_err(|_| corrupt("id"))?,
            ts: row.get(1).map_err(backend)?,
            client: row.get(2).map_err(backend)?,
            agent: row.get(3).map_err(backend)?,
            server: row.get(4).map_err(backend)?,
            tool: row.get(5).map_err(backend)?,
            status: row.get(6).map_err(backend)?,
            detail: row.get(7).map_err(backend)?,
            policy: row.get(8).map_err(backend)?,
            approval: approval
                .map(|a| ApprovalId::parse(&a).map_err(|_| corrupt("approval id")))
                .transpose()?,
            duration_ms: number(10).map_err(backend)?,
            usd_micros: number(11).map_err(backend)?,
            result: result
                .map(|r| serde_json::from_str(&r).map_err(|_| corrupt("result")))
                .transpose()?,
        })
    })();
    Ok(record)
}
