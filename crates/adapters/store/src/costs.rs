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

use agentplane_core::{ThreadId, TurnId};
use agentplane_engine::ports::{CostQuery, CostRow, StoreError};
use rusqlite::Connection;
use rusqlite::types::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::backend;

/// The grouping key of a row, in the order rows are returned.
type Key = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
);

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
        filter(&mut sql, "e.ts >=", bound("since", since)?);
    }
    if let Some(until) = &query.until {
        filter(&mut sql, "e.ts <", bound("until", until)?);
    }

    let mut groups: BTreeMap<Key, CostRow> = BTreeMap::new();
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
        let key: Key = (
            text(0)?,
            text(1)?,
            text(2)?,
            text(3)?,
            text(4)?,
            query.by_turn.then(|| thread.clone()),
            query.by_turn.then(|| turn.clone()),
        );
        add_call(&mut groups, key, input_tokens, output_tokens, usd_micros);
    }
    drop(rows);
    if query.thread.is_none() {
        model_calls(c, query, &mut groups)?;
    }
    groups
        .into_iter()
        .map(|(key, mut row)| {
            if let (Some(thread), Some(turn)) = (key.5, key.6) {
                row.thread = Some(ThreadId::parse(&thread).map_err(StoreError::Backend)?);
                row.turn = Some(TurnId::parse(&turn).map_err(StoreError::Backend)?);
            }
            Ok(row)
        })
        .collect()
}

/// Counts one call into its group.
fn add_call(
    groups: &mut BTreeMap<Key, CostRow>,
    key: Key,
    input_tokens: u64,
    output_tokens: u64,
    usd_micros: u64,
) {
    let group = groups.entry(key).or_insert_with_key(|key| CostRow {
        agent: key.0.clone(),
        client: key.1.clone(),
        provider: key.2.clone(),
        model: key.3.clone(),
        day: key.4.clone(),
        ..CostRow::default()
    });
    group.calls = group.calls.saturating_add(1);
    group.input_tokens = group.input_tokens.saturating_add(input_tokens);
    group.output_tokens = group.output_tokens.saturating_add(output_tokens);
    group.usd_micros = group.usd_micros.saturating_add(usd_micros);
}

/// Adds the model calls made outside turns (the gateway's, `model_calls.rs`) that the
/// query selects. They have no thread or turn, so a thread filter excludes them.
fn model_calls(
    c: &Connection,
    query: &CostQuery,
    groups: &mut BTreeMap<Key, CostRow>,
) -> Result<(), StoreError> {
    let mut sql = String::from(
        "SELECT agent, client_id, provider, model, substr(ts, 1, 10),
                input_tokens, output_tokens, usd_micros
         FROM model_calls WHERE 1 = 1",
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
        filter(&mut sql, "ts >=", bound("since", since)?);
    }
    if let Some(until) = &query.until {
        filter(&mut sql, "ts <", bound("until", until)?);
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
        let key: Key = (text(0)?, text(1)?, text(2)?, text(3)?, text(4)?, None, None);
        add_call(groups, key, number(5)?, number(6)?, number(7)?);
    }
    Ok(())
}

/// An RFC 3339 bound in the form `ts` is stored in (UTC, milliseconds), so that text
/// order is time order. Rounded up to the millisecond: every stored `ts` is a whole
/// millisecond, so `ts >= since` and `ts < until` keep their meaning.
fn bound(name: &str, value: &str) -> Result<String, StoreError> {
    let invalid = || StoreError::Backend(format!("costs: `{name}` is not an RFC 3339 time"));
    let t = OffsetDateTime::parse(value, &Rfc3339)
        .map_err(|_| invalid())?
        .to_offset(time::UtcOffset::UTC);
    let sub_milli = t.nanosecond() % 1_000_000;
    let t = if sub_milli == 0 {
        t
    } else {
        t.checked_add(time::Duration::nanoseconds(i64::from(
            1_000_000 - sub_milli,
        )))
        .ok_or_else(invalid)?
    };
    if !(0..=9999).contains(&t.year()) {
        return Err(invalid());
    }
    Ok(crate::timestamp::format_rfc3339_millis(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_become_stored_utc_milliseconds_rounded_up() {
        assert_eq!(
            bound("since", "2026-03-01T10:00:00Z").unwrap(),
            "2026-03-01T10:00:00.000Z"
        );
        assert_eq!(
            bound("since", "2026-03-01T10:00:00+02:00").unwrap(),
            "2026-03-01T08:00:00.000Z"
        );
        assert_eq!(
            bound("since", "2026-03-01T10:00:00.0001Z").unwrap(),
            "2026-03-01T10:00:00.001Z"
        );
        assert_eq!(
            bound("until", "2026-12-31T23:59:59.9999-00:30").unwrap(),
            "2027-01-01T00:30:00.000Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-03-01",
            "2026-03-01T10:00:00",
            "2026-13-01T00:00:00Z",
        ] {
            assert!(bound("since", bad).is_err(), "{bad}");
        }
    }
}
