//! Permissions: a running turn's request for a person's decision, stored pending with
//! its `permission_required` event, and resolved exactly once with its
//! `permission_resolved` event. The write SQL, called by the writer thread inside its
//! transaction.

use agentplane_core::{Event, PermissionDecision, PermissionId};
use agentplane_engine::ports::records;
use agentplane_engine::ports::{NewPermission, PermissionRecord, PermissionStatus, StoreError};
use rusqlite::{Connection, params};

use crate::reader;
use crate::rows::{PRIMARY_KEY_VIOLATION, backend, insert_event, require_running};

/// Stores a pending permission and its `permission_required` event; `created_at` is
/// the event's `ts`.
pub(crate) fn create_permission(
    c: &Connection,
    permission: NewPermission,
) -> Result<(PermissionRecord, Event), StoreError> {
    require_running(c, &permission.thread_id, &permission.turn_id)?;
    let (arguments_json, options_json) = permission.encoded()?;
    let policy_json = permission.encoded_policy()?;
    let event = insert_event(
        c,
        permission.thread_id.clone(),
        permission.turn_id.clone(),
        permission.required_event(),
    )?;
    let inserted = c
        .prepare_cached(
            "INSERT INTO permissions
                 (id, thread_id, turn_id, call_id, tool, arguments, options, status, created_at,
                  policy)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                permission.id.as_str(),
                permission.thread_id.as_str(),
                permission.turn_id.as_str(),
                permission.call_id,
                permission.tool,
                arguments_json,
                options_json,
                event.ts,
                policy_json,
            ])
        });
    match inserted {
        Ok(_) => {}
        Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => {
            return Err(StoreError::Conflict(format!(
                "permission {} already exists",
                permission.id
            )));
        }
        Err(e) => return Err(backend(e)),
    }
    Ok((permission.pending(event.ts.clone()), event))
}

/// Answers a pending permission of a running turn and appends `permission_resolved`
/// to that turn; `resolved_at` is the event's `ts`.
pub(crate) fn resolve_permission(
    c: &Connection,
    id: &PermissionId,
    decision: PermissionDecision,
    reason: &str,
) -> Result<(PermissionRecord, Event), StoreError> {
    let Some(pending) = reader::permission(c, id)? else {
        return Err(StoreError::NotFound(format!("permission {id}")));
    };
    if let PermissionStatus::Resolved(earlier) = pending.status {
        return Err(StoreError::Conflict(format!(
            "permission {id} was already {}",
            earlier.as_str()
        )));
    }
    // The answer must land inside its turn: after `turn_completed` it would be a
    // decision nobody acted on.
    require_running(c, &pending.thread_id, &pending.turn_id).map_err(|e| match e {
        StoreError::Conflict(why) => {
            StoreError::Conflict(format!("permission {id} can no longer be answered: {why}"))
        }
        other => other,
    })?;
    let payload = records::permission_resolved(id, decision, reason);
    let event = insert_event(
        c,
        pending.thread_id.clone(),
        pending.turn_id.clone(),
        payload,
    )?;
    let changed = c
        .prepare_cached(
            "UPDATE permissions SET status = ?2, reason = ?3, resolved_at = ?4
             WHERE id = ?1 AND status = 'pending'",
        )
        .and_then(|mut update| {
            update.execute(params![id.as_str(), decision.as_str(), reason, event.ts])
        })
        .map_err(backend)?;
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
