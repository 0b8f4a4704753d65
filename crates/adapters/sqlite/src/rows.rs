//! The row helpers every writing module shares, so none of them imports another for
//! them: the backend error, SQLite's constraint codes, the running-turn check and the
//! one event append (gapless `seq`, and the audit hash linking it to the previous event).

use agentplane_core::audit::{EventText, GENESIS, event_hash, from_hex, to_hex};
use agentplane_core::{Event, EventPayload, ThreadId, TurnId};
use agentplane_engine::ports::StoreError;
use agentplane_engine::ports::records::stored_now;
use rusqlite::{Connection, OptionalExtension, params};

/// Any SQLite failure without a more specific meaning.
pub(crate) fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

/// SQLite's extended code for a violated `PRIMARY KEY`.
pub(crate) const PRIMARY_KEY_VIOLATION: i32 = rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY;
/// SQLite's extended code for a violated `UNIQUE` index.
pub(crate) const UNIQUE_VIOLATION: i32 = rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE;

/// `NotFound` unless `turn` is a turn of `thread` and the thread is not deleted;
/// `Conflict` unless the turn is running.
pub(crate) fn require_running(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
) -> Result<(), StoreError> {
    let found: Option<(String, String, bool)> = c
        .prepare_cached(
            "SELECT turns.thread_id, turns.status, threads.deleted_at IS NOT NULL
             FROM turns JOIN threads ON threads.id = turns.thread_id WHERE turns.id = ?1",
        )
        .and_then(|mut select| {
            select
                .query_row([turn.as_str()], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
        })
        .map_err(backend)?;
    match found {
        None => Err(StoreError::NotFound(format!("turn {turn}"))),
        Some((owner, _, _)) if owner != thread.as_str() => Err(StoreError::NotFound(format!(
            "turn {turn} in thread {thread}"
        ))),
        Some((_, _, true)) => Err(StoreError::NotFound(format!("thread {thread}"))),
        Some((_, status, _)) if status != "running" => Err(StoreError::Conflict(format!(
            "turn {turn} has already ended ({status})"
        ))),
        Some(_) => Ok(()),
    }
}

/// Appends one event with the thread's next `seq` and its audit hash (ADR 0048). The
/// counter and the row change in the same transaction, so a rolled-back append gives
/// its `seq` back: no gap. The previous event's hash is one primary-key read; the
/// single writer makes reading it and appending one step.
pub(crate) fn insert_event(
    c: &Connection,
    thread: ThreadId,
    turn: TurnId,
    payload: EventPayload,
) -> Result<Event, StoreError> {
    let raw_seq = take_seqs(c, &thread, 1)?;
    let prev = previous_hash(c, &thread, raw_seq)?;
    let (event, _) = insert_linked(c, thread, turn, raw_seq, &prev, payload)?;
    Ok(event)
}

/// [`insert_event`] for several events of one turn: their seqs taken in one update,
/// the previous hash read once, each event linked to the one before it in memory.
pub(crate) fn insert_events(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
    payloads: Vec<EventPayload>,
) -> Result<Vec<Event>, StoreError> {
    if payloads.is_empty() {
        return Ok(Vec::new());
    }
    let count = i64::try_from(payloads.len())
        .map_err(|_| StoreError::Backend("too many events in one write".into()))?;
    let first = take_seqs(c, thread, count)?;
    let mut prev = previous_hash(c, thread, first)?;
    let mut events = Vec::with_capacity(payloads.len());
    for (raw_seq, payload) in (first..).zip(payloads) {
        let (event, hash) =
            insert_linked(c, thread.clone(), turn.clone(), raw_seq, &prev, payload)?;
        prev = hash;
        events.push(event);
    }
    Ok(events)
}

/// Takes the thread's next `count` seqs and returns the first.
fn take_seqs(c: &Connection, thread: &ThreadId, count: i64) -> Result<i64, StoreError> {
    c.prepare_cached(
        "UPDATE threads SET next_seq = next_seq + ?2 WHERE id = ?1 RETURNING next_seq - ?2",
    )
    .and_then(|mut next| next.query_row(params![thread.as_str(), count], |row| row.get(0)))
    .map_err(backend)
}

/// Inserts the event `raw_seq` linked to `prev`; returns it and its hash.
fn insert_linked(
    c: &Connection,
    thread: ThreadId,
    turn: TurnId,
    raw_seq: i64,
    prev: &[u8; 32],
    payload: EventPayload,
) -> Result<(Event, [u8; 32]), StoreError> {
    let seq = u64::try_from(raw_seq).map_err(|_| {
        StoreError::Backend(format!("thread {thread} has a negative seq {raw_seq}"))
    })?;
    let ts = stored_now();
    let json = serde_json::to_string(&payload).map_err(|e| {
        StoreError::Backend(format!(
            "event {seq} of thread {thread} cannot be encoded: {e}"
        ))
    })?;
    let kind = payload.kind();
    let hash = event_hash(
        prev,
        EventText {
            thread_id: thread.as_str(),
            seq,
            turn_id: turn.as_str(),
            kind,
            ts: &ts,
            payload: &json,
        },
    );
    c.prepare_cached(
        "INSERT INTO events (thread_id, seq, turn_id, kind, ts, payload, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut insert| {
        insert.execute(params![
            thread.as_str(),
            raw_seq,
            turn.as_str(),
            kind,
            ts,
            json,
            to_hex(&hash),
        ])
    })
    .map_err(backend)?;
    let event = Event {
        thread_id: thread,
        turn_id: turn,
        seq,
        ts,
        payload,
    };
    Ok((event, hash))
}

/// The hash the event `seq` of `thread` links to: the previous event's, or the genesis
/// value for the first event of a chain (the thread's first, or its first since the
/// chain existed). A previous hash that is missing or damaged also gives the genesis
/// value: the append goes on, and `audit verify` names that event.
fn previous_hash(c: &Connection, thread: &ThreadId, seq: i64) -> Result<[u8; 32], StoreError> {
    if seq <= 1 {
        return Ok(GENESIS);
    }
    let stored: Option<Option<String>> = c
        .prepare_cached("SELECT hash FROM events WHERE thread_id = ?1 AND seq = ?2")
        .and_then(|mut select| {
            select
                .query_row(params![thread.as_str(), seq - 1], |row| row.get(0))
                .optional()
        })
        .map_err(backend)?;
    Ok(stored
        .flatten()
        .as_deref()
        .and_then(from_hex)
        .unwrap_or(GENESIS))
}
