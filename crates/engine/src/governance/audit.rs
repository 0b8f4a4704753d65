//! The post-turn audit: compares the tool calls a turn made with the policies in force
//! when it ended. Policies may change while a turn runs or waits for an approval, and a
//! call may have bypassed a check: each mismatch becomes a `policy_violation`. Pure: the
//! caller reads the turn's events and records what comes back.

use std::collections::{HashMap, HashSet};

use agentplane_core::policy::{PolicySet, Timestamp};
use agentplane_core::{Event, EventPayload, FINISH_TASK, ToolErrorKind, ToolStatus};

use crate::governance::rules::{self, Decision, RequestContext};

/// The `policy_violation` events a turn's `events` deserve under `set`. `ctx` holds the
/// turn's agent, tags and client; each call is judged with its own tool and time.
pub fn violations(
    set: &PolicySet,
    events: &[Event],
    ctx: &RequestContext<'_>,
) -> Vec<EventPayload> {
    if set.is_empty() {
        return Vec::new();
    }
    let mut approved_calls = HashSet::new();
    let mut approval_calls = HashMap::new();
    for event in events {
        match &event.payload {
            EventPayload::ApprovalRequested {
                approval_id,
                call_id,
                ..
            } => {
                approval_calls.insert(approval_id.clone(), call_id.clone());
            }
            EventPayload::ApprovalDecided {
                approval_id,
                outcome,
                ..
            } if outcome.runs() => {
                if let Some(call) = approval_calls.get(approval_id) {
                    approved_calls.insert(call.clone());
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for event in events {
        let EventPayload::ToolCallResult {
            call_id,
            tool,
            status,
            error_type,
            ..
        } = &event.payload
        else {
            continue;
        };
        let ran = *status == ToolStatus::Ok
            || matches!(
                error_type,
                Some(ToolErrorKind::ExecutionFailed | ToolErrorKind::Timeout)
            );
        if !ran || tool == FINISH_TASK {
            continue;
        }
        let at = event
            .ts
            .parse::<Timestamp>()
            .unwrap_or_else(|_| Timestamp::now());
        let ctx = ctx.at(at).tool(tool.as_str());
        let violation = match rules::evaluate(set, &ctx) {
            Decision::Deny { policy, reason } => Some((
                policy.to_owned(),
                format!("`{tool}` ran although denied: {reason}"),
            )),
            Decision::RequireApproval { policy } if !approved_calls.contains(call_id) => {
                Some((policy.to_owned(), format!("`{tool}` ran without approval")))
            }
            _ => None,
        };
        if let Some((policy, detail)) = violation {
            found.push(EventPayload::PolicyViolation {
                policy,
                tool: Some(tool.clone()),
                call_id: Some(call_id.clone()),
                detail,
            });
        }
    }
    found
}
