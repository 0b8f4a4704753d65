//! What every store builds the same way, whichever database it writes to: the stored
//! form of a time, the bounds of a cost query, the records and events of threads,
//! permissions, approvals, versions and finished executions, the sums of cost rows. The SQLite and PostgreSQL
//! adapters call these, so the two cannot drift apart.

use std::collections::BTreeMap;
use std::time::Duration;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, ApprovalOutcome, EventPayload, ExecutionId, PermissionDecision, PermissionId,
    StopReason, ThreadId, TurnId,
};
use serde_json::Value;

use agentplane_core::version::Stage;

use super::{
    ApprovalDecision, CostRow, DeliveryAttempt, DeliveryStatus, ExecutionEnd, ExecutionRecord,
    NewApproval, NewPermission, NewThread, PermissionRecord, PermissionStatus, StoreError,
    ThreadRecord, VersionRecord,
};

/// The `approval_requested` event of a new approval: its arguments only when the
/// retention keeps them in events, their hash always.
pub fn approval_requested(approval: &NewApproval) -> EventPayload {
    EventPayload::ApprovalRequested {
        approval_id: approval.id.to_string(),
        call_id: approval.call_id.clone(),
        tool: approval.tool.clone(),
        arguments: if approval.arguments_in_event {
            approval.arguments.clone()
        } else {
            Value::Null
        },
        args_preview_hash: approval.args_preview_hash.clone(),
        policy: approval.policy.clone(),
        approvers: approval.approvers.clone(),
        expires_at: approval.expires_at.clone(),
        explanation: approval.explanation.clone().map(Box::new),
    }
}

/// The `permission_resolved` event of permission `id`.
pub fn permission_resolved(
    id: &PermissionId,
    decision: PermissionDecision,
    reason: &str,
) -> EventPayload {
    EventPayload::PermissionResolved {
        permission_id: id.to_string(),
        decision,
        reason: reason.to_owned(),
    }
}

/// `Conflict` when `payloads` hold a `turn_completed`: an append that wrote one would
/// leave the turn running behind its own end; only `complete_turn` writes it.
pub fn refuse_turn_completed<'a>(
    turn: &TurnId,
    mut payloads: impl Iterator<Item = &'a EventPayload>,
) -> Result<(), StoreError> {
    if payloads.any(|payload| matches!(payload, EventPayload::TurnCompleted { .. })) {
        return Err(StoreError::Conflict(format!(
            "turn {turn}: turn_completed is written by complete_turn, not append"
        )));
    }
    Ok(())
}

/// A turn's end: the `turn_completed` event and the result as the turn row stores it
/// (JSON text); `Backend` if the result cannot be encoded.
pub fn turn_completed(
    turn: &TurnId,
    stop_reason: StopReason,
    result: Value,
) -> Result<(EventPayload, String), StoreError> {
    let json = serde_json::to_string(&result).map_err(|e| {
        StoreError::Backend(format!("turn {turn}: the result cannot be encoded: {e}"))
    })?;
    Ok((
        EventPayload::TurnCompleted {
            stop_reason,
            result,
        },
        json,
    ))
}

/// `t` in the stored form: RFC 3339, UTC, exactly three fractional digits
/// (`2026-01-02T03:04:05.678Z`), so stored times have one width and sort as text.
pub fn stored_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Now, in the stored form.
pub fn stored_now() -> String {
    stored_time(Timestamp::now())
}

/// Now plus `delay`, in the stored form (the latest time there is, if it overflows).
pub fn stored_after(delay: Duration) -> String {
    let now = Timestamp::now();
    stored_time(now.checked_add(delay).unwrap_or(Timestamp::MAX))
}

/// Now minus `age`, in the stored form (the earliest time there is, if it overflows).
pub fn stored_before(age: Duration) -> String {
    let now = Timestamp::now();
    stored_time(now.checked_sub(age).unwrap_or(Timestamp::MIN))
}

/// A cost query's bound `value` (RFC 3339) in the stored form, so that text order is
/// time order. Rounded up to the millisecond: every stored time is a whole millisecond,
/// so `ts >= since` and `ts < until` keep their meaning.
pub fn cost_bound(name: &str, value: &str) -> Result<String, StoreError> {
    let invalid = || StoreError::Backend(format!("costs: `{name}` is not an RFC 3339 time"));
    let t: Timestamp = value.parse().map_err(|_| invalid())?;
    let sub_milli = t.subsec_nanosecond().rem_euclid(1_000_000);
    let t = if sub_milli == 0 {
        t
    } else {
        let up = Duration::from_nanos(u64::try_from(1_000_000 - sub_milli).unwrap_or(0));
        t.checked_add(up).map_err(|_| invalid())?
    };
    // Year 0 to 9999: four digits, so the text sorts as the time.
    let first = "0000-01-01T00:00:00Z"
        .parse::<Timestamp>()
        .map_err(|_| invalid())?;
    if t < first {
        return Err(invalid());
    }
    Ok(stored_time(t))
}

impl NewThread {
    /// The record of this thread, created at `created_at`: no summary or shadow yet,
    /// and the version it was created pinned to, if any.
    pub fn created(self, created_at: String) -> ThreadRecord {
        ThreadRecord {
            id: self.id,
            client_id: self.client_id,
            agent: self.agent,
            cwd: self.cwd,
            title: self.title,
            created_at,
            summary: None,
            agent_version: self.agent_version,
            shadow_of: None,
        }
    }
}

impl VersionRecord {
    /// Only a draft may change; anything else is a conflict naming its stage.
    pub fn require_draft(&self) -> Result<(), StoreError> {
        if self.stage == Stage::Draft {
            return Ok(());
        }
        Err(StoreError::Conflict(format!(
            "version {} of agent `{}` is {} and immutable",
            self.version,
            self.agent,
            self.stage.as_str()
        )))
    }
}

/// The error of a write that expected execution `id` to be running: a conflict naming
/// what it is instead, or not found.
pub fn execution_not_running(
    id: &ExecutionId,
    found: Result<Option<ExecutionRecord>, StoreError>,
) -> StoreError {
    match found {
        Ok(Some(record)) => StoreError::Conflict(format!(
            "execution {id} is not running ({})",
            record.status.as_str()
        )),
        Ok(None) => StoreError::NotFound(format!("execution {id}")),
        Err(e) => e,
    }
}

impl NewPermission {
    /// Its arguments and options as the stored JSON texts.
    pub fn encoded(&self) -> Result<(String, String), StoreError> {
        let unencodable = |e: serde_json::Error| {
            StoreError::Backend(format!("permission {} cannot be encoded: {e}", self.id))
        };
        Ok((
            serde_json::to_string(&self.arguments).map_err(unencodable)?,
            serde_json::to_string(&self.options).map_err(unencodable)?,
        ))
    }

    /// The `permission_required` event this request appends.
    pub fn required_event(&self) -> EventPayload {
        EventPayload::PermissionRequired {
            permission_id: self.id.to_string(),
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            options: self.options.clone(),
            runs: self.runs.clone(),
            policy: self.policy.as_ref().map(|p| p.policy.clone()),
        }
    }

    /// The approval policy it answers for, as the stored JSON text.
    pub fn encoded_policy(&self) -> Result<Option<String>, StoreError> {
        self.policy
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| {
                StoreError::Backend(format!("permission {} cannot be encoded: {e}", self.id))
            })
    }

    /// The record of this request, pending since `created_at` (its event's time).
    pub fn pending(self, created_at: String) -> PermissionRecord {
        PermissionRecord {
            id: self.id,
            thread_id: self.thread_id,
            turn_id: self.turn_id,
            call_id: self.call_id,
            tool: self.tool,
            arguments: self.arguments,
            options: self.options,
            status: PermissionStatus::Pending,
            reason: None,
            created_at,
            policy: self.policy,
        }
    }
}

impl ApprovalDecision {
    /// The arguments an `Edited` decision runs instead; an edit without them is a
    /// conflict, other outcomes have none.
    pub fn edited(&self, id: &ApprovalId) -> Result<Option<Value>, StoreError> {
        match (self.outcome, &self.arguments) {
            (ApprovalOutcome::Edited, Some(arguments)) => Ok(Some(arguments.clone())),
            (ApprovalOutcome::Edited, None) => Err(StoreError::Conflict(format!(
                "approval {id}: an edit needs the edited arguments"
            ))),
            _ => Ok(None),
        }
    }

    /// The `approval_decided` event of this decision (edited arguments shown only when
    /// retention allows it).
    pub fn decided_event(&self, id: &ApprovalId, edited: Option<&Value>) -> EventPayload {
        EventPayload::ApprovalDecided {
            approval_id: id.to_string(),
            outcome: self.outcome,
            arguments: edited.map(|a| {
                if self.arguments_in_event {
                    a.clone()
                } else {
                    Value::Null
                }
            }),
            feedback: self.feedback.clone(),
            by: self.by.clone(),
            decider: self.decider.clone(),
        }
    }
}

impl ExecutionEnd {
    /// Checks that the end is terminal, and gives its output as the stored JSON text.
    pub fn stored_output(&self, id: &ExecutionId) -> Result<Option<String>, StoreError> {
        if !self.status.is_terminal() {
            return Err(StoreError::Backend(format!(
                "execution {id} cannot finish as {}",
                self.status.as_str()
            )));
        }
        self.output
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Backend(format!("execution {id}: output: {e}")))
    }
}

impl DeliveryAttempt {
    /// What this attempt makes of its delivery, in stored form: the status, when to try
    /// next, and when it was delivered.
    pub fn outcome(&self) -> (DeliveryStatus, Option<String>, Option<String>) {
        match (self.delivered, self.retry_after) {
            (true, _) => (DeliveryStatus::Delivered, None, Some(stored_now())),
            (false, Some(delay)) => (DeliveryStatus::Pending, Some(stored_after(delay)), None),
            (false, None) => (DeliveryStatus::Failed, None, None),
        }
    }
}

/// The error of a write that expected delivery `id` to be pending: a conflict naming
/// what it is instead, or not found.
pub fn delivery_not_pending(
    id: &agentplane_core::DeliveryId,
    found: Option<super::DeliveryRecord>,
) -> StoreError {
    match found {
        None => StoreError::NotFound(format!("delivery {id}")),
        Some(d) => StoreError::Conflict(format!("delivery {id} is already {}", d.status.as_str())),
    }
}

/// The grouping key of a cost row, in the order rows are returned: agent, client,
/// provider, model, day, thread, turn.
pub type CostKey = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
);

/// Counts one model call into its group of `groups`.
pub fn add_cost_call(
    groups: &mut BTreeMap<CostKey, CostRow>,
    key: CostKey,
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

/// The rows of `groups`, in key order, each with its thread and turn when it is grouped
/// by them.
pub fn cost_rows(groups: BTreeMap<CostKey, CostRow>) -> Result<Vec<CostRow>, StoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_stored_in_utc_with_milliseconds() {
        let t = Timestamp::from_nanosecond(1_767_323_045_078_900_000).expect("valid instant");
        assert_eq!(stored_time(t), "2026-01-02T03:04:05.078Z");
        assert_eq!(stored_now().len(), "2026-01-02T03:04:05.078Z".len());
        assert!(stored_before(Duration::from_secs(60)) < stored_now());
        assert!(stored_after(Duration::from_secs(60)) > stored_now());
        assert_eq!(stored_after(Duration::MAX).len(), 24);
    }

    #[test]
    fn cost_bounds_are_utc_rounded_up_to_the_millisecond() {
        assert_eq!(
            cost_bound("since", "2026-03-01T10:00:00Z").unwrap(),
            "2026-03-01T10:00:00.000Z"
        );
        assert_eq!(
            cost_bound("since", "2026-03-01T10:00:00+02:00").unwrap(),
            "2026-03-01T08:00:00.000Z"
        );
        assert_eq!(
            cost_bound("until", "2026-03-01T10:00:00.0001Z").unwrap(),
            "2026-03-01T10:00:00.001Z"
        );
        assert_eq!(
            cost_bound("until", "2026-12-31T23:59:59.9999-00:30").unwrap(),
            "2027-01-01T00:30:00.000Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-03-01",
            "2026-03-01T10:00:00",
            "2026-13-01T00:00:00Z",
            "-0001-01-01T00:00:00Z",
        ] {
            assert!(cost_bound("since", bad).is_err(), "{bad}");
        }
    }
}
