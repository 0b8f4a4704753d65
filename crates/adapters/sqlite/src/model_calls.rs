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

use crate::rows::{self, backend};

/// Inserts one call, stamped with the store's clock. `Conflict` for a known id.
pub(crate) fn record(c: &Connection, call: ModelCallRecord) -> Result<(), StoreError> {
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let inserted = c
        .prepare_cached(
            "INSERT INTO model_calls (id, ts, client_id, agent, provider, model,
                                      input_tokens, output_tokens, usd_micros)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                call.id.as_str(),
                stored_now(),
                call.client,
                call.agent,
                call.provider,
                call.model,
                clamp(call.input_tokens),
                clamp(call.output_tokens),
                clamp(call.usd_micros),
            ])
        });
    match inserted {
        Ok(_) => Ok(()),
        Err(e) if e.sqlite_extended_error_code() == Some(rows::PRIMARY_KEY_VIOLATION) => Err(
            StoreError::Conflict(format!("model call {} is already recorded", call.id)),
        ),
        Err(e) => Err(backend(e)),
    }
}
