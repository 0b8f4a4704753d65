//! Approvals: a suspended turn's one pending tool call, its decision, and the claim by
//! the turn that resumes on it — the same life as on SQLite (`pending` → decided once →
//! claimed once, each step enforced by a trigger). A decision locks the turn, then the
//! approval, so two replicas deciding at once are ordered and the second sees the first.

use agentplane_core::{ApprovalId, ApprovalOutcome, Event, ReplicaId, ThreadId, TurnId};
use agentplane_engine::ports::records;
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStatus, NewApproval, StoreError,
};
use tokio_postgres::Row;

use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::rows::{insert_event, opt_text, pg, require_running, text, unique_violation};

/// Longest list returned at once.
const MAX_LIST: usize = 1_000;

const COLUMNS: &str = "approvals.id, approvals.thread_id, approvals.turn_id, threads.client_id, \
     threads.agent, approvals.call_id, approvals.tool, approvals.arguments, approvals.policy, \
     approvals.approvers, approvals.status, approvals.edited_arguments, approvals.feedback, \
     approvals.decided_by, approvals.created_at, approvals.expires_at, approvals.decided_at, \
     approvals.resumed_at IS NOT NULL, approvals.snapshot";

fn encode(
    what: &str,
    id: &ApprovalId,
    encoded: serde_json::Result<String>,
) -> Result<String, StoreError> {
    encoded
        .map_err(|e| StoreError::Backend(format!("approval {id}: {what} cannot be encoded: {e}")))
}

/// Stores a pending approval of a running turn and its `approval_requested` event.
pub(crate) async fn create(
    db: Db<'_>,
    approval: NewApproval,
) -> Result<(ApprovalRecord, Event), StoreError> {
    let id = approval.id.clone();
    require_running(db, &approval.thread_id, &approval.turn_id).await?;
    let arguments = encode(
        "the arguments",
        &id,
        serde_json::to_string(&approval.arguments),
    )?;
    let approvers = encode(
        "the approvers",
        &id,
        serde_json::to_string(&approval.approvers),
    )?;
    let snapshot = encode(
        "the turn's state",
        &id,
        serde_json::to_string(&approval.snapshot),
    )?;
    let payload = records::approval_requested(&approval);
    let event = insert_event(db, &approval.thread_id, &approval.turn_id, payload).await?;
    let inserted = db
        .execute(
            "INSERT INTO approvals (id, thread_id, turn_id, call_id, tool, arguments, policy,
                 approvers, status, snapshot, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11)",
            &[
                &id.as_str(),
                &approval.thread_id.as_str(),
                &approval.turn_id.as_str(),
                &enc(&approval.call_id),
                &enc(&approval.tool),
                &arguments,
                &enc(&approval.policy),
                &approvers,
                &snapshot,
                &event.ts,
                &enc(&approval.expires_at),
            ],
        )
        .await;
    match inserted {
        Ok(_) => {}
        Err(e) if unique_violation(&e) == Some("approvals_one_open_per_turn") => {
            return Err(StoreError::Conflict(format!(
                "turn {} already waits for an approval",
                approval.turn_id
            )));
        }
        Err(e) if unique_violation(&e).is_some() => {
            return Err(StoreError::Conflict(format!(
                "approval {id} already exists"
            )));
        }
        Err(e) => return Err(pg(e)),
    }
    let record = get(db, &id)
        .await?
        .ok_or_else(|| StoreError::Backend(format!("approval {id} vanished on insert")))?;
    Ok((record, event))
}

/// Records the decision of a pending approval and its `approval_decided` event.
pub(crate) async fn decide(
    db: Db<'_>,
    id: &ApprovalId,
    decision: ApprovalDecision,
) -> Result<(ApprovalRecord, Event), StoreError> {
    let Some(seen) = get(db, id).await? else {
        return Err(StoreError::NotFound(format!("approval {id}")));
    };
    let running = require_running(db, &seen.thread_id, &seen.turn_id).await;
    db.execute(
        "SELECT 1 FROM approvals WHERE id = $1 FOR UPDATE",
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?;
    let pending = get(db, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("approval {id}")))?;
    if let ApprovalStatus::Decided(earlier) = pending.status {
        return Err(StoreError::Conflict(format!(
            "approval {id} was already {}",
            earlier.as_str()
        )));
    }
    running?;
    let edited = decision.edited(id)?;
    let payload = decision.decided_event(id, edited.as_ref());
    let event = insert_event(db, &pending.thread_id, &pending.turn_id, payload).await?;
    let changed = db
        .execute(
            "UPDATE approvals SET status = $2, edited_arguments = $3, feedback = $4,
                 decided_by = $5, decided_at = $6
             WHERE id = $1 AND status = 'pending'",
            &[
                &id.as_str(),
                &decision.outcome.as_str(),
                &edited.as_ref().map(|a| a.to_string()),
                &enc_opt(decision.feedback.as_deref()),
                &enc(&decision.by),
                &event.ts,
            ],
        )
        .await
        .map_err(pg)?;
    if changed != 1 {
        return Err(StoreError::Backend(format!(
            "approval {id} was not pending when its decision was recorded"
        )));
    }
    let record = get(db, id)
        .await?
        .ok_or_else(|| StoreError::Backend(format!("approval {id} vanished")))?;
    Ok((record, event))
}

/// Marks a decided approval as taken by the turn that resumes on it. The conditional
/// `UPDATE` is the claim: of two replicas claiming at once, one changes the row. The
/// turn then runs on `replica`, the claimer: recorded so that its death is recovered.
pub(crate) async fn claim(
    db: Db<'_>,
    id: &ApprovalId,
    replica: &ReplicaId,
) -> Result<ApprovalRecord, StoreError> {
    let Some(record) = get(db, id).await? else {
        return Err(StoreError::NotFound(format!("approval {id}")));
    };
    if record.status == ApprovalStatus::Pending {
        return Err(StoreError::Conflict(format!(
            "approval {id} is still pending"
        )));
    }
    // The turn row first, as every writer locks (turn, then approval): the claim
    // below also records the replica on it.
    db.execute(
        "SELECT 1 FROM turns WHERE id = $1 FOR UPDATE",
        &[&record.turn_id.as_str()],
    )
    .await
    .map_err(pg)?;
    let changed = db
        .execute(
            "UPDATE approvals SET resumed_at = $2 WHERE id = $1 AND resumed_at IS NULL
                 AND status != 'pending'",
            &[&id.as_str(), &stored_now()],
        )
        .await
        .map_err(pg)?;
    if changed != 1 {
        return Err(StoreError::Conflict(format!(
            "approval {id} has already been taken by its turn"
        )));
    }
    db.execute(
        "UPDATE turns SET replica = $2 WHERE id = $1",
        &[&record.turn_id.as_str(), &replica.as_str()],
    )
    .await
    .map_err(pg)?;
    Ok(ApprovalRecord {
        resumed: true,
        ..record
    })
}

/// Whether `turn` is suspended on an approval nobody has resumed yet.
pub(crate) async fn suspends(db: Db<'_>, turn: &TurnId) -> Result<bool, StoreError> {
    Ok(db
        .query_opt(
            "SELECT 1 FROM approvals WHERE turn_id = $1 AND resumed_at IS NULL",
            &[&turn.as_str()],
        )
        .await
        .map_err(pg)?
        .is_some())
}

/// One approval with its thread's owner and agent.
pub(crate) async fn get(db: Db<'_>, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
    db.query_opt(
        &format!(
            "SELECT {COLUMNS} FROM approvals JOIN threads ON threads.id = approvals.thread_id
             WHERE approvals.id = $1"
        ),
        &[&id.as_str()],
    )
    .await
    .map_err(pg)?
    .map(|row| decode(&row))
    .transpose()
}

/// Approvals matching `query`, oldest first.
pub(crate) async fn list(
    db: Db<'_>,
    query: &ApprovalQuery,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let limit = match query.limit {
        0 => MAX_LIST,
        n => n.min(MAX_LIST),
    } as i64;
    let mut sql = format!(
        "SELECT {COLUMNS} FROM approvals JOIN threads ON threads.id = approvals.thread_id
         WHERE ($1::TEXT IS NULL OR threads.client_id = $1)"
    );
    if query.pending_only {
        sql.push_str(" AND approvals.status = 'pending'");
    }
    if query.awaiting_resume {
        sql.push_str(" AND approvals.status != 'pending' AND approvals.resumed_at IS NULL");
    }
    // `COLLATE "C"`: text order by bytes, as SQLite compares.
    sql.push_str(
        " ORDER BY approvals.created_at COLLATE \"C\", approvals.id COLLATE \"C\" LIMIT $2",
    );
    db.query(&sql, &[&enc_opt(query.client.as_deref()), &limit])
        .await
        .map_err(pg)?
        .iter()
        .map(decode)
        .collect()
}

fn decode(row: &Row) -> Result<ApprovalRecord, StoreError> {
    let id = text(row, 0)?;
    let damaged = |what: &str, e: String| {
        StoreError::Backend(format!("stored approval {id} is damaged: {what}: {e}"))
    };
    let json = |what: &str, text: &str| {
        serde_json::from_str::<serde_json::Value>(text).map_err(|e| damaged(what, e.to_string()))
    };
    let status = match text(row, 10)?.as_str() {
        "pending" => ApprovalStatus::Pending,
        "approved" => ApprovalStatus::Decided(ApprovalOutcome::Approved),
        "edited" => ApprovalStatus::Decided(ApprovalOutcome::Edited),
        "rejected" => ApprovalStatus::Decided(ApprovalOutcome::Rejected),
        "expired" => ApprovalStatus::Decided(ApprovalOutcome::Expired),
        other => return Err(damaged("status", other.to_owned())),
    };
    Ok(ApprovalRecord {
        id: ApprovalId::parse(&id).map_err(|e| damaged("id", e))?,
        thread_id: ThreadId::parse(&text(row, 1)?).map_err(|e| damaged("thread", e))?,
        turn_id: TurnId::parse(&text(row, 2)?).map_err(|e| damaged("turn", e))?,
        client_id: text(row, 3)?,
        agent: text(row, 4)?,
        call_id: text(row, 5)?,
        tool: text(row, 6)?,
        arguments: json("arguments", &text(row, 7)?)?,
        policy: text(row, 8)?,
        approvers: serde_json::from_str(&text(row, 9)?)
            .map_err(|e| damaged("approvers", e.to_string()))?,
        status,
        edited_arguments: opt_text(row, 11)?
            .as_deref()
            .map(|a| json("edited arguments", a))
            .transpose()?,
        feedback: opt_text(row, 12)?,
        decided_by: opt_text(row, 13)?,
        created_at: text(row, 14)?,
        expires_at: text(row, 15)?,
        decided_at: opt_text(row, 16)?,
        resumed: row.try_get(17).map_err(pg)?,
        snapshot: json("snapshot", &text(row, 18)?)?,
    })
}
