//! Approvals: a suspended turn's one pending tool call, its decision, and the claim by
//! the turn that resumes on it. The SQL for both writing (called by the writer thread
//! inside its transaction) and reading lives here.
//!
//! Life of an approval: `pending` → decided (`approved`, `edited`, `rejected`,
//! `expired`; once, enforced by a trigger) → claimed (`resumed_at` set, once). A turn
//! with an unclaimed approval is suspended: still `running` in `turns` (so the thread
//! keeps its one active turn) but not run by any process, and a restart leaves it be.

use agentplane_core::{ApprovalId, ApprovalOutcome, Event, ThreadId, TurnId};
use agentplane_engine::ports::records;
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStatus, NewApproval, StoreError,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::rows::{self, backend};

/// Longest list returned at once.
const MAX_LIST: usize = 1_000;

const COLUMNS: &str = "approvals.id, approvals.thread_id, approvals.turn_id, threads.client_id, \
     threads.agent, approvals.call_id, approvals.tool, approvals.arguments, approvals.policy, \
     approvals.approvers, approvals.status, approvals.edited_arguments, approvals.feedback, \
     approvals.decided_by, approvals.created_at, approvals.expires_at, approvals.decided_at, \
     approvals.resumed_at IS NOT NULL, approvals.snapshot";

/// Stores a pending approval of a running turn and its `approval_requested` event.
pub(crate) fn create(
    c: &Connection,
    approval: NewApproval,
) -> Result<(ApprovalRecord, Event), StoreError> {
    let id = approval.id.clone();
    rows::require_running(c, &approval.thread_id, &approval.turn_id)?;
    let payload = records::approval_requested(&approval);
    let event = rows::insert_event(
        c,
        approval.thread_id.clone(),
        approval.turn_id.clone(),
        payload,
    )?;
    let inserted = c
        .prepare_cached(
            "INSERT INTO approvals (id, thread_id, turn_id, call_id, tool, arguments, policy,
                 approvers, status, snapshot, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                id.as_str(),
                approval.thread_id.as_str(),
                approval.turn_id.as_str(),
                approval.call_id,
                approval.tool,
                serde_json::to_string(&approval.arguments).unwrap_or_default(),
                approval.policy,
                serde_json::to_string(&approval.approvers).unwrap_or_default(),
                serde_json::to_string(&approval.snapshot)
                    .map_err(|e| { rusqlite::Error::ToSqlConversionFailure(Box::new(e)) })?,
                event.ts,
                approval.expires_at,
            ])
        });
    match inserted {
        Ok(_) => {}
        Err(rusqlite::Error::ToSqlConversionFailure(e)) => {
            return Err(StoreError::Backend(format!(
                "approval {id}: the turn's state cannot be encoded: {e}"
            )));
        }
        Err(e) if e.sqlite_extended_error_code() == Some(rows::UNIQUE_VIOLATION) => {
            return Err(StoreError::Conflict(format!(
                "turn {} already waits for an approval",
                approval.turn_id
            )));
        }
        Err(e) if e.sqlite_extended_error_code() == Some(rows::PRIMARY_KEY_VIOLATION) => {
            return Err(StoreError::Conflict(format!(
                "approval {id} already exists"
            )));
        }
        Err(e) => return Err(backend(e)),
    }
    let record = get(c, &id)?
        .ok_or_else(|| StoreError::Backend(format!("approval {id} vanished on insert")))?;
    Ok((record, event))
}

/// Records the decision of a pending approval and its `approval_decided` event.
pub(crate) fn decide(
    c: &Connection,
    id: &ApprovalId,
    decision: ApprovalDecision,
) -> Result<(ApprovalRecord, Event), StoreError> {
    let Some(pending) = get(c, id)? else {
        return Err(StoreError::NotFound(format!("approval {id}")));
    };
    if let ApprovalStatus::Decided(earlier) = pending.status {
        return Err(StoreError::Conflict(format!(
            "approval {id} was already {}",
            earlier.as_str()
        )));
    }
    rows::require_running(c, &pending.thread_id, &pending.turn_id)?;
    let edited = decision.edited(id)?;
    let payload = decision.decided_event(id, edited.as_ref());
    let event = rows::insert_event(
        c,
        pending.thread_id.clone(),
        pending.turn_id.clone(),
        payload,
    )?;
    let changed = c
        .prepare_cached(
            "UPDATE approvals SET status = ?2, edited_arguments = ?3, feedback = ?4,
                 decided_by = ?5, decided_at = ?6
             WHERE id = ?1 AND status = 'pending'",
        )
        .and_then(|mut update| {
            update.execute(params![
                id.as_str(),
                decision.outcome.as_str(),
                edited.as_ref().map(|a| a.to_string()),
                decision.feedback,
                decision.by,
                event.ts,
            ])
        })
        .map_err(backend)?;
    if changed != 1 {
        return Err(StoreError::Backend(format!(
            "approval {id} was not pending when its decision was recorded"
        )));
    }
    let record =
        get(c, id)?.ok_or_else(|| StoreError::Backend(format!("approval {id} vanished")))?;
    Ok((record, event))
}

/// Marks a decided approval as taken by the turn that resumes on it.
pub(crate) fn claim(c: &Connection, id: &ApprovalId) -> Result<ApprovalRecord, StoreError> {
    let Some(record) = get(c, id)? else {
        return Err(StoreError::NotFound(format!("approval {id}")));
    };
    if record.status == ApprovalStatus::Pending {
        return Err(StoreError::Conflict(format!(
            "approval {id} is still pending"
        )));
    }
    let changed = c
        .prepare_cached(
            "UPDATE approvals SET resumed_at = ?2 WHERE id = ?1 AND resumed_at IS NULL
                 AND status != 'pending'",
        )
        .and_then(|mut update| update.execute(params![id.as_str(), stored_now()]))
        .map_err(backend)?;
    if changed != 1 {
        return Err(StoreError::Conflict(format!(
            "approval {id} has already been taken by its turn"
        )));
    }
    Ok(ApprovalRecord {
        resumed: true,
        ..record
    })
}

/// Whether `turn` is suspended on an approval nobody has resumed yet.
pub(crate) fn suspends(c: &Connection, turn: &TurnId) -> Result<bool, StoreError> {
    c.prepare_cached("SELECT 1 FROM approvals WHERE turn_id = ?1 AND resumed_at IS NULL")
        .and_then(|mut find| find.exists([turn.as_str()]))
        .map_err(backend)
}

/// One approval with its thread's owner and agent.
pub(crate) fn get(c: &Connection, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM approvals JOIN threads ON threads.id = approvals.thread_id
         WHERE approvals.id = ?1"
    ))
    .and_then(|mut select| select.query_row([id.as_str()], raw).optional())
    .map_err(backend)?
    .map(decode)
    .transpose()
}

/// Approvals matching `query`, oldest first.
pub(crate) fn list(
    c: &Connection,
    query: &ApprovalQuery,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let limit = match query.limit {
        0 => MAX_LIST,
        n => n.min(MAX_LIST),
    };
    let mut sql = format!(
        "SELECT {COLUMNS} FROM approvals JOIN threads ON threads.id = approvals.thread_id
         WHERE (?1 IS NULL OR threads.client_id = ?1)"
    );
    if query.pending_only {
        sql.push_str(" AND approvals.status = 'pending'");
    }
    if query.awaiting_resume {
        sql.push_str(" AND approvals.status != 'pending' AND approvals.resumed_at IS NULL");
    }
    sql.push_str(" ORDER BY approvals.created_at, approvals.id LIMIT ?2");
    c.prepare_cached(&sql)
        .and_then(|mut select| {
            select
                .query_map(params![query.client, limit as i64], raw)?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(backend)?
        .into_iter()
        .map(decode)
        .collect()
}

/// A row as stored; `decode` checks it.
struct Raw {
    id: String,
    thread_id: String,
    turn_id: String,
    client_id: String,
    agent: String,
    call_id: String,
    tool: String,
    arguments: String,
    policy: String,
    approvers: String,
    status: String,
    edited_arguments: Option<String>,
    feedback: Option<String>,
    decided_by: Option<String>,
    created_at: String,
    expires_at: String,
    decided_at: Option<String>,
    resumed: bool,
    snapshot: String,
}

fn raw(row: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok(Raw {
        id: row.get(0)?,
        thread_id: row.get(1)?,
        turn_id: row.get(2)?,
        client_id: row.get(3)?,
        agent: row.get(4)?,
        call_id: row.get(5)?,
        tool: row.get(6)?,
        arguments: row.get(7)?,
        policy: row.get(8)?,
        approvers: row.get(9)?,
        status: row.get(10)?,
        edited_arguments: row.get(11)?,
        feedback: row.get(12)?,
        decided_by: row.get(13)?,
        created_at: row.get(14)?,
        expires_at: row.get(15)?,
        decided_at: row.get(16)?,
        resumed: row.get(17)?,
        snapshot: row.get(18)?,
    })
}

fn decode(raw: Raw) -> Result<ApprovalRecord, StoreError> {
    let damaged = |what: &str, e: String| {
        StoreError::Backend(format!(
            "stored approval {} is damaged: {what}: {e}",
            raw.id
        ))
    };
    let json = |what: &str, text: &str| {
        serde_json::from_str::<serde_json::Value>(text).map_err(|e| damaged(what, e.to_string()))
    };
    let status = match raw.status.as_str() {
        "pending" => ApprovalStatus::Pending,
        "approved" => ApprovalStatus::Decided(ApprovalOutcome::Approved),
        "edited" => ApprovalStatus::Decided(ApprovalOutcome::Edited),
        "rejected" => ApprovalStatus::Decided(ApprovalOutcome::Rejected),
        "expired" => ApprovalStatus::Decided(ApprovalOutcome::Expired),
        other => return Err(damaged("status", other.to_owned())),
    };
    Ok(ApprovalRecord {
        id: ApprovalId::parse(&raw.id).map_err(|e| damaged("id", e))?,
        thread_id: ThreadId::parse(&raw.thread_id).map_err(|e| damaged("thread", e))?,
        turn_id: TurnId::parse(&raw.turn_id).map_err(|e| damaged("turn", e))?,
        client_id: raw.client_id.clone(),
        agent: raw.agent.clone(),
        call_id: raw.call_id.clone(),
        tool: raw.tool.clone(),
        arguments: json("arguments", &raw.arguments)?,
        policy: raw.policy.clone(),
        approvers: serde_json::from_str(&raw.approvers)
            .map_err(|e| damaged("approvers", e.to_string()))?,
        status,
        edited_arguments: raw
            .edited_arguments
            .as_deref()
            .map(|a| json("edited arguments", a))
            .transpose()?,
        feedback: raw.feedback.clone(),
        decided_by: raw.decided_by.clone(),
        created_at: raw.created_at.clone(),
        expires_at: raw.expires_at.clone(),
        decided_at: raw.decided_at.clone(),
        resumed: raw.resumed,
        snapshot: json("snapshot", &raw.snapshot)?,
    })
}
