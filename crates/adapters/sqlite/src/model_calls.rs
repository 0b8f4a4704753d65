//! Model calls made outside any turn (the OpenAI-compatible gateway's): the one write
//! that records them, run by the writer thread. They are summed with the turns' `cost`
//! events by the cost report's read (`costs.rs`).
//!
//! Counts and amounts are `u64` in the domain but SQLite integers are `i64`: a value
//! above `i64::MAX` (9.2 × 10^18 tokens or micro-dollars) is stored as `i64::MAX`.
//! Nothing here decides what a call cost; the engine priced it.

use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{ModelCallRecord, StoreError};
use rusqlite::{Connection, params};

use agentplane_core::audit::RecordChain;

use crate::record_chains;
use crate::rows::{self, backend};

/// Inserts one call, stamped with the store's clock and linked into the `model_calls`
/// chain (in the writer's savepoint, so the link is undone with a failed insert).
/// `Conflict` for a known id.
pub(crate) fn record(c: &Connection, call: ModelCallRecord) -> Result<(), StoreError> {
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let ts = stored_now();
    let (input, output, usd) = (
        clamp(call.input_tokens),
        clamp(call.output_tokens),
        clamp(call.usd_micros),
    );
    let numbers = [input.to_string(), output.to_string(), usd.to_string()];
    let link = record_chains::next(
        c,
        RecordChain::ModelCalls,
        &[
            Some(call.id.as_str()),
            Some(&ts),
            Some(&call.client),
            Some(&call.agent),
            Some(&call.provider),
            Some(&call.model),
            Some(&numbers[0]),
            Some(&numbers[1]),
            Some(&numbers[2]),
        ],
    )?;
    let inserted = c
        .prepare_cached(
            "INSERT INTO model_calls (id, ts, client_id, agent, provider, model,
                                      input_tokens, output_tokens, usd_micros, chain_pos, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                call.id.as_str(),
                ts,
                call.client,
                call.agent,
                call.provider,
                call.model,
                input,
                output,
                usd,
                link.pos,
                link.hash,
            ])
        });
    match inserted {
        Ok(_) => record_chains::advance(c, RecordChain::ModelCalls, &link),
        Err(e) if e.sqlite_extended_error_code() == Some(rows::PRIMARY_KEY_VIOLATION) => Err(
            StoreError::Conflict(format!("model call {} is already recorded", call.id)),
        ),
        Err(e) => Err(backend(e)),
    }
}
