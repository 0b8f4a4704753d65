//! The cost report's read — `cost` events and the model calls made outside turns,
//! summed per agent, client, provider, model and UTC day (and per thread and turn when
//! asked) — and the one write that records such a model call.
//!
//! As on SQLite, SQL selects and filters and the sums are done here in `u64` that
//! saturates: the numbers are parsed from the event's JSON text exactly, so a value
//! above `i64::MAX` neither loses precision nor fails the report. Deleted threads
//! count: the spend happened.

use std::collections::BTreeMap;

use agentplane_engine::ports::records::{
    CostKey, add_cost_call, cost_bound, cost_rows, stored_now,
};
use agentplane_engine::ports::{CostQuery, CostRow, ModelCallRecord, StoreError};
use tokio_postgres::types::ToSql;

use agentplane_core::audit::RecordChain;

use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::record_chains;
use crate::rows::{pg, text, unique_violation};

/// Sums the cost events and model calls that `query` selects.
pub(crate) async fn costs(db: Db<'_>, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
    let since = query
        .since
        .as_deref()
        .map(|s| cost_bound("since", s))
        .transpose()?;
    let until = query
        .until
        .as_deref()
        .map(|u| cost_bound("until", u))
        .transpose()?;
    let thread = query.thread.as_ref().map(|t| t.as_str().to_owned());
    let mut groups: BTreeMap<CostKey, CostRow> = BTreeMap::new();

    let (client, agent) = (
        enc_opt(query.client.as_deref()),
        enc_opt(query.agent.as_deref()),
    );
    let params: [&(dyn ToSql + Sync); 5] = [&client, &agent, &thread, &since, &until];
    let rows = db
        .query(
            "SELECT t.agent, t.client_id, e.payload, e.ts, e.thread_id, e.turn_id, e.seq
             FROM events e JOIN threads t ON t.id = e.thread_id
             WHERE e.kind = 'cost'
               AND ($1::TEXT IS NULL OR t.client_id = $1)
               AND ($2::TEXT IS NULL OR t.agent = $2)
               AND ($3::TEXT IS NULL OR e.thread_id = $3)
               AND ($4::TEXT IS NULL OR e.ts >= $4)
               AND ($5::TEXT IS NULL OR e.ts < $5)",
            &params,
        )
        .await
        .map_err(pg)?;
    for row in &rows {
        let (thread, turn) = (text(row, 4)?, text(row, 5)?);
        let seq: i64 = row.try_get(6).map_err(pg)?;
        let payload: serde_json::Value = serde_json::from_str(&text(row, 2)?)
            .map_err(|e| StoreError::Backend(format!("damaged cost event {thread}/{seq}: {e}")))?;
        let field = |name: &str| match payload.get(name) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let number = |name: &str| -> Result<u64, StoreError> {
            payload
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| {
                    StoreError::Backend(format!(
                        "damaged cost event {thread}/{seq}: `{name}` is not a whole number \
                     of at most 20 digits"
                    ))
                })
        };
        let key: CostKey = (
            text(row, 0)?,
            text(row, 1)?,
            field("provider"),
            field("model"),
            day(&text(row, 3)?),
            query.by_turn.then(|| thread.clone()),
            query.by_turn.then(|| turn.clone()),
        );
        add_cost_call(
            &mut groups,
            key,
            number("input_tokens")?,
            number("output_tokens")?,
            number("usd_micros")?,
        );
    }
    // Model calls have no thread: a thread filter leaves them out.
    if query.thread.is_none() {
        let params: [&(dyn ToSql + Sync); 4] = [&client, &agent, &since, &until];
        let rows = db
            .query(
                "SELECT agent, client_id, provider, model, ts,
                        input_tokens, output_tokens, usd_micros
                 FROM (SELECT agent, client_id, provider, model, ts,
                              input_tokens, output_tokens, usd_micros
                       FROM model_calls
                       UNION ALL
                       SELECT agent, client_id, 'mcp', tool, ts, 0, 0, usd_micros
                       FROM mcp_calls WHERE usd_micros > 0) AS calls
                 WHERE ($1::TEXT IS NULL OR client_id = $1)
                   AND ($2::TEXT IS NULL OR agent = $2)
                   AND ($3::TEXT IS NULL OR ts >= $3)
                   AND ($4::TEXT IS NULL OR ts < $4)",
                &params,
            )
            .await
            .map_err(pg)?;
        for row in &rows {
            // The table's CHECKs keep these non-negative.
            let number = |i: usize| -> Result<u64, StoreError> {
                let n: i64 = row.try_get(i).map_err(pg)?;
                Ok(u64::try_from(n).unwrap_or(0))
            };
            let key: CostKey = (
                text(row, 0)?,
                text(row, 1)?,
                text(row, 2)?,
                text(row, 3)?,
                day(&text(row, 4)?),
                None,
                None,
            );
            add_cost_call(&mut groups, key, number(5)?, number(6)?, number(7)?);
        }
    }
    cost_rows(groups)
}

/// Inserts one model call, stamped with the store's clock and linked into the
/// `model_calls` chain (in the caller's transaction). `Conflict` for a known id. Counts
/// above `i64::MAX` are stored as `i64::MAX`, as on SQLite.
pub(crate) async fn record_model_call(db: Db<'_>, call: ModelCallRecord) -> Result<(), StoreError> {
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let ts = stored_now();
    let (input, output, usd) = (
        clamp(call.input_tokens),
        clamp(call.output_tokens),
        clamp(call.usd_micros),
    );
    let (client, agent, provider, model) = (
        enc(&call.client),
        enc(&call.agent),
        enc(&call.provider),
        enc(&call.model),
    );
    let numbers = [input.to_string(), output.to_string(), usd.to_string()];
    let link = record_chains::next(
        db,
        RecordChain::ModelCalls,
        &[
            Some(call.id.as_str()),
            Some(&ts),
            Some(&client),
            Some(&agent),
            Some(&provider),
            Some(&model),
            Some(&numbers[0]),
            Some(&numbers[1]),
            Some(&numbers[2]),
        ],
    )
    .await?;
    let inserted = db
        .execute(
            "INSERT INTO model_calls (id, ts, client_id, agent, provider, model,
                                      input_tokens, output_tokens, usd_micros, chain_pos, hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &call.id.as_str(),
                &ts,
                &client,
                &agent,
                &provider,
                &model,
                &input,
                &output,
                &usd,
                &link.pos,
                &link.hash,
            ],
        )
        .await;
    match inserted {
        Ok(_) => record_chains::advance(db, RecordChain::ModelCalls, &link).await,
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "model call {} is already recorded",
            call.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

/// The UTC day of a stored timestamp (`YYYY-MM-DD`, its first ten bytes).
fn day(ts: &str) -> String {
    ts.get(..10).unwrap_or(ts).to_owned()
}
