//! The MCP gateway's log on PostgreSQL, as on SQLite (`mcp_calls.rs` there): one row
//! per finished tool call, and its read. Priced calls are summed into costs by
//! `costs.rs`.

use agentplane_core::{ApprovalId, McpCallId};
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{McpCallQuery, McpCallRecord, StoreError};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use agentplane_core::audit::RecordChain;

use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::record_chains;
use crate::rows::{damaged, opt_text, pg, text, unique_violation};

/// Inserts one call, stamped with the store's clock. `Conflict` for a known id or a
/// second call of the same approval.
pub(crate) async fn record(db: Db<'_>, call: McpCallRecord) -> Result<(), StoreError> {
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
    let (client, agent, server, tool, status) = (
        enc(&call.client),
        enc(&call.agent),
        enc(&call.server),
        enc(&call.tool),
        enc(&call.status),
    );
    let (detail, policy, result) = (
        enc_opt(call.detail.as_deref()),
        enc_opt(call.policy.as_deref()),
        enc_opt(result.as_deref()),
    );
    let link = record_chains::next(
        db,
        RecordChain::McpCalls,
        &[
            Some(call.id.as_str()),
            Some(&ts),
            Some(&client),
            Some(&agent),
            Some(&server),
            Some(&tool),
            Some(&status),
            detail.as_deref(),
            policy.as_deref(),
            approval,
            Some(&numbers[0]),
            Some(&numbers[1]),
            result.as_deref(),
        ],
    )
    .await?;
    let inserted = db
        .execute(
            "INSERT INTO mcp_calls (id, ts, client_id, agent, server, tool, status, detail,
                                    policy, approval_id, duration_ms, usd_micros, result,
                                    chain_pos, hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            &[
                &call.id.as_str(),
                &ts,
                &client,
                &agent,
                &server,
                &tool,
                &status,
                &detail,
                &policy,
                &approval,
                &duration,
                &usd,
                &result,
                &link.pos,
                &link.hash,
            ],
        )
        .await;
    match inserted {
        Ok(_) => record_chains::advance(db, RecordChain::McpCalls, &link).await,
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "MCP gateway call {} is already recorded",
            call.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

/// The calls `query` selects, newest first.
pub(crate) async fn list(
    db: Db<'_>,
    query: &McpCallQuery,
) -> Result<Vec<McpCallRecord>, StoreError> {
    let client = enc_opt(query.client.as_deref());
    let approval = query.approval.as_ref().map(ApprovalId::as_str);
    let limit = if query.limit == 0 {
        i64::MAX
    } else {
        i64::try_from(query.limit).unwrap_or(i64::MAX)
    };
    let params: [&(dyn ToSql + Sync); 3] = [&client, &approval, &limit];
    let rows = db
        .query(
            "SELECT id, ts, client_id, agent, server, tool, status, detail, policy,
                    approval_id, duration_ms, usd_micros, result
             FROM mcp_calls
             WHERE ($1::TEXT IS NULL OR client_id = $1)
               AND ($2::TEXT IS NULL OR approval_id = $2)
             ORDER BY ts DESC, pos DESC
             LIMIT $3",
            &params,
        )
        .await
        .map_err(pg)?;
    rows.iter().map(read).collect()
}

fn read(row: &Row) -> Result<McpCallRecord, StoreError> {
    let number = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = row.try_get(i).map_err(pg)?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    Ok(McpCallRecord {
        id: McpCallId::parse(&text(row, 0)?).map_err(|_| damaged("an MCP call's id"))?,
        ts: text(row, 1)?,
        client: text(row, 2)?,
        agent: text(row, 3)?,
        server: text(row, 4)?,
        tool: text(row, 5)?,
        status: text(row, 6)?,
        detail: opt_text(row, 7)?,
        policy: opt_text(row, 8)?,
        approval: opt_text(row, 9)?
            .map(|a| ApprovalId::parse(&a).map_err(|_| damaged("an MCP call's approval id")))
            .transpose()?,
        duration_ms: number(10)?,
        usd_micros: number(11)?,
        result: opt_text(row, 12)?
            .map(|r| serde_json::from_str(&r).map_err(|_| damaged("an MCP call's result")))
            .transpose()?,
    })
}
