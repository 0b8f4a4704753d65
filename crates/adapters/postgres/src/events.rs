//! Threads, turns, the event log and permission requests: the SQL of `EventStore`
//! (approvals, costs and model calls have their own files).
//!
//! Concurrency across replicas rests on row locks taken in one order — the turn row,
//! then the permission or approval row, then the thread row (bumped for the next
//! `seq`) — so two writers never wait on each other in a cycle:
//! - `append` locks the turn (so it sees the turn's latest status and `complete_turn`
//!   cannot slip in between) and then takes the thread's next `seq` with an `UPDATE`
//!   of the thread row, which other appenders to the thread wait for until this
//!   transaction ends: seqs stay gapless, a rolled-back append gives its seq back;
//! - `begin_turn` and `delete_thread` lock the thread row, so a thread is never deleted
//!   under a turn that began meanwhile; `turns_one_running_per_thread` refuses a second
//!   running turn whichever replica begins it.

use agentplane_core::{
    Event, EventPayload, PermissionDecision, PermissionId, ReplicaId, StopReason, ThreadId, TurnId,
};
use agentplane_engine::ports::records;
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    NewPermission, NewThread, PermissionRecord, PermissionStatus, StoreError, ThreadRecord,
    TurnRecord, TurnStatus,
};
use tokio_postgres::Row;

use crate::approvals;
use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::rows::{damaged, insert_event, opt_text, pg, require_running, text, unique_violation};

/// Why interrupting declines the permissions it finds pending (SQLite's words).
const STOPPED_WHILE_PENDING: &str = "agentplane stopped while this permission was pending";

pub(crate) const THREAD_COLUMNS: &str =
    "id, client_id, agent, cwd, title, created_at, summary, agent_version, shadow_of";

const TURN_COLUMNS: &str =
    "id, thread_id, input, status, created_at, ended_at, internal, result, agent_version";

const EVENT_COLUMNS: &str = "thread_id, seq, turn_id, ts, payload";

const PERMISSION_COLUMNS: &str =
    "id, thread_id, turn_id, call_id, tool, arguments, options, status, reason, created_at, policy";

// ----- writes ---------------------------------------------------------------------------

pub(crate) async fn create_thread(
    db: Db<'_>,
    thread: NewThread,
) -> Result<ThreadRecord, StoreError> {
    let created_at = stored_now();
    let inserted = db
        .execute(
            "INSERT INTO threads (id, client_id, agent, cwd, title, created_at, agent_version)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &thread.id.as_str(),
                &enc(&thread.client_id),
                &enc(&thread.agent),
                &enc(&thread.cwd),
                &enc_opt(thread.title.as_deref()),
                &created_at,
                &enc_opt(thread.agent_version.as_deref()),
            ],
        )
        .await;
    match inserted {
        Ok(_) => {
            let created = agentplane_core::audit::ledger::ThreadCreated {
                client_id: thread.client_id.clone(),
                agent: thread.agent.clone(),
                cwd: thread.cwd.clone(),
                created_at: created_at.clone(),
            };
            crate::ledger::append(
                db,
                &agentplane_core::audit::ledger::Entry::ThreadCreated(created),
                thread.id.as_str(),
            )
            .await?;
            Ok(thread.created(created_at))
        }
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "thread {} already exists",
            thread.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

/// Marks `thread` deleted. A running turn would go on writing to a thread nobody can
/// see, so it must end first.
pub(crate) async fn delete_thread(db: Db<'_>, thread: &ThreadId) -> Result<(), StoreError> {
    lock_live_thread(db, thread).await?;
    let running = db
        .query_opt(
            "SELECT 1 FROM turns WHERE thread_id = $1 AND status = 'running'",
            &[&thread.as_str()],
        )
        .await
        .map_err(pg)?
        .is_some();
    if running {
        return Err(StoreError::Conflict(format!(
            "thread {thread} has a running turn; it cannot be deleted until the turn ends"
        )));
    }
    let deleted_at = stored_now();
    let changed = db
        .execute(
            "UPDATE threads SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL",
            &[&thread.as_str(), &deleted_at],
        )
        .await
        .map_err(pg)?;
    if changed == 1 {
        let deleted = agentplane_core::audit::ledger::ThreadDeleted { deleted_at };
        crate::ledger::append(
            db,
            &agentplane_core::audit::ledger::Entry::ThreadDeleted(deleted),
            thread.as_str(),
        )
        .await?;
    }
    Ok(())
}

pub(crate) async fn set_summary(
    db: Db<'_>,
    thread: &ThreadId,
    summary: &str,
) -> Result<(), StoreError> {
    let changed = db
        .execute(
            "UPDATE threads SET summary = $2 WHERE id = $1 AND deleted_at IS NULL",
            &[&thread.as_str(), &enc(summary)],
        )
        .await
        .map_err(pg)?;
    if changed == 0 {
        return Err(StoreError::NotFound(format!("thread {thread}")));
    }
    Ok(())
}

/// Locks the thread's row until the transaction ends; `NotFound` unless it exists and
/// is not deleted.
async fn lock_live_thread(db: Db<'_>, thread: &ThreadId) -> Result<(), StoreError> {
    let live = db
        .query_opt(
            "SELECT 1 FROM threads WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
            &[&thread.as_str()],
        )
        .await
        .map_err(pg)?
        .is_some();
    if live {
        Ok(())
    } else {
        Err(StoreError::NotFound(format!("thread {thread}")))
    }
}

pub(crate) async fn begin_turn(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    input: &str,
    internal: bool,
    replica: &ReplicaId,
) -> Result<TurnRecord, StoreError> {
    lock_live_thread(db, thread).await?;
    let created_at = stored_now();
    // The turn records the version its thread is pinned to (ADR 0016) and the replica
    // that runs it.
    let inserted = db
        .query_opt(
            "INSERT INTO turns (id, thread_id, input, status, created_at, internal,
                                agent_version, replica)
             VALUES ($1, $2, $3, 'running', $4, $5,
                     (SELECT agent_version FROM threads WHERE id = $2), $6)
             RETURNING agent_version",
            &[
                &turn.as_str(),
                &thread.as_str(),
                &enc(input),
                &created_at,
                &internal,
                &replica.as_str(),
            ],
        )
        .await;
    match inserted {
        Ok(row) => {
            let agent_version = match row {
                Some(row) => opt_text(&row, 0)?,
                None => None,
            };
            Ok(TurnRecord {
                id: turn.clone(),
                thread_id: thread.clone(),
                input: input.to_owned(),
                status: TurnStatus::Running,
                created_at,
                ended_at: None,
                internal,
                result: None,
                agent_version,
            })
        }
        Err(e) if unique_violation(&e) == Some("turns_one_running_per_thread") => Err(
            StoreError::Conflict(format!("thread {thread} already has a running turn")),
        ),
        Err(e) if unique_violation(&e).is_some() => {
            Err(StoreError::Conflict(format!("turn {turn} already exists")))
        }
        Err(e) => Err(pg(e)),
    }
}

/// [`begin_turn`] and the turn's first event, in the caller's transaction.
pub(crate) async fn start_turn(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    input: &str,
    internal: bool,
    replica: &ReplicaId,
    started: EventPayload,
) -> Result<(TurnRecord, Event), StoreError> {
    let record = begin_turn(db, thread, turn, input, internal, replica).await?;
    let event = append(db, thread, turn, started).await?;
    Ok((record, event))
}

pub(crate) async fn append(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    payload: EventPayload,
) -> Result<Event, StoreError> {
    records::refuse_turn_completed(turn, std::iter::once(&payload))?;
    require_running(db, thread, turn).await?;
    insert_event(db, thread, turn, payload).await
}

/// Appends `payloads` in order to a running turn, in the caller's transaction: the turn
/// is checked once for all of them.
pub(crate) async fn append_all(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    payloads: Vec<EventPayload>,
) -> Result<Vec<Event>, StoreError> {
    records::refuse_turn_completed(turn, payloads.iter())?;
    require_running(db, thread, turn).await?;
    let mut events = Vec::with_capacity(payloads.len());
    for payload in payloads {
        events.push(insert_event(db, thread, turn, payload).await?);
    }
    Ok(events)
}

/// [`append_all`] of `before`, then the turn's end, in the caller's transaction.
pub(crate) async fn complete_turn_after(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    before: Vec<EventPayload>,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<(Vec<Event>, Event), StoreError> {
    let appended = append_all(db, thread, turn, before).await?;
    let end = end_turn(db, thread, turn, stop_reason, result).await?;
    Ok((appended, end))
}

pub(crate) async fn complete_turn(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<Event, StoreError> {
    require_running(db, thread, turn).await?;
    end_turn(db, thread, turn, stop_reason, result).await
}

/// Ends the running turns (of `replica`, or of everyone) that no approval suspends:
/// their pending permissions declined first, then `turn_completed`. In the order the
/// turns began, as SQLite does.
pub(crate) async fn interrupt_turns(
    db: Db<'_>,
    replica: Option<&ReplicaId>,
) -> Result<Vec<TurnId>, StoreError> {
    let replica = replica.map(ReplicaId::as_str);
    let running = db
        .query(
            "SELECT id, thread_id FROM turns
             WHERE status = 'running' AND ($1::TEXT IS NULL OR replica = $1)
             ORDER BY pos FOR UPDATE",
            &[&replica],
        )
        .await
        .map_err(pg)?;
    let mut ended = Vec::with_capacity(running.len());
    for row in running {
        let turn = TurnId::parse(&text(&row, 0)?).map_err(|_| damaged("turn id"))?;
        let thread = ThreadId::parse(&text(&row, 1)?).map_err(|_| damaged("thread id"))?;
        if interrupt_locked(db, &thread, &turn).await? {
            ended.push(turn);
        }
    }
    Ok(ended)
}

/// Ends one running turn, whose row the caller locked, as `interrupted` (its pending
/// permissions declined first); `false`, touching nothing, when an approval suspends it.
pub(crate) async fn interrupt_locked(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
) -> Result<bool, StoreError> {
    // A turn suspended on an approval is not running anywhere: it resumes on the
    // decision, whichever replica is up then.
    if approvals::suspends(db, turn).await? {
        return Ok(false);
    }
    // Nobody is left to answer them, and a turn must not end with a question open.
    for permission in pending_permissions_of_turn(db, turn).await? {
        resolve_permission(
            db,
            &permission,
            PermissionDecision::Declined,
            STOPPED_WHILE_PENDING,
        )
        .await?;
    }
    end_turn(
        db,
        thread,
        turn,
        StopReason::Interrupted,
        serde_json::Value::Null,
    )
    .await?;
    Ok(true)
}

/// Stores a pending permission and its `permission_required` event; `created_at` is
/// the event's `ts`.
pub(crate) async fn create_permission(
    db: Db<'_>,
    permission: NewPermission,
) -> Result<(PermissionRecord, Event), StoreError> {
    require_running(db, &permission.thread_id, &permission.turn_id).await?;
    let (arguments_json, options_json) = permission.encoded()?;
    let policy_json = permission.encoded_policy()?;
    let event = insert_event(
        db,
        &permission.thread_id,
        &permission.turn_id,
        permission.required_event(),
    )
    .await?;
    let inserted = db
        .execute(
            "INSERT INTO permissions
                 (id, thread_id, turn_id, call_id, tool, arguments, options, status, created_at,
                  policy)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)",
            &[
                &permission.id.as_str(),
                &permission.thread_id.as_str(),
                &permission.turn_id.as_str(),
                &enc(&permission.call_id),
                &enc(&permission.tool),
                &arguments_json,
                &options_json,
                &event.ts,
                &policy_json,
            ],
        )
        .await;
    match inserted {
        Ok(_) => {}
        Err(e) if unique_violation(&e).is_some() => {
            return Err(StoreError::Conflict(format!(
                "permission {} already exists",
                permission.id
            )));
        }
        Err(e) => return Err(pg(e)),
    }
    Ok((permission.pending(event.ts.clone()), event))
}

/// Answers a pending permission of a running turn and appends `permission_resolved`
/// to that turn; `resolved_at` is the event's `ts`. Locks the turn, then the
/// permission, so two answers to one permission are decided one after the other.
pub(crate) async fn resolve_permission(
    db: Db<'_>,
    id: &PermissionId,
    decision: PermissionDecision,
    reason: &str,
) -> Result<(PermissionRecord, Event), StoreError> {
    let Some(seen) = permission(db, id).await? else {
        return Err(StoreError::NotFound(format!("permission {id}")));
    };
    let running = require_running(db, &seen.thread_id, &seen.turn_id).await;
    // Read again under the lock: another replica may have answered meanwhile.
    let pending = db
        .query_opt(
            &format!("SELECT {PERMISSION_COLUMNS} FROM permissions WHERE id = $1 FOR UPDATE"),
            &[&id.as_str()],
        )
        .await
        .map_err(pg)?
        .map(|row| decode_permission(&row))
        .transpose()?
        .ok_or_else(|| StoreError::NotFound(format!("permission {id}")))?;
    if let PermissionStatus::Resolved(earlier) = pending.status {
        return Err(StoreError::Conflict(format!(
            "permission {id} was already {}",
            earlier.as_str()
        )));
    }
    // The answer must land inside its turn: after `turn_completed` it would be a
    // decision nobody acted on.
    running.map_err(|e| match e {
        StoreError::Conflict(why) => {
            StoreError::Conflict(format!("permission {id} can no longer be answered: {why}"))
        }
        other => other,
    })?;
    let payload = records::permission_resolved(id, decision, reason);
    let event = insert_event(db, &pending.thread_id, &pending.turn_id, payload).await?;
    let changed = db
        .execute(
            "UPDATE permissions SET status = $2, reason = $3, resolved_at = $4
             WHERE id = $1 AND status = 'pending'",
            &[&id.as_str(), &decision.as_str(), &enc(reason), &event.ts],
        )
        .await
        .map_err(pg)?;
    if changed != 1 {
        return Err(StoreError::Backend(format!(
            "permission {id} was not pending when its answer was recorded"
        )));
    }
    let record = PermissionRecord {
        status: PermissionStatus::Resolved(decision),
        reason: Some(reason.to_owned()),
        ..pending
    };
    Ok((record, event))
}

/// Writes `turn_completed` and the turn's end in the caller's transaction; `ended_at`
/// is the event's `ts`.
async fn end_turn(
    db: Db<'_>,
    thread: &ThreadId,
    turn: &TurnId,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<Event, StoreError> {
    let (payload, result_json) = records::turn_completed(turn, stop_reason, result)?;
    let event = insert_event(db, thread, turn, payload).await?;
    let changed = db
        .execute(
            "UPDATE turns SET status = $2, ended_at = $3, result = $4
             WHERE id = $1 AND status = 'running'",
            &[
                &turn.as_str(),
                &stop_reason.as_str(),
                &event.ts,
                &result_json,
            ],
        )
        .await
        .map_err(pg)?;
    if changed != 1 {
        return Err(StoreError::Backend(format!(
            "turn {turn} was not running when its end was recorded"
        )));
    }
    Ok(event)
}

// ----- reads ----------------------------------------------------------------------------

/// The thread `id` unless it is unknown or deleted.
pub(crate) async fn thread(db: Db<'_>, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1 AND deleted_at IS NULL"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode_thread(&row))
    .transpose()
}

/// The live threads of `client_id`, newest (created last) first.
pub(crate) async fn threads_of_client(
    db: Db<'_>,
    client_id: &str,
) -> Result<Vec<ThreadRecord>, StoreError> {
    db.query(
        &format!(
            "SELECT {THREAD_COLUMNS} FROM threads WHERE client_id = $1 AND deleted_at IS NULL
             AND shadow_of IS NULL ORDER BY pos DESC"
        ),
        &[&enc(client_id)],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_thread)
    .collect()
}

/// Every client's live threads with a turn begun at or after `since` (stored form;
/// all when `None`), created first first.
pub(crate) async fn threads_active_since(
    db: Db<'_>,
    since: Option<&str>,
) -> Result<Vec<ThreadRecord>, StoreError> {
    db.query(
        &format!(
            "SELECT {THREAD_COLUMNS} FROM threads WHERE deleted_at IS NULL AND shadow_of IS NULL
             AND ($1::TEXT IS NULL OR EXISTS (SELECT 1 FROM turns
                  WHERE turns.thread_id = threads.id AND turns.created_at >= $1::TEXT))
             ORDER BY pos"
        ),
        &[&since],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_thread)
    .collect()
}

pub(crate) async fn turn(db: Db<'_>, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = $1"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode_turn(&row))
    .transpose()
}

pub(crate) async fn turns_of_thread(
    db: Db<'_>,
    thread: &ThreadId,
) -> Result<Vec<TurnRecord>, StoreError> {
    db.query(
        &format!("SELECT {TURN_COLUMNS} FROM turns WHERE thread_id = $1 ORDER BY pos"),
        &[&thread.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_turn)
    .collect()
}

/// See `EventStore::answered_turns`: newest first, then turned around.
pub(crate) async fn answered_turns(
    db: Db<'_>,
    thread: &ThreadId,
    limit: usize,
) -> Result<Vec<TurnRecord>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut turns = db
        .query(
            &format!(
                "SELECT {TURN_COLUMNS} FROM turns
                 WHERE thread_id = $1 AND NOT internal AND status IN ('finished', 'text_answer')
                 ORDER BY pos DESC LIMIT $2"
            ),
            &[&thread.as_str(), &limit],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(decode_turn)
        .collect::<Result<Vec<_>, _>>()?;
    turns.reverse();
    Ok(turns)
}

pub(crate) async fn turn_events(db: Db<'_>, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
    db.query(
        &format!("SELECT {EVENT_COLUMNS} FROM events WHERE turn_id = $1 ORDER BY seq"),
        &[&turn.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_event)
    .collect()
}

pub(crate) async fn thread_events(
    db: Db<'_>,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    // Seqs are positive BIGINTs: nothing lies beyond i64::MAX.
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    db.query(
        &format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE thread_id = $1 AND seq > $2
             ORDER BY seq LIMIT $3"
        ),
        &[&thread.as_str(), &after, &limit],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_event)
    .collect()
}

pub(crate) async fn permission(
    db: Db<'_>,
    id: &PermissionId,
) -> Result<Option<PermissionRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {PERMISSION_COLUMNS} FROM permissions WHERE id = $1"),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode_permission(&row))
    .transpose()
}

/// The ids of the permissions of `turn` still waiting for an answer, oldest first.
async fn pending_permissions_of_turn(
    db: Db<'_>,
    turn: &TurnId,
) -> Result<Vec<PermissionId>, StoreError> {
    db.query(
        "SELECT id FROM permissions WHERE turn_id = $1 AND status = 'pending' ORDER BY pos",
        &[&turn.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|row| PermissionId::parse(&text(row, 0)?).map_err(|_| damaged("permission id")))
    .collect()
}

// ----- rows -----------------------------------------------------------------------------

/// A thread row (`THREAD_COLUMNS`) as its record.
pub(crate) fn decode_thread(row: &Row) -> Result<ThreadRecord, StoreError> {
    Ok(ThreadRecord {
        id: ThreadId::parse(&text(row, 0)?).map_err(|_| damaged("thread id"))?,
        client_id: text(row, 1)?,
        agent: text(row, 2)?,
        cwd: text(row, 3)?,
        title: opt_text(row, 4)?,
        created_at: text(row, 5)?,
        summary: opt_text(row, 6)?,
        agent_version: opt_text(row, 7)?,
        shadow_of: opt_text(row, 8)?
            .as_deref()
            .map(ThreadId::parse)
            .transpose()
            .map_err(|_| damaged("thread id"))?,
    })
}

fn decode_turn(row: &Row) -> Result<TurnRecord, StoreError> {
    let id = text(row, 0)?;
    let status = text(row, 3)?;
    let status = if status == "running" {
        TurnStatus::Running
    } else {
        // The column holds `StopReason::as_str`, which is its serde name.
        let reason: StopReason = serde_json::from_value(serde_json::Value::String(status.clone()))
            .map_err(|_| {
                StoreError::Backend(format!("turn {id} has an unknown status {status:?}"))
            })?;
        TurnStatus::Ended(reason)
    };
    let result = opt_text(row, 7)?
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| StoreError::Backend(format!("turn {id} has an unreadable result: {e}")))?;
    Ok(TurnRecord {
        id: TurnId::parse(&id).map_err(|_| damaged("turn id"))?,
        thread_id: ThreadId::parse(&text(row, 1)?).map_err(|_| damaged("thread id"))?,
        input: text(row, 2)?,
        status,
        created_at: text(row, 4)?,
        ended_at: opt_text(row, 5)?,
        internal: row.try_get(6).map_err(pg)?,
        result,
        agent_version: opt_text(row, 8)?,
    })
}

fn decode_event(row: &Row) -> Result<Event, StoreError> {
    let thread_id = text(row, 0)?;
    let seq: i64 = row.try_get(1).map_err(pg)?;
    let unreadable = |what: String| {
        StoreError::Backend(format!(
            "event {seq} of thread {thread_id} is unreadable: {what}"
        ))
    };
    let payload: EventPayload =
        serde_json::from_str(&text(row, 4)?).map_err(|e| unreadable(format!("payload: {e}")))?;
    Ok(Event {
        thread_id: ThreadId::parse(&thread_id).map_err(&unreadable)?,
        turn_id: TurnId::parse(&text(row, 2)?).map_err(&unreadable)?,
        seq: u64::try_from(seq).map_err(|_| unreadable("negative seq".into()))?,
        ts: text(row, 3)?,
        payload,
    })
}

fn decode_permission(row: &Row) -> Result<PermissionRecord, StoreError> {
    let id = text(row, 0)?;
    let unreadable =
        |what: String| StoreError::Backend(format!("permission {id} is unreadable: {what}"));
    let status = match text(row, 7)?.as_str() {
        "pending" => PermissionStatus::Pending,
        "approved" => PermissionStatus::Resolved(PermissionDecision::Approved),
        "declined" => PermissionStatus::Resolved(PermissionDecision::Declined),
        other => return Err(unreadable(format!("unknown status {other:?}"))),
    };
    Ok(PermissionRecord {
        id: PermissionId::parse(&id).map_err(&unreadable)?,
        thread_id: ThreadId::parse(&text(row, 1)?).map_err(&unreadable)?,
        turn_id: TurnId::parse(&text(row, 2)?).map_err(&unreadable)?,
        call_id: text(row, 3)?,
        tool: text(row, 4)?,
        arguments: serde_json::from_str(&text(row, 5)?)
            .map_err(|e| unreadable(format!("arguments: {e}")))?,
        options: serde_json::from_str(&text(row, 6)?)
            .map_err(|e| unreadable(format!("options: {e}")))?,
        status,
        reason: opt_text(row, 8)?,
        created_at: text(row, 9)?,
        policy: opt_text(row, 10)?
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| unreadable(format!("policy: {e}")))?,
    })
}
