//! Our turns as A2A tasks, by pure functions of what is stored: a task's state, status
//! message and artifact are read from its turn's events (so `GetTask` answers the same
//! after a restart), and a live event becomes the stream items a client sees.
//!
//! | ours | A2A |
//! | --- | --- |
//! | thread | context (`contextId` = thread id) |
//! | turn | task (`id` = turn id) |
//! | turn running | `working` |
//! | `approval_requested` / `permission_required` not yet decided | `input-required` (the status message names the id and how to decide) |
//! | `turn_completed` `finished` / `text_answer` | `completed`, with the result artifact |
//! | `turn_completed` `cancelled` | `canceled` |
//! | `turn_completed` `error` after a turn-level `policy_denied` | `rejected` |
//! | any other end (`error`, `step_limit`, `interrupted`) | `failed` |

use std::collections::BTreeSet;

use agentplane_a2a::wire::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};
use agentplane_core::{Event, EventPayload, StopReason};
use agentplane_engine::ports::{TurnRecord, TurnStatus};
use serde_json::Value;

/// The id of a task's result artifact.
pub(crate) fn result_artifact_id(turn: &str) -> String {
    format!("{turn}-result")
}

/// The id of the artifact streamed text goes to.
fn answer_artifact_id(turn: &str) -> String {
    format!("{turn}-answer")
}

/// A task's whole state from its turn and the turn's stored events.
pub(crate) fn task_of(turn: &TurnRecord, events: &[Event], history_length: Option<i64>) -> Task {
    let turn_id = turn.id.to_string();
    let context = turn.thread_id.to_string();
    let mut text = String::new();
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut decided: BTreeSet<String> = BTreeSet::new();
    let mut turn_refused = false;
    let mut last_error = None;
    let mut completed: Option<(StopReason, Value)> = None;
    for event in events {
        match &event.payload {
            EventPayload::MessageDelta { text: delta } => text.push_str(delta),
            EventPayload::ToolCallPlanned { .. } => text.clear(),
            EventPayload::ApprovalRequested {
                approval_id, tool, ..
            } => pending.push((approval_id.clone(), awaiting_approval(approval_id, tool))),
            EventPayload::PermissionRequired {
                permission_id,
                tool,
                ..
            } => pending.push((
                permission_id.clone(),
                awaiting_permission(permission_id, tool),
            )),
            EventPayload::ApprovalDecided { approval_id, .. } => {
                decided.insert(approval_id.clone());
            }
            EventPayload::PermissionResolved { permission_id, .. } => {
                decided.insert(permission_id.clone());
            }
            EventPayload::PolicyDenied { call_id: None, .. } => turn_refused = true,
            EventPayload::Error { message, .. } => last_error = Some(message.clone()),
            EventPayload::TurnCompleted {
                stop_reason,
                result,
            } => completed = Some((*stop_reason, result.clone())),
            _ => {}
        }
    }
    let timestamp = events.last().map(|e| e.ts.clone());
    let waiting = pending.into_iter().find(|(id, _)| !decided.contains(id));
    let end = match (completed, &turn.status) {
        (Some(end), _) => Some(end),
        (None, TurnStatus::Ended(reason)) => {
            Some((*reason, turn.result.clone().unwrap_or(Value::Null)))
        }
        (None, TurnStatus::Running) => None,
    };
    let (state, message, artifacts) = match end {
        Some((reason, result)) => ended(&turn_id, reason, &result, &text, turn_refused, last_error),
        None => match waiting {
            Some((_, why)) => (TaskState::InputRequired, Some(why), Vec::new()),
            None if events.is_empty() => (TaskState::Submitted, None, Vec::new()),
            None => (TaskState::Working, None, Vec::new()),
        },
    };
    let history = match history_length {
        Some(0) => Vec::new(),
        _ => vec![Message {
            context_id: Some(context.clone()),
            task_id: Some(turn_id.clone()),
            role: Role::User,
            ..Message::agent_text(format!("{turn_id}-input"), turn.input.clone())
        }],
    };
    Task {
        id: turn_id.clone(),
        context_id: context.clone(),
        status: TaskStatus {
            state,
            message: message.map(|m| status_message(&turn_id, &context, m)),
            timestamp,
        },
        artifacts,
        history,
        metadata: None,
    }
}

/// State, status message and artifacts of an ended turn.
fn ended(
    turn: &str,
    reason: StopReason,
    result: &Value,
    text: &str,
    turn_refused: bool,
    last_error: Option<String>,
) -> (TaskState, Option<String>, Vec<Artifact>) {
    match reason {
        StopReason::Finished | StopReason::TextAnswer => {
            let answer = answer_text(reason, result, text);
            (
                TaskState::Completed,
                Some(answer),
                vec![result_artifact(turn, reason, result, text)],
            )
        }
        StopReason::Cancelled => (
            TaskState::Canceled,
            Some("the task was cancelled".into()),
            Vec::new(),
        ),
        StopReason::Error if turn_refused => (
            TaskState::Rejected,
            Some(last_error.unwrap_or_else(|| "a policy refused the task".into())),
            Vec::new(),
        ),
        StopReason::Error => (
            TaskState::Failed,
            Some(last_error.unwrap_or_else(|| "the task failed".into())),
            Vec::new(),
        ),
        StopReason::StepLimit => (
            TaskState::Failed,
            Some("the agent used all the model calls it is allowed".into()),
            Vec::new(),
        ),
        StopReason::Interrupted => (
            TaskState::Failed,
            Some("the server stopped while the task ran".into()),
            Vec::new(),
        ),
    }
}

/// The text of a completed task: a text answer's text, else what the model wrote
/// last, else the result as JSON.
fn answer_text(reason: StopReason, result: &Value, text: &str) -> String {
    if reason == StopReason::TextAnswer
        && let Some(answer) = result.get("text").and_then(Value::as_str)
    {
        return answer.to_owned();
    }
    if !text.trim().is_empty() {
        return text.to_owned();
    }
    result.to_string()
}

/// The result artifact: `finish_task`'s payload as a data part, plus its text.
pub(crate) fn result_artifact(
    turn: &str,
    reason: StopReason,
    result: &Value,
    text: &str,
) -> Artifact {
    let answer = answer_text(reason, result, text);
    let parts = match reason {
        StopReason::Finished => vec![Part::data(result.clone()), Part::text(answer)],
        _ => vec![Part::text(answer)],
    };
    Artifact {
        artifact_id: result_artifact_id(turn),
        name: Some("result".into()),
        description: Some(match reason {
            StopReason::Finished => "the agent's finish_task result".into(),
            _ => "the agent's answer".into(),
        }),
        parts,
        metadata: None,
        extensions: Vec::new(),
    }
}

fn awaiting_approval(id: &str, tool: &str) -> String {
    format!("waiting for approval {id} of a call to {tool}; decide it with POST /v1/approvals/{id}")
}

fn awaiting_permission(id: &str, tool: &str) -> String {
    format!("waiting for permission {id} to call {tool}; answer it with POST /v1/permissions/{id}")
}

/// An agent's status message about a task.
fn status_message(turn: &str, context: &str, text: String) -> Message {
    Message {
        context_id: Some(context.to_owned()),
        task_id: Some(turn.to_owned()),
        ..Message::agent_text(format!("{turn}-status"), text)
    }
}

/// What a live turn's events become on a stream, in order.
pub(crate) struct StreamMapper {
    turn: String,
    context: String,
    text: String,
    answer_started: bool,
    pending: Vec<String>,
    turn_refused: bool,
    last_error: Option<String>,
    /// Set once a terminal or waiting status was sent: the stream ends there.
    pub(crate) done: bool,
}

impl StreamMapper {
    pub(crate) fn new(turn: &str, context: &str) -> Self {
        Self {
            turn: turn.to_owned(),
            context: context.to_owned(),
            text: String::new(),
            answer_started: false,
            pending: Vec::new(),
            turn_refused: false,
            last_error: None,
            done: false,
        }
    }

    fn status(&self, state: TaskState, text: Option<String>, ts: &str) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.turn.clone(),
            context_id: self.context.clone(),
            status: TaskStatus {
                state,
                message: text.map(|t| status_message(&self.turn, &self.context, t)),
                timestamp: Some(ts.to_owned()),
            },
            metadata: None,
        })
    }

    fn artifact(&self, artifact: Artifact, append: bool, last_chunk: bool) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.turn.clone(),
            context_id: self.context.clone(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        })
    }

    /// The items one event of the turn becomes (none for most).
    pub(crate) fn map(&mut self, event: &Event) -> Vec<StreamResponse> {
        if event.turn_id.as_str() != self.turn || self.done {
            return Vec::new();
        }
        let ts = event.ts.as_str();
        match &event.payload {
            EventPayload::TurnStarted { .. } => vec![self.status(TaskState::Working, None, ts)],
            EventPayload::MessageDelta { text } => {
                self.text.push_str(text);
                let append = self.answer_started;
                self.answer_started = true;
                vec![self.artifact(
                    Artifact {
                        artifact_id: answer_artifact_id(&self.turn),
                        name: Some("answer".into()),
                        description: None,
                        parts: vec![Part::text(text.clone())],
                        metadata: None,
                        extensions: Vec::new(),
                    },
                    append,
                    false,
                )]
            }
            EventPayload::ToolCallPlanned { tool, .. } => {
                self.text.clear();
                vec![self.status(TaskState::Working, Some(format!("calling {tool}")), ts)]
            }
            EventPayload::ApprovalRequested {
                approval_id, tool, ..
            } => {
                self.pending.push(approval_id.clone());
                self.done = true;
                vec![self.status(
                    TaskState::InputRequired,
                    Some(awaiting_approval(approval_id, tool)),
                    ts,
                )]
            }
            EventPayload::PermissionRequired {
                permission_id,
                tool,
                ..
            } => {
                self.pending.push(permission_id.clone());
                self.done = true;
                vec![self.status(
                    TaskState::InputRequired,
                    Some(awaiting_permission(permission_id, tool)),
                    ts,
                )]
            }
            EventPayload::ApprovalDecided { .. } | EventPayload::PermissionResolved { .. } => {
                vec![self.status(TaskState::Working, None, ts)]
            }
            EventPayload::PolicyDenied { call_id: None, .. } => {
                self.turn_refused = true;
                Vec::new()
            }
            EventPayload::Error { message, .. } => {
                self.last_error = Some(message.clone());
                Vec::new()
            }
            EventPayload::TurnCompleted {
                stop_reason,
                result,
            } => {
                self.done = true;
                let (state, message, artifacts) = ended(
                    &self.turn,
                    *stop_reason,
                    result,
                    &self.text,
                    self.turn_refused,
                    self.last_error.take(),
                );
                let mut items: Vec<StreamResponse> = artifacts
                    .into_iter()
                    .map(|a| self.artifact(a, false, true))
                    .collect();
                items.push(self.status(state, message, ts));
                items
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use agentplane_core::{ApprovalOutcome, ThreadId, TurnId};
    use serde_json::json;

    use super::*;

    fn turn(status: TurnStatus) -> TurnRecord {
        TurnRecord {
            id: TurnId::new(),
            thread_id: ThreadId::new(),
            input: "review it".into(),
            status,
            created_at: "2026-01-01T00:00:00Z".into(),
            ended_at: None,
            internal: false,
            result: None,
            agent_version: None,
        }
    }

    fn events(turn: &TurnRecord, payloads: Vec<EventPayload>) -> Vec<Event> {
        payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Event {
                thread_id: turn.thread_id.clone(),
                turn_id: turn.id.clone(),
                seq: i as u64 + 1,
                ts: format!("2026-01-01T00:00:0{i}Z"),
                payload,
            })
            .collect()
    }

    fn started() -> EventPayload {
        EventPayload::TurnStarted {
            agent: "reviewer".into(),
            input: "review it".into(),
            model: "m".into(),
            workspace: "/w".into(),
            agent_version: None,
            shadow_of: None,
        }
    }

    fn completed(stop_reason: StopReason, result: Value) -> EventPayload {
        EventPayload::TurnCompleted {
            stop_reason,
            result,
        }
    }

    fn text_of(task: &Task) -> String {
        match &task
            .status
            .message
            .as_ref()
            .expect("a status message")
            .parts[0]
            .content
        {
            agentplane_a2a::wire::PartContent::Text(text) => text.clone(),
            other => panic!("not text: {other:?}"),
        }
    }

    #[test]
    fn a_finished_turn_is_a_completed_task_with_its_result_as_artifact() {
        let record = turn(TurnStatus::Ended(StopReason::Finished));
        let stored = events(
            &record,
            vec![
                started(),
                completed(StopReason::Finished, json!({"verdict": "ship"})),
            ],
        );
        let task = task_of(&record, &stored, None);
        assert_eq!(task.id, record.id.to_string());
        assert_eq!(task.context_id, record.thread_id.to_string());
        assert_eq!(task.status.state, TaskState::Completed);
        assert_eq!(
            task.status.timestamp.as_deref(),
            Some("2026-01-01T00:00:01Z")
        );
        let artifact = &task.artifacts[0];
        assert_eq!(artifact.artifact_id, format!("{}-result", record.id));
        assert_eq!(
            artifact.parts[0].content,
            agentplane_a2a::wire::PartContent::Data(json!({"verdict": "ship"}))
        );
        assert_eq!(
            artifact.parts[1].content,
            agentplane_a2a::wire::PartContent::Text(r#"{"verdict":"ship"}"#.into())
        );
        assert_eq!(task.history.len(), 1);
        assert_eq!(task.history[0].role, Role::User);
        assert!(task_of(&record, &stored, Some(0)).history.is_empty());
    }

    #[test]
    fn a_text_answer_is_text_only() {
        let record = turn(TurnStatus::Ended(StopReason::TextAnswer));
        let stored = events(
            &record,
            vec![
                started(),
                EventPayload::MessageDelta {
                    text: "Fine.".into(),
                },
                completed(StopReason::TextAnswer, json!({"text": "Fine."})),
            ],
        );
        let task = task_of(&record, &stored, None);
        assert_eq!(task.status.state, TaskState::Completed);
        assert_eq!(text_of(&task), "Fine.");
        assert_eq!(task.artifacts[0].parts.len(), 1);
    }

    #[test]
    fn an_undecided_approval_is_input_required_and_a_decided_one_is_working() {
        let record = turn(TurnStatus::Running);
        let requested = EventPayload::ApprovalRequested {
            approval_id: "apr_1".into(),
            call_id: "c1".into(),
            tool: "list_files".into(),
            arguments: json!({}),
            args_preview_hash: "h".into(),
            policy: "p".into(),
            approvers: Vec::new(),
            expires_at: "later".into(),
            explanation: None,
        };
        let mut payloads = vec![started(), requested];
        let task = task_of(&record, &events(&record, payloads.clone()), None);
        assert_eq!(task.status.state, TaskState::InputRequired);
        assert!(
            text_of(&task).contains("POST /v1/approvals/apr_1"),
            "{task:?}"
        );
        payloads.push(EventPayload::ApprovalDecided {
            approval_id: "apr_1".into(),
            outcome: ApprovalOutcome::Approved,
            arguments: None,
            feedback: None,
            by: "alice".into(),
            decider: None,
        });
        let task = task_of(&record, &events(&record, payloads), None);
        assert_eq!(task.status.state, TaskState::Working);
        assert_eq!(
            task_of(&record, &[], None).status.state,
            TaskState::Submitted
        );
    }

    #[test]
    fn ends_map_to_canceled_rejected_and_failed() {
        let cases = [
            (StopReason::Cancelled, false, TaskState::Canceled),
            (StopReason::Error, true, TaskState::Rejected),
            (StopReason::Error, false, TaskState::Failed),
            (StopReason::StepLimit, false, TaskState::Failed),
            (StopReason::Interrupted, false, TaskState::Failed),
        ];
        for (reason, refused, state) in cases {
            let record = turn(TurnStatus::Ended(reason));
            let mut payloads = vec![started()];
            if refused {
                payloads.push(EventPayload::PolicyDenied {
                    policy: "night".into(),
                    policy_type: "time_window".into(),
                    tool: None,
                    call_id: None,
                    detail: "closed".into(),
                    explanation: None,
                });
            }
            payloads.push(EventPayload::Error {
                code: agentplane_core::ErrorCode::Internal,
                message: "it broke".into(),
            });
            payloads.push(completed(reason, Value::Null));
            let task = task_of(&record, &events(&record, payloads), None);
            assert_eq!(task.status.state, state, "{reason:?}");
            assert!(task.artifacts.is_empty());
        }
        // An ended turn whose events were not read still has its state.
        let record = turn(TurnStatus::Ended(StopReason::Cancelled));
        assert_eq!(
            task_of(&record, &[], None).status.state,
            TaskState::Canceled
        );
    }

    #[test]
    fn a_stream_sends_text_chunks_then_the_result_then_the_end() {
        let record = turn(TurnStatus::Running);
        let stored = events(
            &record,
            vec![
                started(),
                EventPayload::MessageDelta { text: "Lo".into() },
                EventPayload::MessageDelta { text: "oks".into() },
                completed(StopReason::TextAnswer, json!({"text": "Looks"})),
            ],
        );
        let mut mapper = StreamMapper::new(record.id.as_str(), record.thread_id.as_str());
        let items: Vec<StreamResponse> = stored.iter().flat_map(|e| mapper.map(e)).collect();
        assert!(mapper.done);
        assert!(
            matches!(&items[0], StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Working)
        );
        assert!(
            matches!(&items[1], StreamResponse::ArtifactUpdate(u) if !u.append && !u.last_chunk)
        );
        assert!(matches!(&items[2], StreamResponse::ArtifactUpdate(u) if u.append));
        assert!(matches!(&items[3], StreamResponse::ArtifactUpdate(u)
            if u.last_chunk && u.artifact.artifact_id.ends_with("-result")));
        assert!(
            matches!(&items[4], StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Completed)
        );
        assert_eq!(items.len(), 5);
        // Events of another turn, and anything after the end, map to nothing.
        assert!(mapper.map(&stored[1]).is_empty());
    }
}
