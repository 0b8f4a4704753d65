//! The cost report's read: `cost` events, and the model calls made outside turns (the
//! gateway's), summed per agent, client, provider, model and UTC day (and per thread
//! and turn when asked).
//!
//! SQL selects and filters; the sums are done here, in `u64` that saturates. SQLite
//! cannot hold a `u64` above `i64::MAX` as an integer (JSON turns it into a float) and
//! its `SUM` fails on overflow, so summing there would either lose exactness or fail
//! the whole report on one extreme value. The numbers are read as the JSON text they
//! were written as and parsed exactly. Deleted threads count: the spend happened.
//! Nothing here writes.

use std::collections::BTreeMap;

use agentplane_engine::ports::records::{CostKey, add_cost_call, cost_bound, cost_rows};
use agentplane_engine::ports::{CostQuery, CostRow, StoreError};
use rusqlite::Connection;
use rusqlite::types::Value;

use crate::rows::backend;

/// Sums the cost events that `query` selects.
pub(crate) fn costs(c: &Connection, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
    let mut sql = String::from(
        "SELECT t.agent, t.client_id, e.payload ->> '$.provider', e.payload ->> '$.model',
                substr(e.ts, 1, 10), e.thread_id, e.turn_id, e.seq,
                e.payload -> '$.input_tokens', e.payload -> '$.output_tokens',
                e.payload -> '$.usd_micros'
         FROM events e JOIN threads t ON t.id = e.thread_id
         WHERE e.kind = 'cost'",
    );
    let mut params: Vec<Value> = Vec::new();
    let mut filter = |sql: &mut String, condition: &str, value: String| {
        params.push(Value::Text(value));
        sql.push_str(&format!(" AND {condition} ?{}", params.len()));
    };
    if let Some(client) = &query.client {
        filter(&mut sql, "t.client_id =", client.clone());
    }
    if let Some(agent) = &query.agent {
        filter(&mut sql, "t.agent =", agent.clone());
    }
    if let Some(thread) = &query.thread {
        filter(&mut sql, "e.thread_id =", thread.as_str().to_owned());
    }
    if let Some(since) = &query.since {
        filter(&mut sql, "e.ts >=", cost_bound("since", since)?);
    }
    if let Some(until) = &query.until {
        filter(&mut sql, "e.ts <", cost_bound("until", until)?);
    }

    let mut groups: BTreeMap<CostKey, CostRow> = BTreeMap::new();
    let mut select = c.prepare(&sql).map_err(backend)?;
    let mut rows = select
        .query(rusqlite::params_from_iter(params))
        .map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        let text = |i: usize| -> Result<String, StoreError> {
            Ok(row
                .get::<_, Option<String>>(i)
                .map_err(backend)?
                .unwrap_or_default())
        };
        let (thread, turn, seq): (String, String, i64) = (
            row.get(5).map_err(backend)?,
            row.get(6).map_err(backend)?,
            row.get(7).map_err(backend)?,
        );
        let number = |i: usize, field: &str| -> Result<u64, StoreError> {
            let raw: Option<String> = row.get(i).map_err(backend)?;
            raw.as_deref()
                .and_then(|raw| raw.parse().ok())
                .ok_or_else(|| {
                    StoreError::Backend(format!(
                        "damaged cost event {thread}/{seq}: `{field}` is not a whole number \
                     of at most 20 digits"
                    ))
                })
        };
        let (input_tokens, output_tokens, usd_micros) = (
            number(8, "input_tokens")?,
            number(9, "output_tokens")?,
            number(10, "usd_micros")?,
        );
        let key: CostKey = (
            text(0)?,
            text(1)?,
            text(2)?,
            text(3)?,
            text(4)?,
            query.by_turn.then(|| thread.clone()),
            query.by_turn.then(|| turn.clone()),
        );
        add_cost_call(&mut groups, key, input_tokens, output_tokens, usd_micros);
    }
    drop(rows);
    if query.thread.is_none() {
        model_calls(c, query, &mut groups)?;
    }
    cost_rows(groups)
}

/// Adds the model calls made outside turns (the gateway's, `model_calls.rs`) and the
/// priced MCP gateway tool calls (`mcp_calls.rs`, provider `mcp`) that the query selects. They have no thread or turn, so a thread filter excludes them.
fn model_calls(
    c: &Connection,
    query: &CostQuery,
    groups: &mut BTreeMap<CostKey, CostRow>,
) -> Result<(), StoreError> {
    let mut sql = String::from(
        "SELECT agent, client_id, provider, model, substr(ts, 1, 10),
                input_tokens, output_tokens, usd_micros
         FROM (SELECT agent, client_id, provider, model, ts,
                      input_tokens, output_tokens, usd_micros
               FROM model_calls
               UNION ALL
               SELECT agent, client_id, 'mcp', tool, ts, 0, 0, usd_micros
               FROM mcp_calls WHERE usd_micros > 0)
         WHERE 1 = 1",
    );
    let mut params: Vec<Value> = Vec::new();
    let mut filter = |sql: &mut String, condition: &str, value: String| {
        params.push(Value::Text(value));
        sql.push_str(&format!(" AND {condition} ?{}", params.len()));
    };
    if let Some(client) = &query.client {
        filter(&mut sql, "client_id =", client.clone());
    }
    if let Some(agent) = &query.agent {
        filter(&mut sql, "agent =", agent.clone());
    }
    if let Some(since) = &query.since {
        filter(&mut sql, "ts >=", cost_bound("since", since)?);
    }
    if let Some(until) = &query.until {
        filter(&mut sql, "ts <", cost_bound("until", until)?);
    }
    let mut select = c.prepare_cached(&sql).map_err(backend)?;
    let mut rows = select
        .query(rusqlite::params_from_iter(params))
        .map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        let text = |i: usize| -> Result<String, StoreError> { row.get(i).map_err(backend) };
        // The table's CHECKs keep these non-negative.
        let number = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = row.get(i).map_err(backend)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        let key: CostKey = (text(0)?, text(1)?, text(2)?, text(3)?, text(4)?, None, None);
        add_cost_call(groups, key, number(5)?, number(6)?, number(7)?);
    }
    Ok(())
}
