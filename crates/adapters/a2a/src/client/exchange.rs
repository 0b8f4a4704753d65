//! One prompt's exchange with a remote agent: a message, then the task's updates until
//! it ends or pauses; a pause for input becomes a question to our side (approved: a
//! follow-up message on the same task; declined: the task is cancelled); our cancel
//! becomes `CancelTask`.
//!
//! The exchange reports to a [`Sink`]: an agent turn's (text as `ToTurn` updates, the
//! question as a permission ask, `a2a_request` records) or a tool call's (text
//! collected, questions declined). Every request sent is recorded as an `a2a_request`
//! (direction `out`: method, task, context, version, outcome; never content).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentplane_core::EventPayload;
use agentplane_engine::ports::external::{ExternalError, ExternalUsage};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::card::Remote;
use super::http::{CallError, shown};
use super::remote::{Connection, Method};
use crate::wire::{self, PartContent, StreamResponse, TaskState};

/// How often a task still working after its answer is asked for again.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// What the remote agent asked when its task paused.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub task: String,
    /// `input-required` or `auth-required`.
    pub state: &'static str,
    /// The status message's text, if it had one.
    pub text: String,
}

/// Where an exchange reports.
#[async_trait]
pub trait Sink: Send {
    /// Text of the remote's answer, as it arrives.
    async fn text(&mut self, text: String);
    /// A record for the event log (`a2a_request`).
    async fn record(&mut self, payload: EventPayload);
    /// The remote paused for input: `true` only for an explicit approval.
    async fn ask(&mut self, question: Question) -> bool;
}

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Completed,
    /// Our cancel, or the remote cancelled its task.
    Cancelled,
    /// The remote paused for input and our side declined; its task was cancelled.
    Declined,
}

/// The follow-up message sent when a paused task's question is approved.
pub const APPROVED_TEXT: &str =
    "Approved: the person you asked agrees. Please go ahead and finish the task.";

/// One prompt's exchange.
pub struct Exchange<'a> {
    connection: &'a Connection,
    remote: Remote,
    /// Our thread, whose remote context is continued.
    thread: String,
    task: Option<String>,
    context: Option<String>,
    /// The last usage the remote reported.
    pub usage: Option<ExternalUsage>,
    /// The remote task's id, shared with whoever cancels it if this exchange is dropped
    /// mid-task (a tool call's timeout).
    task_cell: Arc<Mutex<Option<String>>>,
    /// The artifact text seen last, to break lines between artifacts.
    last_artifact: Option<String>,
    wrote_text: bool,
    /// Bytes of each artifact's text already reported, so a whole task read again
    /// (`GetTask` while polling) reports only what is new.
    reported: HashMap<String, usize>,
    /// The status message last reported (by id), not reported twice.
    last_status: Option<String>,
}

/// What one request's answer came to.
enum Outcome {
    Ended(TaskState, String),
    Paused(Question),
    Cancelled,
}

impl<'a> Exchange<'a> {
    pub fn new(connection: &'a Connection, remote: Remote, thread: String) -> Self {
        let context = connection.context_of(&thread);
        Self {
            connection,
            remote,
            thread,
            task: None,
            context,
            usage: None,
            task_cell: Arc::new(Mutex::new(None)),
            last_artifact: None,
            wrote_text: false,
            reported: HashMap::new(),
            last_status: None,
        }
    }

    /// The remote task's id as it becomes known; `None` once the task ended.
    pub fn task_cell(&self) -> Arc<Mutex<Option<String>>> {
        self.task_cell.clone()
    }

    /// Whether the remote answered anything of this exchange (a task, text, usage):
    /// it was reached, and may have spent.
    pub fn reached(&self) -> bool {
        self.task.is_some() || self.wrote_text || self.usage.is_some()
    }

    /// Whether the thread continues a remote context (so the earlier conversation
    /// need not be sent along).
    pub fn continues_context(&self) -> bool {
        self.context.is_some()
    }

    /// Runs the exchange for `text` to its end.
    pub async fn run(
        &mut self,
        text: String,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> Result<Finish, ExternalError> {
        let finish = self.exchange(text, sink, cancel).await;
        // Ended one way or another: nothing is left to cancel on drop.
        *self.task_cell.lock().unwrap_or_else(|e| e.into_inner()) = None;
        finish
    }

    async fn exchange(
        &mut self,
        text: String,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> Result<Finish, ExternalError> {
        let mut text = text;
        loop {
            let message = wire::Message {
                message_id: uuid::Uuid::now_v7().to_string(),
                context_id: self.context.clone(),
                task_id: self.task.clone(),
                role: wire::Role::User,
                parts: vec![wire::Part::text(text)],
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            };
            let deadline = Instant::now() + self.connection.config.task_timeout;
            let outcome = self.send(&message, sink, cancel, deadline).await?;
            match outcome {
                Outcome::Cancelled => {
                    self.cancel_remote(sink).await;
                    return Ok(Finish::Cancelled);
                }
                Outcome::Ended(TaskState::Completed, _) => return Ok(Finish::Completed),
                Outcome::Ended(TaskState::Canceled, _) => return Ok(Finish::Cancelled),
                Outcome::Ended(state, why) => {
                    let why = if why.is_empty() {
                        "it gave no reason".to_owned()
                    } else {
                        shown(&why)
                    };
                    return Err(ExternalError::Protocol(format!(
                        "the remote A2A agent `{}` ended its task as {}: {why}",
                        self.connection.config.name,
                        state_name(state)
                    )));
                }
                Outcome::Paused(question) => {
                    if sink.ask(question).await && !cancel.is_cancelled() {
                        text = APPROVED_TEXT.to_owned();
                        continue;
                    }
                    self.cancel_remote(sink).await;
                    return Ok(if cancel.is_cancelled() {
                        Finish::Cancelled
                    } else {
                        Finish::Declined
                    });
                }
            }
        }
    }

    /// Sends one message and follows its answer to the task's end or pause.
    async fn send(
        &mut self,
        message: &wire::Message,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Outcome, ExternalError> {
        let mut method = if self.remote.streaming {
            Method::Stream
        } else {
            Method::Send
        };
        let mut last: Option<Outcome> = None;
        let result: Result<(), CallError> = async {
            if !self.remote.streaming {
                let answer = tokio::select! {
                    answer = self.connection.send(&self.remote, message) => answer?,
                    _ = cancel.cancelled() => { last = Some(Outcome::Cancelled); return Ok(()) }
                    _ = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout),
                };
                last = self.observe(answer, sink).await;
                return Ok(());
            }
            let mut events = tokio::select! {
                events = self.connection.stream(&self.remote, message) => events?,
                _ = cancel.cancelled() => { last = Some(Outcome::Cancelled); return Ok(()) }
                _ = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout),
            };
            loop {
                let item = tokio::select! {
                    item = events.next() => item,
                    _ = cancel.cancelled() => { last = Some(Outcome::Cancelled); return Ok(()) }
                    _ = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout),
                };
                let Some(item) = item else { return Ok(()) };
                let item = super::remote::decode(self.remote.version, item?)?;
                if let Some(outcome) = self.observe(item, sink).await {
                    let done = !matches!(outcome, Outcome::Ended(TaskState::Working, _));
                    last = Some(outcome);
                    if done {
                        return Ok(());
                    }
                }
            }
        }
        .await;
        // A remote that answered before its task ended (a non-blocking `SendMessage`,
        // a stream that closed early) is asked for the task until it ends or pauses.
        let still_working = matches!(last, Some(Outcome::Ended(TaskState::Working, _)) | None);
        let result = match result {
            Ok(()) if still_working && self.task.is_some() => {
                self.record(sink, method, "working".to_owned()).await;
                method = Method::Get;
                self.poll(sink, cancel, deadline, &mut last).await
            }
            other => other,
        };
        let outcome = match (&result, &last) {
            (Err(e), _) => e.outcome(),
            (Ok(()), Some(Outcome::Ended(state, _))) => state_name(*state).to_owned(),
            (Ok(()), Some(Outcome::Paused(q))) => q.state.to_owned(),
            (Ok(()), Some(Outcome::Cancelled)) => "cancelled_by_us".to_owned(),
            (Ok(()), None) => "ended_early".to_owned(),
        };
        self.record(sink, method, outcome).await;
        if let Err(e) = result {
            self.connection.forget_card().await;
            return Err(self.error(e));
        }
        match last {
            Some(Outcome::Ended(TaskState::Working, _)) | None => {
                Err(ExternalError::Protocol(format!(
                    "the remote A2A agent `{}` ended its answer before its task ended",
                    self.connection.config.name
                )))
            }
            Some(outcome) => Ok(outcome),
        }
    }

    /// Asks for the task (`GetTask`) every [`POLL_EVERY`] until it ends or pauses, our
    /// cancel, or the deadline.
    async fn poll(
        &mut self,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
        deadline: Instant,
        last: &mut Option<Outcome>,
    ) -> Result<(), CallError> {
        let Some(task) = self.task.clone() else {
            return Ok(());
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL_EVERY) => {}
                _ = cancel.cancelled() => { *last = Some(Outcome::Cancelled); return Ok(()) }
                _ = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout),
            }
            let answer = tokio::select! {
                answer = self.connection.get(&self.remote, &task) => answer?,
                _ = cancel.cancelled() => { *last = Some(Outcome::Cancelled); return Ok(()) }
                _ = tokio::time::sleep_until(deadline) => return Err(CallError::Timeout),
            };
            let outcome = self.observe(answer, sink).await;
            let working = matches!(outcome, Some(Outcome::Ended(TaskState::Working, _)) | None);
            if outcome.is_some() {
                *last = outcome;
            }
            if !working {
                return Ok(());
            }
        }
    }

    /// Takes in one item of the answer: ids, text, usage; the task's state when the
    /// item says (`Ended(Working)` while it works).
    async fn observe(&mut self, item: StreamResponse, sink: &mut dyn Sink) -> Option<Outcome> {
        match item {
            StreamResponse::Message(message) => {
                self.ids(message.task_id.as_deref(), message.context_id.as_deref());
                self.usage_in(message.metadata.as_ref());
                let text = parts_text(&message.parts);
                self.emit(sink, text).await;
                // A direct message answers the request without a task.
                Some(Outcome::Ended(TaskState::Completed, String::new()))
            }
            StreamResponse::Task(task) => {
                self.ids(Some(&task.id), Some(&task.context_id));
                self.usage_in(task.metadata.as_ref());
                for artifact in &task.artifacts {
                    self.usage_in(artifact.metadata.as_ref());
                    let text = parts_text(&artifact.parts);
                    let known = self
                        .reported
                        .get(&artifact.artifact_id)
                        .copied()
                        .unwrap_or(0);
                    let new = match text.get(known..) {
                        Some(rest) if known <= text.len() => rest.to_owned(),
                        _ => String::new(),
                    };
                    self.reported
                        .insert(artifact.artifact_id.clone(), text.len().max(known));
                    self.artifact_text(sink, &artifact.artifact_id, new).await;
                }
                self.status(sink, task.status).await
            }
            StreamResponse::StatusUpdate(update) => {
                self.ids(Some(&update.task_id), Some(&update.context_id));
                self.usage_in(update.metadata.as_ref());
                self.status(sink, update.status).await
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.ids(Some(&update.task_id), Some(&update.context_id));
                self.usage_in(update.metadata.as_ref());
                self.usage_in(update.artifact.metadata.as_ref());
                let text = parts_text(&update.artifact.parts);
                let id = update.artifact.artifact_id.clone();
                let known = if update.append {
                    self.reported.get(&id).copied().unwrap_or(0)
                } else {
                    0
                };
                self.reported.insert(id, known + text.len());
                if update.append
                    && self.last_artifact.as_deref() == Some(&update.artifact.artifact_id)
                {
                    self.emit(sink, text).await;
                } else {
                    self.artifact_text(sink, &update.artifact.artifact_id, text)
                        .await;
                }
                None
            }
        }
    }

    async fn status(&mut self, sink: &mut dyn Sink, status: wire::TaskStatus) -> Option<Outcome> {
        let repeated = status
            .message
            .as_ref()
            .is_some_and(|m| self.last_status.as_deref() == Some(m.message_id.as_str()));
        let text = status
            .message
            .as_ref()
            .map(|m| {
                self.usage_in(m.metadata.as_ref());
                self.last_status = Some(m.message_id.clone());
                parts_text(&m.parts)
            })
            .unwrap_or_default();
        // The same status read again (polling) says nothing new.
        let shown = if repeated {
            String::new()
        } else {
            text.clone()
        };
        match status.state {
            TaskState::InputRequired | TaskState::AuthRequired => Some(Outcome::Paused(Question {
                task: self.task.clone().unwrap_or_default(),
                state: state_name(status.state),
                text,
            })),
            TaskState::Failed | TaskState::Rejected => Some(Outcome::Ended(status.state, text)),
            TaskState::Completed | TaskState::Canceled => {
                self.emit(sink, shown).await;
                Some(Outcome::Ended(status.state, String::new()))
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unspecified => {
                self.emit(sink, shown).await;
                Some(Outcome::Ended(TaskState::Working, String::new()))
            }
        }
    }

    /// Text of an artifact other than the last one: on a line of its own.
    async fn artifact_text(&mut self, sink: &mut dyn Sink, id: &str, text: String) {
        if self.last_artifact.as_deref() != Some(id) && self.wrote_text && !text.is_empty() {
            sink.text("\n".to_owned()).await;
        }
        self.last_artifact = Some(id.to_owned());
        self.emit(sink, text).await;
    }

    async fn emit(&mut self, sink: &mut dyn Sink, text: String) {
        if text.is_empty() {
            return;
        }
        self.wrote_text = true;
        sink.text(text).await;
    }

    fn ids(&mut self, task: Option<&str>, context: Option<&str>) {
        if let Some(task) = task.filter(|t| !t.is_empty()) {
            self.task = Some(task.to_owned());
            *self.task_cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(task.to_owned());
        }
        if let Some(context) = context.filter(|c| !c.is_empty()) {
            self.context = Some(context.to_owned());
            self.connection.remember_context(&self.thread, context);
        }
    }

    /// Usage in metadata: our documented `usage` object (`input_tokens`,
    /// `output_tokens`, `cost_usd`), else Google ADK's `adk_usage_metadata` (also as
    /// kagent's `kagent_usage_metadata`: `promptTokenCount`, `candidatesTokenCount`).
    fn usage_in(&mut self, metadata: Option<&Value>) {
        let Some(metadata) = metadata else { return };
        let found = metadata.get("usage").and_then(usage_of).or_else(|| {
            ["adk_usage_metadata", "kagent_usage_metadata"]
                .iter()
                .find_map(|key| metadata.get(*key).and_then(adk_usage_of))
        });
        if let Some(usage) = found {
            self.usage = Some(usage);
        }
    }

    /// Cancels the remote task, if there is one, and records the request.
    async fn cancel_remote(&mut self, sink: &mut dyn Sink) {
        let Some(task) = self.task.clone() else {
            return;
        };
        let outcome = match self.connection.cancel(&self.remote, &task).await {
            Ok(()) => "ok".to_owned(),
            Err(e) => {
                tracing::warn!(agent = %self.connection.config.name, error = %e, "the remote task could not be cancelled");
                e.outcome()
            }
        };
        self.record(sink, Method::Cancel, outcome).await;
    }

    async fn record(&self, sink: &mut dyn Sink, method: Method, outcome: String) {
        sink.record(EventPayload::A2aRequest {
            direction: "out".to_owned(),
            method: method.name(self.remote.version).to_owned(),
            task: self.task.clone(),
            context: self.context.clone(),
            protocol_version: self.remote.version.as_str().to_owned(),
            outcome,
        })
        .await;
    }

    fn error(&self, error: CallError) -> ExternalError {
        let name = &self.connection.config.name;
        match error {
            CallError::Timeout => ExternalError::Timeout(format!(
                "the remote A2A agent `{name}` did not answer within {} s",
                self.connection.config.task_timeout.as_secs()
            )),
            CallError::Status(401 | 403, _) => ExternalError::Protocol(format!(
                "the remote A2A agent `{name}` refused our credential ({error}); check \
                 `[agents.{name}.a2a] api_key`"
            )),
            other => ExternalError::Protocol(format!("the remote A2A agent `{name}`: {other}")),
        }
    }
}

/// The `a2a_request` record of a card fetch.
pub fn card_record(version: &str, outcome: &str) -> EventPayload {
    EventPayload::A2aRequest {
        direction: "out".to_owned(),
        method: "GetAgentCard".to_owned(),
        task: None,
        context: None,
        protocol_version: version.to_owned(),
        outcome: outcome.to_owned(),
    }
}

/// The state as the spec's lowercase names write it.
pub fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unspecified",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input-required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth-required",
    }
}

/// Parts as text: text as it is, data as JSON, a URL as itself, raw bytes by size.
pub fn parts_text(parts: &[wire::Part]) -> String {
    parts
        .iter()
        .map(|part| match &part.content {
            PartContent::Text(text) => text.clone(),
            PartContent::Data(data) => data.to_string(),
            PartContent::Url(url) => url.clone(),
            PartContent::Raw(raw) => format!(
                "[{} bytes of {}]",
                raw.len() / 4 * 3,
                part.media_type.as_deref().unwrap_or("data")
            ),
        })
        .collect::<Vec<_>>()
        .join("")
}

/// A `usage` object: token counts (integers, or numbers the SDK wrote as floats) and an
/// optional `cost_usd`; anything else is no usage.
fn usage_of(usage: &Value) -> Option<ExternalUsage> {
    let count = |key: &str| {
        let value = usage.get(key)?;
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(|f| f as u64)
        })
    };
    let input_tokens = count("input_tokens")?;
    let output_tokens = count("output_tokens").unwrap_or(0);
    let cost_usd_micros = usage
        .get("cost_usd")
        .and_then(Value::as_f64)
        .filter(|f| f.is_finite() && *f >= 0.0)
        .map(|usd| (usd * 1_000_000.0).round() as u64);
    Some(ExternalUsage {
        input_tokens,
        output_tokens,
        cost_usd_micros,
        source: "a2a_metadata",
    })
}

/// ADK's usage metadata (Gemini's names): `promptTokenCount`, `candidatesTokenCount`.
fn adk_usage_of(usage: &Value) -> Option<ExternalUsage> {
    let count = |key: &str| {
        usage
            .get(key)
            .and_then(Value::as_f64)
            .filter(|f| f.is_finite() && *f >= 0.0)
    };
    Some(ExternalUsage {
        input_tokens: count("promptTokenCount")? as u64,
        output_tokens: count("candidatesTokenCount").unwrap_or(0.0) as u64,
        cost_usd_micros: None,
        source: "a2a_adk_metadata",
    })
}

/// What the person is shown when the remote pauses.
pub fn question_arguments(agent: &str, question: &Question) -> Value {
    json!({
        "agent": agent,
        "state": question.state,
        "task": question.task,
        "question": question.text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_reads_counts_written_as_floats_and_a_cost_in_dollars() {
        let usage =
            usage_of(&json!({"input_tokens": 1200.0, "output_tokens": 300, "cost_usd": 0.25}))
                .expect("usage");
        assert_eq!((usage.input_tokens, usage.output_tokens), (1200, 300));
        assert_eq!(usage.cost_usd_micros, Some(250_000));
        assert!(usage_of(&json!({"tokens": 3})).is_none());
        assert!(usage_of(&json!({"input_tokens": -1})).is_none());
        let adk = adk_usage_of(
            &json!({"promptTokenCount": 975, "candidatesTokenCount": 11, "totalTokenCount": 1076}),
        )
        .expect("ADK usage");
        assert_eq!(
            (adk.input_tokens, adk.output_tokens, adk.cost_usd_micros),
            (975, 11, None)
        );
    }

    #[test]
    fn parts_become_text() {
        let parts = vec![wire::Part::text("a "), wire::Part::data(json!({"k": 1}))];
        assert_eq!(parts_text(&parts), "a {\"k\":1}");
    }
}
