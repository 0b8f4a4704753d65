//! The row helpers every module of the store shares, so none imports another (or the
//! crate root) for them: errors as the store reports them, text columns (NUL-safe), the
//! running-turn check and the one event append (gapless `seq`, and the audit hash
//! linking it to the previous event).

use agentplane_core::audit::{EventText, GENESIS, event_hash, from_hex, to_hex};
use agentplane_core::{Event, EventPayload, ThreadId, TurnId};
use agentplane_engine::ports::records::stored_now;
use tokio_postgres::Row;

use crate::db::Db;
use crate::nul::dec;

use agentplane_engine::ports::StoreError;
use tokio_postgres::error::SqlState;

/// Any PostgreSQL failure without a more specific meaning. Free text is escaped so that
/// NUL characters are stored (`nul.rs`); should one still reach a `TEXT` column, the
/// write is refused as a `Conflict` that says so rather than as an internal failure:
/// the input, not the store, is at fault.
pub(crate) fn pg(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
            || *code == SqlState::UNTRANSLATABLE_CHARACTER
        {
            return StoreError::Conflict(format!(
                "text containing a NUL character cannot be stored ({})",
                db.message()
            ));
        }
        return StoreError::Backend(format!("postgres: {}", db.message()));
    }
    StoreError::Backend(format!("postgres: {e}"))
}

/// The name of the unique index or key `e` violated, if that is what failed.
pub(crate) fn unique_violation(e: &tokio_postgres::Error) -> Option<&str> {
    let db = e.as_db_error()?;
    (*db.code() == SqlState::UNIQUE_VIOLATION).then(|| db.constraint().unwrap_or(""))
}

/// A stored value that does not decode.
pub(crate) fn damaged(what: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("stored {what} is damaged"))
}

/// Locks the turn's row until the transaction ends. `NotFound` unless `turn` is a turn
/// of `thread` and the thread is not deleted; `Conflict` unless the turn is running.
pub(crate) async fn require_running(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
) -> Result<(), StoreError> {
    let found = db
        .query_opt(
            "SELECT turns.thread_id, turns.status, threads.deleted_at IS NOT NULL
             FROM turns JOIN threads ON threads.id = turns.thread_id WHERE turns.id = $1
             FOR UPDATE OF turns",
            &[&turn.as_str()],
        )
        .await
        .map_err(pg)?;
    let Some(row) = found else {
        return Err(StoreError::NotFound(format!("turn {turn}")));
    };
    let owner = text(&row, 0)?;
    let status = text(&row, 1)?;
    let deleted: bool = row.try_get(2).map_err(pg)?;
    if owner != thread.as_str() {
        return Err(StoreError::NotFound(format!(
            "turn {turn} in thread {thread}"
        )));
    }
    if deleted {
        return Err(StoreError::NotFound(format!("thread {thread}")));
    }
    if status != "running" {
        return Err(StoreError::Conflict(format!(
            "turn {turn} has already ended ({status})"
        )));
    }
    Ok(())
}

/// Appends one event with the thread's next `seq` and its audit hash (ADR 0048). The
/// counter and the row change in the same transaction, whose lock on the thread row
/// makes other appenders wait: a rolled-back append gives its `seq` back, and no two
/// get the same one.
///
/// The previous hash is the thread row's `last_hash`, returned by the `UPDATE` that
/// takes the lock: after waiting for another appender, PostgreSQL returns the row as
/// that appender committed it, so the link is the one just written even on another
/// replica. (A separate read in the same statement would see the statement's older
/// snapshot; the row itself is what the lock serializes.)
pub(crate) async fn insert_event(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    payload: EventPayload,
) -> Result<Event, StoreError> {
    let json = serde_json::to_string(&payload).map_err(|e| {
        StoreError::Backend(format!(
            "an event of thread {thread} cannot be encoded: {e}"
        ))
    })?;
    let ts = stored_now();
    let row = db
        .query_opt(
            "UPDATE threads SET next_seq = next_seq + 1 WHERE id = $1
             RETURNING next_seq - 1, last_hash",
            &[&thread.as_str()],
        )
        .await
        .map_err(pg)?
        .ok_or_else(|| StoreError::NotFound(format!("thread {thread}")))?;
    let raw_seq: i64 = row.try_get(0).map_err(pg)?;
    let last_hash: Option<String> = row.try_get(1).map_err(pg)?;
    let seq = u64::try_from(raw_seq)
        .map_err(|_| StoreError::Backend(format!("thread {thread} has a negative seq")))?;
    // A thread's first event, or its first since the chain existed, links to genesis.
    let prev = last_hash.as_deref().and_then(from_hex).unwrap_or(GENESIS);
    let kind = payload.kind();
    let hash = to_hex(&event_hash(
        &prev,
        EventText {
            thread_id: thread.as_str(),
            seq,
            turn_id: turn.as_str(),
            kind,
            ts: &ts,
            payload: &json,
        },
    ));
    db.execute(
        "WITH head AS (UPDATE threads SET last_hash = $7 WHERE id = $1)
         INSERT INTO events (thread_id, seq, turn_id, kind, ts, payload, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &thread.as_str(),
            &raw_seq,
            &turn.as_str(),
            &kind,
            &ts,
            &json,
            &hash,
        ],
    )
    .await
    .map_err(pg)?;
    Ok(Event {
        thread_id: thread.clone(),
        turn_id: turn.clone(),
        seq,
        ts,
        payload,
    })
}

/// Column `i` as text.
pub(crate) fn text(row: &Row, i: usize) -> Result<String, StoreError> {
    row.try_get(i).map(dec).map_err(pg)
}

/// Column `i` as optional text.
pub(crate) fn opt_text(row: &Row, i: usize) -> Result<Option<String>, StoreError> {
    row.try_get::<_, Option<String>>(i)
        .map(|t| t.map(dec))
        .map_err(pg)
}
