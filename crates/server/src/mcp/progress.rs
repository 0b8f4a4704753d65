//! Progress notifications of a running call: one per step of the turn, as a short line
//! a person can read ("calling read_file", "read_file: ok in 3 ms").
//!
//! Only sent when the request carried a `progressToken`. `progress` counts the steps
//! sent so far, so it only grows. Messages name tools, statuses and ids, never a tool
//! call's arguments or output: those may hold secrets and belong in the event log.

use agentplane_core::{EventPayload, ToolStatus};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

/// Longest tool name quoted in a message, in characters.
const MAX_NAME_CHARS: usize = 64;

/// Sends the progress of one call.
pub(super) struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    steps: u32,
}

impl Progress {
    pub(super) fn new(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        Self {
            peer,
            token,
            steps: 0,
        }
    }

    /// Reports an event of the turn, if it is a step worth a line.
    pub(super) async fn on_event(&mut self, payload: &EventPayload) {
        let Some(token) = &self.token else {
            return;
        };
        let Some(message) = line_of(payload) else {
            return;
        };
        self.steps += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.steps))
            .with_message(message);
        if let Err(e) = self.peer.notify_progress(notification).await {
            // The client went away; the call's cancellation handles the rest.
            tracing::debug!(error = %e, "a progress notification could not be sent");
        }
    }
}

/// The line for an event, `None` for events that are not steps (streamed text).
fn line_of(payload: &EventPayload) -> Option<String> {
    Some(match payload {
        EventPayload::TurnStarted { agent, model, .. } => {
            format!("{} started on {}", short(agent), short(model))
        }
        EventPayload::MessageDelta { .. }
        | EventPayload::TurnCompleted { .. }
        | EventPayload::A2aRequest { .. } => return None,
        EventPayload::ToolCallPlanned { tool, .. } => format!("calling {}", short(tool)),
        EventPayload::ToolCallArguments { tool, .. } => {
            format!("{}: arguments sent", short(tool))
        }
        EventPayload::WorkspaceChanged {
            created,
            modified,
            deleted,
            ..
        } => format!(
            "workspace: {} created, {} modified, {} deleted",
            created.len(),
            modified.len(),
            deleted.len()
        ),
        EventPayload::ToolCallResult {
            tool,
            status,
            latency_ms,
            ..
        } => match status {
            ToolStatus::Ok => format!("{}: ok in {latency_ms} ms", short(tool)),
            ToolStatus::Error => format!("{}: failed after {latency_ms} ms", short(tool)),
        },
        EventPayload::PermissionRequired {
            permission_id,
            tool,
            ..
        } => format!(
            "waiting for permission {permission_id} to call {}",
            short(tool)
        ),
        EventPayload::PermissionResolved {
            permission_id,
            decision,
            ..
        } => format!("permission {permission_id} {}", decision.as_str()),
        EventPayload::Egress {
            destination,
            allowed,
            ..
        } => format!(
            "network: {} {}",
            if *allowed { "reached" } else { "refused" },
            short(destination)
        ),
        EventPayload::SecurityEvent { event_type, .. } => {
            format!("refused: {}", short(event_type))
        }
        EventPayload::Usage {
            input_tokens,
            output_tokens,
            ..
        } => format!("model answered: {input_tokens} tokens in, {output_tokens} out"),
        EventPayload::Cost { usd, .. } => format!("model call cost ${usd:.6}"),
        EventPayload::ApprovalRequested {
            approval_id, tool, ..
        } => format!("waiting for approval {approval_id} to call {}", short(tool)),
        EventPayload::ApprovalDecided {
            approval_id,
            outcome,
            ..
        } => format!("approval {approval_id} {}", outcome.as_str()),
        EventPayload::PolicyViolation { policy, .. } => {
            format!("policy violation: {}", short(policy))
        }
        EventPayload::PolicyDenied {
            policy,
            policy_type,
            ..
        } => {
            format!("refused by {} policy {}", short(policy_type), short(policy))
        }
        EventPayload::PolicyAudited { policy, would, .. } => {
            format!("audit: policy {} would {}", short(policy), short(would))
        }
        EventPayload::ContentFinding {
            detector, action, ..
        } => format!("content: {} {}", short(detector), short(action)),
        EventPayload::ProviderFailover { from, to, code, .. } => {
            format!(
                "provider {} failed ({code}); trying {}",
                short(from),
                short(to)
            )
        }
        EventPayload::Plan { entries } => {
            format!("plan of {} step(s)", entries.as_array().map_or(0, Vec::len))
        }
        EventPayload::Error { code, .. } => format!("error {code}"),
    })
}

/// A name cut to a readable length.
fn short(name: &str) -> String {
    if name.chars().count() <= MAX_NAME_CHARS {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(MAX_NAME_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lines_never_carry_arguments_or_output() {
        let planned = EventPayload::ToolCallPlanned {
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: json!({"path": "secret.txt", "content": "hunter2"}),
            args_preview_hash: "ab".into(),
            title: None,
            recovered: false,
        };
        let line = line_of(&planned).expect("a step");
        assert_eq!(line, "calling write_file");
        let result = EventPayload::ToolCallResult {
            call_id: "c1".into(),
            tool: "write_file".into(),
            status: ToolStatus::Error,
            latency_ms: 7,
            error_type: None,
            output: "hunter2".into(),
            truncated: false,
            args_preview_hash: "ab".into(),
        };
        let line = line_of(&result).expect("a step");
        assert!(!line.contains("hunter2"), "{line}");
        assert!(line_of(&EventPayload::MessageDelta { text: "x".into() }).is_none());
        assert_eq!(short(&"t".repeat(100)).chars().count(), MAX_NAME_CHARS + 1);
    }
}
