//! Reads: a small set of read-only connections, and every SELECT the store answers
//! with. WAL gives each query a consistent snapshot while the writer commits, so reads
//! never wait for writes. Nothing here writes.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError, TryLockError};

use agentplane_core::{
    Event, EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, TurnId,
};
use agentplane_engine::ports::{
    PermissionRecord, PermissionStatus, StoreError, ThreadRecord, TurnRecord, TurnStatus,
};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::connection;
use crate::rows::backend;

/// Read-only connections, each used by one blocking task at a time.
pub(crate) struct Readers {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
}

impl Readers {
    /// Opens `count` (at least one) read-only connections to the database at `path`.
    pub(crate) fn open(path: &Path, count: usize) -> Result<Self, StoreError> {
        let conns = (0..count.max(1))
            .map(|_| connection::open_reader(path).map(Mutex::new))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            conns,
            next: AtomicUsize::new(0),
        })
    }

    /// No connections: what a dropped store leaves behind.
    pub(crate) fn empty() -> Self {
        Self {
            conns: Vec::new(),
            next: AtomicUsize::new(0),
        }
    }

    /// Runs `read` on a connection that is free right now, or gives `read` back when
    /// every connection is busy. Does not wait for a connection; the read itself blocks.
    pub(crate) fn try_with<T, F>(&self, read: F) -> Result<Result<T, StoreError>, F>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError>,
    {
        for conn in &self.conns {
            match conn.try_lock() {
                Ok(conn) => return Ok(read(&conn)),
                Err(TryLockError::Poisoned(poisoned)) => return Ok(read(&poisoned.into_inner())),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        Err(read)
    }

    /// Runs `read` on a free connection, or waits for one. Blocks: call it from
    /// `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        for conn in &self.conns {
            match conn.try_lock() {
                Ok(conn) => return read(&conn),
                // A panic during an earlier read left no half-done state behind: reads
                // change nothing.
                Err(TryLockError::Poisoned(poisoned)) => return read(&poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        if self.conns.is_empty() {
            return Err(StoreError::Backend("the event store is closed".into()));
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        let conn = self.conns[i].lock().unwrap_or_else(PoisonError::into_inner);
        read(&conn)
    }
}

pub(crate) const THREAD_COLUMNS: &str =
    "id, client_id, agent, cwd, title, created_at, summary, agent_version, shadow_of";

/// The thread `id` unless it is unknown or deleted.
pub(crate) fn thread(c: &Connection, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {THREAD_COLUMNS} FROM threads WHERE id = ?1 AND deleted_at IS NULL"
    ))
    .and_then(|mut select| {
        select
            .query_row([id.as_str()], RawThread::from_row)
            .optional()
    })
    .map_err(backend)?
    .map(RawThread::decode)
    .transpose()
}

/// The live threads of `client_id`, newest first. Newest means created last: the rowid
/// is the order of insertion, which a clock stepping back cannot disturb.
pub(crate) fn threads_of_client(
    c: &Connection,
    client_id: &str,
) -> Result<Vec<ThreadRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {THREAD_COLUMNS} FROM threads WHERE client_id = ?1 AND deleted_at IS NULL
         AND shadow_of IS NULL ORDER BY rowid DESC"
    ))
    .and_then(|mut select| {
        select
            .query_map([client_id], RawThread::from_row)?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .into_iter()
    .map(RawThread::decode)
    .collect()
}

/// Every client's live threads with a turn begun at or after `since` (stored form;
/// all when `None`), created first first.
pub(crate) fn threads_active_since(
    c: &Connection,
    since: Option<&str>,
) -> Result<Vec<ThreadRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {THREAD_COLUMNS} FROM threads WHERE deleted_at IS NULL AND shadow_of IS NULL
         AND (?1 IS NULL OR EXISTS (SELECT 1 FROM turns
              WHERE turns.thread_id = threads.id AND turns.created_at >= ?1))
         ORDER BY rowid"
    ))
    .and_then(|mut select| {
        select
            .query_map([since], RawThread::from_row)?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .into_iter()
    .map(RawThread::decode)
    .collect()
}

const TURN_COLUMNS: &str =
    "id, thread_id, input, status, created_at, ended_at, internal, result, agent_version";

pub(crate) fn turn(c: &Connection, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
    c.prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ?1"))
        .and_then(|mut select| {
            select
                .query_row([id.as_str()], RawTurn::from_row)
                .optional()
        })
        .map_err(backend)?
        .map(RawTurn::decode)
        .transpose()
}

/// The turns of `thread` in the order they began; none for an unknown thread.
pub(crate) fn turns_of_thread(
    c: &Connection,
    thread: &ThreadId,
) -> Result<Vec<TurnRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE thread_id = ?1 ORDER BY rowid"
    ))
    .and_then(|mut select| {
        select
            .query_map([thread.as_str()], RawTurn::from_row)?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .into_iter()
    .map(RawTurn::decode)
    .collect()
}

/// See `EventStore::answered_turns`: newest first by the index on the thread, then
/// turned around.
pub(crate) fn answered_turns(
    c: &Connection,
    thread: &ThreadId,
    limit: usize,
) -> Result<Vec<TurnRecord>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut turns = c
        .prepare_cached(&format!(
            "SELECT {TURN_COLUMNS} FROM turns
             WHERE thread_id = ?1 AND internal = 0 AND status IN ('finished', 'text_answer')
             ORDER BY rowid DESC LIMIT ?2"
        ))
        .and_then(|mut select| {
            select
                .query_map(rusqlite::params![thread.as_str(), limit], RawTurn::from_row)?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(backend)?
        .into_iter()
        .map(RawTurn::decode)
        .collect::<Result<Vec<_>, _>>()?;
    turns.reverse();
    Ok(turns)
}

const EVENT_COLUMNS: &str = "thread_id, seq, turn_id, ts, payload";

pub(crate) fn turn_events(c: &Connection, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE turn_id = ?1 ORDER BY seq"
    ))
    .and_then(|mut select| {
        select
            .query_map([turn.as_str()], RawEvent::from_row)?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .into_iter()
    .map(RawEvent::decode)
    .collect()
}

pub(crate) fn thread_events(
    c: &Connection,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    // Seqs are positive i64 in the table: nothing lies beyond i64::MAX.
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    c.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE thread_id = ?1 AND seq > ?2
         ORDER BY seq LIMIT ?3"
    ))
    .and_then(|mut select| {
        select
            .query_map(
                rusqlite::params![thread.as_str(), after, limit],
                RawEvent::from_row,
            )?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .into_iter()
    .map(RawEvent::decode)
    .collect()
}

const PERMISSION_COLUMNS: &str =
    "id, thread_id, turn_id, call_id, tool, arguments, options, status, reason, created_at, policy";

pub(crate) fn permission(
    c: &Connection,
    id: &PermissionId,
) -> Result<Option<PermissionRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {PERMISSION_COLUMNS} FROM permissions WHERE id = ?1"
    ))
    .and_then(|mut select| {
        select
            .query_row([id.as_str()], RawPermission::from_row)
            .optional()
    })
    .map_err(backend)?
    .map(RawPermission::decode)
    .transpose()
}

/// The ids of the permissions of `turn` still waiting for an answer, oldest first.
pub(crate) fn pending_permissions_of_turn(
    c: &Connection,
    turn: &TurnId,
) -> Result<Vec<PermissionId>, StoreError> {
    c.prepare_cached(
        "SELECT id FROM permissions WHERE turn_id = ?1 AND status = 'pending' ORDER BY rowid",
    )
    .and_then(|mut select| {
        select
            .query_map([turn.as_str()], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(backend)?
    .iter()
    .map(|id| PermissionId::parse(id).map_err(damaged("permission id")))
    .collect()
}

/// A row as stored; `decode` checks it, so a damaged row is an error that names it
/// rather than a panic or a silently skipped record.
pub(crate) struct RawThread {
    id: String,
    client_id: String,
    agent: String,
    cwd: String,
    title: Option<String>,
    created_at: String,
    summary: Option<String>,
    agent_version: Option<String>,
    shadow_of: Option<String>,
}

impl RawThread {
    pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            client_id: row.get(1)?,
            agent: row.get(2)?,
            cwd: row.get(3)?,
            title: row.get(4)?,
            created_at: row.get(5)?,
            summary: row.get(6)?,
            agent_version: row.get(7)?,
            shadow_of: row.get(8)?,
        })
    }

    pub(crate) fn decode(self) -> Result<ThreadRecord, StoreError> {
        Ok(ThreadRecord {
            id: ThreadId::parse(&self.id).map_err(damaged("thread id"))?,
            client_id: self.client_id,
            agent: self.agent,
            cwd: self.cwd,
            title: self.title,
            created_at: self.created_at,
            summary: self.summary,
            agent_version: self.agent_version,
            shadow_of: self
                .shadow_of
                .as_deref()
                .map(ThreadId::parse)
                .transpose()
                .map_err(damaged("thread id"))?,
        })
    }
}

struct RawTurn {
    id: String,
    thread_id: String,
    input: String,
    status: String,
    created_at: String,
    ended_at: Option<String>,
    internal: bool,
    result: Option<String>,
    agent_version: Option<String>,
}

impl RawTurn {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            thread_id: row.get(1)?,
            input: row.get(2)?,
            status: row.get(3)?,
            created_at: row.get(4)?,
            ended_at: row.get(5)?,
            internal: row.get(6)?,
            result: row.get(7)?,
            agent_version: row.get(8)?,
        })
    }

    fn decode(self) -> Result<TurnRecord, StoreError> {
        let status = if self.status == "running" {
            TurnStatus::Running
        } else {
            // The column holds `StopReason::as_str`, which is its serde name.
            let reason: StopReason = serde_json::from_value(serde_json::Value::String(
                self.status.clone(),
            ))
            .map_err(|_| {
                StoreError::Backend(format!(
                    "turn {} has an unknown status {:?}",
                    self.id, self.status
                ))
            })?;
            TurnStatus::Ended(reason)
        };
        let result = self
            .result
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| {
                StoreError::Backend(format!("turn {} has an unreadable result: {e}", self.id))
            })?;
        Ok(TurnRecord {
            id: TurnId::parse(&self.id).map_err(damaged("turn id"))?,
            thread_id: ThreadId::parse(&self.thread_id).map_err(damaged("thread id"))?,
            input: self.input,
            status,
            created_at: self.created_at,
            ended_at: self.ended_at,
            internal: self.internal,
            result,
            agent_version: self.agent_version,
        })
    }
}

struct RawEvent {
    thread_id: String,
    seq: i64,
    turn_id: String,
    ts: String,
    payload: String,
}

impl RawEvent {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            thread_id: row.get(0)?,
            seq: row.get(1)?,
            turn_id: row.get(2)?,
            ts: row.get(3)?,
            payload: row.get(4)?,
        })
    }

    fn decode(self) -> Result<Event, StoreError> {
        let unreadable = |what: String| {
            StoreError::Backend(format!(
                "event {} of thread {} is unreadable: {what}",
                self.seq, self.thread_id
            ))
        };
        let payload: EventPayload =
            serde_json::from_str(&self.payload).map_err(|e| unreadable(format!("payload: {e}")))?;
        let seq = u64::try_from(self.seq).map_err(|_| unreadable("negative seq".into()))?;
        Ok(Event {
            thread_id: ThreadId::parse(&self.thread_id).map_err(&unreadable)?,
            turn_id: TurnId::parse(&self.turn_id).map_err(&unreadable)?,
            seq,
            ts: self.ts,
            payload,
        })
    }
}

struct RawPermission {
    id: String,
    thread_id: String,
    turn_id: String,
    call_id: String,
    tool: String,
    arguments: String,
    options: String,
    status: String,
    reason: Option<String>,
    created_at: String,
    policy: Option<String>,
}

impl RawPermission {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            thread_id: row.get(1)?,
            turn_id: row.get(2)?,
            call_id: row.get(3)?,
            tool: row.get(4)?,
            arguments: row.get(5)?,
            options: row.get(6)?,
            status: row.get(7)?,
            reason: row.get(8)?,
            created_at: row.get(9)?,
            policy: row.get(10)?,
        })
    }

    fn decode(self) -> Result<PermissionRecord, StoreError> {
        let unreadable = |what: String| {
            StoreError::Backend(format!("permission {} is unreadable: {what}", self.id))
        };
        let status = match self.status.as_str() {
            "pending" => PermissionStatus::Pending,
            "approved" => PermissionStatus::Resolved(PermissionDecision::Approved),
            "declined" => PermissionStatus::Resolved(PermissionDecision::Declined),
            other => return Err(unreadable(format!("unknown status {other:?}"))),
        };
        Ok(PermissionRecord {
            id: PermissionId::parse(&self.id).map_err(&unreadable)?,
            thread_id: ThreadId::parse(&self.thread_id).map_err(&unreadable)?,
            turn_id: TurnId::parse(&self.turn_id).map_err(&unreadable)?,
            arguments: serde_json::from_str(&self.arguments)
                .map_err(|e| unreadable(format!("arguments: {e}")))?,
            options: serde_json::from_str(&self.options)
                .map_err(|e| unreadable(format!("options: {e}")))?,
            policy: self
                .policy
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| unreadable(format!("policy: {e}")))?,
            call_id: self.call_id,
            tool: self.tool,
            status,
            reason: self.reason,
            created_at: self.created_at,
        })
    }
}

fn damaged(what: &'static str) -> impl Fn(String) -> StoreError {
    move |e| StoreError::Backend(format!("stored {what} is damaged: {e}"))
}
