//! `a2a__NAME`: a remote A2A agent as one tool of a native agent, an ensemble of its
//! own. The call goes through the engine's tool path like any other (schema, policy
//! gate, approvals, rate limits, prices, timeout, output cap); here it is one exchange
//! with the remote, whose final text is the tool's output.
//!
//! The remote's cost is known only when it reports it: the tool says so
//! (`Ensemble::spending`, its `max_cost_usd` as the ceiling), and the engine reserves
//! that ceiling on the caller's budgets before the call and settles the reported
//! usage within it, as for a remote turn.
//!
//! A tool call has no one to ask: a remote that pauses for input gets its task
//! cancelled, and the call fails saying what it asked. The exchange's `a2a_request`
//! records are logged (the tool's own `tool_call_*` events are the call's record).

use std::sync::Arc;

use agentplane_core::{EventPayload, ThreadId, ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{Ensemble, Spending, Spent, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::exchange::{Exchange, Finish, Question, Sink};
use super::remote::Connection;

/// Bytes of the remote's answer kept for the tool's output (the engine cuts it further).
const COLLECT_MAX: usize = 1024 * 1024;

/// The tool names' prefix.
pub const TOOL_PREFIX: &str = "a2a__";

/// The `a2a__NAME` ensemble of one agent's turn on one thread.
pub struct A2aTool {
    name: String,
    connection: Arc<Connection>,
    thread: ThreadId,
}

impl A2aTool {
    /// The tool of the remote agent behind `connection`, for a turn on `thread` (whose
    /// remote context its calls continue).
    pub fn new(connection: Arc<Connection>, thread: ThreadId) -> Self {
        Self {
            name: format!("{TOOL_PREFIX}{}", connection.config.name),
            connection,
            thread,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolArgs {
    message: String,
}

#[async_trait]
impl Ensemble for A2aTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: self.name.clone(),
            description: format!(
                "Ask the remote agent `{}` (over A2A) and get its answer. Send a complete, \
                 self-contained request in `message`.",
                self.connection.config.name
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "minLength": 1, "description": "What to ask the remote agent."}
                },
                "required": ["message"],
                "additionalProperties": false
            }),
            // The remote agent may act on what it is asked: never in a shadow run.
            side_effects: true,
        }]
    }

    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.call_spending(tool, args, ctx).await.0
    }

    /// The remote's cost is known only once it reports it: the engine reserves its
    /// `max_cost_usd` on the caller's budgets around the call.
    fn spending(&self, tool: &str) -> Option<Spending> {
        (tool == self.name).then(|| Spending {
            label: format!("a2a:{}", self.connection.config.name),
            max_micros: self.connection.config.max_cost_micros,
        })
    }

    async fn call_spending(
        &self,
        tool: &str,
        args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> (Result<ToolOutput, ToolError>, Spent) {
        let mut spent = Spent::default();
        let outcome = self.ask(tool, args, &mut spent).await;
        (outcome, spent)
    }
}

impl A2aTool {
    /// One exchange with the remote; `spent` gets what it reported, and whether it was
    /// asked at all (a call that fails before the remote made a task or answered
    /// anything did not reach it).
    async fn ask(
        &self,
        tool: &str,
        args: serde_json::Value,
        spent: &mut Spent,
    ) -> Result<ToolOutput, ToolError> {
        if tool != self.name {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("unknown tool `{tool}`"),
            ));
        }
        let args: ToolArgs = serde_json::from_value(args)
            .map_err(|e| ToolError::new(ToolErrorKind::InvalidArguments, e.to_string()))?;
        let failed = |message: String| ToolError::new(ToolErrorKind::ExecutionFailed, message);
        let (remote, _) = self.connection.card().await.map_err(failed)?;
        let mut exchange = Exchange::new(&self.connection, remote.clone(), self.thread.to_string());
        // The engine drops this call at its timeout: the remote task is then cancelled
        // in the background rather than left running.
        let _cancel_on_drop = CancelOnDrop {
            connection: self.connection.clone(),
            remote,
            task: exchange.task_cell(),
        };
        let mut sink = ToolSink::default();
        // Dropping the call (its timeout, the turn's cancel) drops the exchange; the
        // token only serves the exchange's own shape.
        let cancel = CancellationToken::new();
        let finish = exchange.run(args.message, &mut sink, &cancel).await;
        spent.usage = exchange.usage;
        spent.worked = finish.is_ok() || exchange.reached();
        match finish.map_err(|e| failed(e.to_string()))? {
            Finish::Completed => Ok(ToolOutput::text(sink.text)),
            Finish::Cancelled => Err(failed(format!(
                "the remote agent `{}` cancelled its task",
                self.connection.config.name
            ))),
            Finish::Declined => Err(failed(format!(
                "the remote agent `{}` asked for input ({}), which a tool call cannot give; \
                 its task was cancelled",
                self.connection.config.name,
                sink.asked.unwrap_or_default()
            ))),
        }
    }
}

/// Cancels the remote task still running when a tool call is dropped.
struct CancelOnDrop {
    connection: Arc<Connection>,
    remote: super::card::Remote,
    task: Arc<std::sync::Mutex<Option<String>>>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (Some(task), Ok(runtime)) = (task, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let connection = self.connection.clone();
        let remote = self.remote.clone();
        runtime.spawn(async move {
            let outcome = connection.cancel(&remote, &task).await;
            tracing::info!(
                agent = %connection.config.name,
                task,
                cancelled = outcome.is_ok(),
                "a2a_request out CancelTask (a dropped tool call)"
            );
        });
    }
}

/// A tool call's sink: text collected, questions declined, records logged.
#[derive(Default)]
struct ToolSink {
    text: String,
    asked: Option<String>,
}

#[async_trait]
impl Sink for ToolSink {
    async fn text(&mut self, text: String) {
        // The engine cuts the output at the call's cap; past this, nothing is kept.
        if self.text.len() < COLLECT_MAX {
            self.text.push_str(&text);
        }
    }

    async fn record(&mut self, payload: EventPayload) {
        if let EventPayload::A2aRequest {
            method,
            task,
            protocol_version,
            outcome,
            ..
        } = payload
        {
            tracing::info!(
                method,
                task,
                protocol_version,
                outcome,
                "a2a_request out (tool call)"
            );
        }
    }

    async fn ask(&mut self, question: Question) -> bool {
        self.asked = Some(if question.text.is_empty() {
            question.state.to_owned()
        } else {
            question.text
        });
        false
    }
}
