//! One tool call: a new thread for the caller, one turn through the hub, its events
//! followed until `turn_completed`, and the result mapped onto a `CallToolResult`.
//!
//! What the caller got wrong (an unknown agent, a bad workspace, an empty or oversized
//! task: the hub's `INVALID_ARGUMENT` and `NOT_FOUND`) is a JSON-RPC invalid-params
//! error, and the thread created for it is deleted again. Anything that fails once the
//! request is sound (no model, a busy server, a turn ending in error, the step limit or
//! cancellation) is a tool result with `isError` and the error's code and message, as
//! MCP wants tool failures to be visible to the model calling the tool.

use std::sync::Arc;

use agentplane_core::{AgentSpec, ErrorCode, EventPayload, StopReason};
use agentplane_engine::hub::{CreateThread, Hub, HubError};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::tools;
use crate::error::ApiError;

/// Longest thread title taken from a task, in characters.
const MAX_TITLE_CHARS: usize = 80;

/// What a call asks for, read from the request.
pub(super) struct Call<'a> {
    pub(super) client: agentplane_engine::identity::Caller,
    pub(super) agent: &'a AgentSpec,
    pub(super) task: String,
    pub(super) workspace: String,
}

/// Runs the call to its end (or its cancellation through `cancel`).
pub(super) async fn run(
    hub: &Arc<Hub>,
    call: Call<'_>,
    mut progress: Progress,
    cancel: CancellationToken,
) -> Result<CallToolResult, ErrorData> {
    let client = &call.client;
    let thread = match hub
        .create_thread(
            client,
            CreateThread {
                agent: call.agent.name.clone(),
                cwd: call.workspace,
                title: Some(title_of(&call.task)),
            },
        )
        .await
    {
        Ok(thread) => thread,
        Err(e) => return failure(e),
    };
    let started = match hub.start_turn(client, &thread.id, call.task).await {
        Ok(started) => started,
        Err(e) => {
            // Nothing ran: the thread would only be an empty leftover of a refused call.
            if let Err(deleted) = hub.delete_thread(client, &thread.id).await {
                tracing::warn!(thread = %thread.id, error = %deleted, "could not delete the thread of a refused call");
            }
            return failure(e);
        }
    };
    let ids = Ids {
        thread: thread.id.to_string(),
        turn: started.turn.to_string(),
    };
    // Held until the call ends: dropping it early declines the turn's permissions.
    let _guard = started.guard;
    let mut events = started.events;
    let mut last_error: Option<(String, String)> = None;
    let mut cancel_sent = false;
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = cancel.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                // The turn stops promptly and its stream ends with `turn_completed`.
                if let Err(e) = hub.cancel_turn(client, &started.turn).await {
                    tracing::debug!(turn = %started.turn, error = %e, "cancelling an MCP call's turn");
                }
                continue;
            }
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                let error = ApiError::from(e);
                return Ok(error_result(
                    &ids,
                    error.code().as_str(),
                    error.message(),
                    None,
                ));
            }
            None => {
                return Ok(error_result(
                    &ids,
                    ErrorCode::Conflict.as_str(),
                    "the turn's events ended before it completed (the server is shutting down)",
                    None,
                ));
            }
        };
        progress.on_event(&event.payload).await;
        match event.payload {
            EventPayload::Error { code, message } => {
                last_error = Some((code.as_str().to_owned(), message));
            }
            EventPayload::TurnCompleted {
                stop_reason,
                result,
            } => return Ok(completed(call.agent, &ids, stop_reason, result, last_error)),
            _ => {}
        }
    }
}

/// The thread and turn a call ran as, sent in the result's `_meta`.
struct Ids {
    thread: String,
    turn: String,
}

impl Ids {
    fn meta(&self) -> MetaObject {
        let mut meta = Map::new();
        meta.insert("agentplane/thread_id".into(), json!(self.thread));
        meta.insert("agentplane/turn_id".into(), json!(self.turn));
        MetaObject(meta)
    }
}

/// The result of a completed turn.
fn completed(
    agent: &AgentSpec,
    ids: &Ids,
    stop_reason: StopReason,
    result: Value,
    last_error: Option<(String, String)>,
) -> CallToolResult {
    match stop_reason {
        StopReason::Finished if result.is_object() => {
            CallToolResult::structured(result).with_meta(Some(ids.meta()))
        }
        StopReason::Finished => {
            CallToolResult::success(vec![ContentBlock::text(result.to_string())])
                .with_meta(Some(ids.meta()))
        }
        StopReason::TextAnswer => {
            let text = result["text"].as_str().unwrap_or_default().to_owned();
            if tools::output_schema(agent).is_some() {
                // The tool promises structured content of its schema; a text answer has
                // none, so it cannot be passed off as a success.
                return error_result(
                    ids,
                    "TEXT_ANSWER",
                    "the agent answered in text instead of finishing with a result of its \
                     output schema",
                    Some(text),
                );
            }
            CallToolResult::success(vec![ContentBlock::text(text)]).with_meta(Some(ids.meta()))
        }
        StopReason::StepLimit
        | StopReason::Cancelled
        | StopReason::Error
        | StopReason::Interrupted => {
            let (code, message) = last_error.unwrap_or_else(|| {
                let message = match stop_reason {
                    StopReason::StepLimit => "the agent used all its steps without finishing",
                    StopReason::Cancelled => "the call was cancelled",
                    _ => "the turn ended without a result",
                };
                (
                    stop_reason.as_str().to_ascii_uppercase(),
                    message.to_owned(),
                )
            });
            error_result(ids, &code, &message, None)
        }
    }
}

/// A tool result with `isError`: `{"code","message"}` (and the agent's text, if any) as
/// JSON text, so both a model and a program can read it.
fn error_result(ids: &Ids, code: &str, message: &str, text: Option<String>) -> CallToolResult {
    let mut body = json!({"code": code, "message": message});
    if let Some(text) = text {
        body["text"] = json!(text);
    }
    CallToolResult::error(vec![ContentBlock::text(body.to_string())]).with_meta(Some(ids.meta()))
}

/// A hub error before the turn ran: the caller's mistake as invalid params, anything
/// else as a failed tool call (internal causes are logged, never sent).
pub(super) fn failure(error: HubError) -> Result<CallToolResult, ErrorData> {
    let error = ApiError::from(error);
    match error.code() {
        ErrorCode::InvalidArgument | ErrorCode::NotFound => Err(ErrorData::invalid_params(
            error.message().to_owned(),
            Some(json!({"code": error.code().as_str()})),
        )),
        code => Ok(CallToolResult::error(vec![ContentBlock::text(
            json!({"code": code.as_str(), "message": error.message()}).to_string(),
        )])),
    }
}

/// A hub error outside any tool call (listing tools) as a JSON-RPC error with its code.
pub(super) fn error_data(error: HubError) -> ErrorData {
    let error = ApiError::from(error);
    ErrorData::invalid_request(
        error.message().to_owned(),
        Some(json!({"code": error.code().as_str()})),
    )
}

/// A thread title from the task's first line.
fn title_of(task: &str) -> String {
    let line = task.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(MAX_TITLE_CHARS).collect();
    if line.chars().count() > MAX_TITLE_CHARS {
        title.push('…');
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_the_first_line_cut_short() {
        assert_eq!(title_of("fix it\nplease"), "fix it");
        assert_eq!(title_of(""), "");
        let long = title_of(&"é".repeat(200));
        assert_eq!(long.chars().count(), MAX_TITLE_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn hub_refusals_are_invalid_params_and_other_failures_are_tool_errors() {
        let refused = failure(HubError::InvalidArgument("cwd must be absolute".into()))
            .expect_err("invalid params");
        assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        let busy = failure(HubError::ShuttingDown).expect("a tool result");
        assert_eq!(busy.is_error, Some(true));
        let secret = failure(HubError::Store(
            agentplane_engine::ports::StoreError::Backend("/var/secret.db".into()),
        ))
        .expect("a tool result");
        let text = serde_json::to_string(&secret).expect("json");
        assert!(
            text.contains("INTERNAL") && !text.contains("secret"),
            "{text}"
        );
    }
}
