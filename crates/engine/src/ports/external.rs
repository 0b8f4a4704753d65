//! `ExternalAgent`: an agent we drive instead of running our own model-and-tools loop:
//! a process over ACP (codex, gemini, opencode, claude) or a remote agent over A2A.
//!
//! The adapter speaks the protocol and owns the process; the engine's driver
//! (`crate::external_turn`) turns what the agent reports into events and answers what
//! the agent asks: permissions (fail-closed) and the use of client capabilities (file
//! reads and writes, commands) under the same policies as our own tools. Nothing here
//! knows the wire format, and no protocol type crosses this port.

use std::path::PathBuf;

use agentplane_core::{ErrorCode, EventPayload, ThreadId};
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Whether an external agent can run now, checked without starting it for long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// Why not, said so that an operator knows what to do (program missing, key missing).
    Unavailable(String),
}

/// One prompt for an external agent.
#[derive(Debug, Clone)]
pub struct ExternalPrompt {
    /// The thread: an adapter may resume the agent's session of this thread.
    pub thread: ThreadId,
    /// The canonical workspace the agent works in (its working directory).
    pub workspace: PathBuf,
    /// What the user asked.
    pub input: String,
    /// The thread's earlier conversation as text, for an agent that starts a new
    /// session: the adapter sends it before `input` unless the agent resumed its own
    /// session (which already holds that history). `None` on a thread's first turn.
    pub context: Option<String>,
}

/// Status of a tool call the agent reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExternalToolStatus {
    Running,
    Completed,
    Failed,
}

/// Something the agent reported while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalUpdate {
    /// Text of the agent's answer.
    Text(String),
    /// The agent started (or announced) a tool call of its own.
    ToolCall {
        call_id: String,
        /// Our tool name for it, from the agent's tool kind (`read_file`,
        /// `write_file`, `run_command`…): what policies name.
        tool: String,
        /// The agent's own title for it, when it gave one.
        title: Option<String>,
        arguments: Value,
    },
    /// Progress or end of a tool call; `output` is its text content, if any;
    /// `arguments` are its arguments when the agent sent them late (`rawInput`).
    ToolCallUpdate {
        call_id: String,
        status: Option<ExternalToolStatus>,
        output: Option<String>,
        arguments: Option<Value>,
    },
    /// The agent's plan, as the agent sent it.
    Plan(Value),
}

/// A client capability the agent wants to use on our side: each is gated by policy as
/// the tool of the same name, and confined to the workspace by the adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityUse {
    /// Our tool name for it: `read_file`, `write_file` or `run_command`.
    pub tool: String,
    pub arguments: Value,
}

/// A permission the agent asks for before one of its tool calls.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    pub call_id: String,
    /// Our tool name for the call (see [`ExternalUpdate::ToolCall`]).
    pub tool: String,
    /// The agent's own title for it.
    pub title: Option<String>,
    /// The call's own arguments (`rawInput`), when the ask carries them.
    pub input: Option<Value>,
    /// What the person is shown: the input, the agent's title and its options.
    pub arguments: Value,
}

/// What the agent sends the turn. Each question carries the channel of its answer; a
/// dropped answer channel means "no" (fail-closed).
#[derive(Debug)]
pub enum ToTurn {
    Update(ExternalUpdate),
    /// `true` only for an explicit approval.
    Permission {
        ask: PermissionAsk,
        answer: oneshot::Sender<bool>,
    },
    /// `Ok` with the arguments to use when policy allows the use (as the `content`
    /// policies on tool arguments left them: a redacted value is what gets written),
    /// else why not.
    Capability {
        request: CapabilityUse,
        answer: oneshot::Sender<Result<Value, String>>,
    },
    /// What a capability gives the agent back (a file's text, a command's output),
    /// to be screened as a tool's result before it reaches the agent: `Ok` with the
    /// text as the secrets' redaction and the `content` policies left it, `Err` with
    /// the refusal of a `deny` policy that found something.
    CapabilityOutput {
        tool: String,
        output: String,
        answer: oneshot::Sender<Result<String, String>>,
    },
    /// A confinement breach the adapter refused (a path outside the workspace).
    Security {
        event_type: String,
        detail: String,
    },
    /// A record of the adapter's own traffic for the event log (an `a2a_request` per
    /// request sent to a remote agent). The driver appends only record kinds it knows
    /// (`external_turn::recordable`); anything else is dropped, so an adapter cannot
    /// write a turn's lifecycle events.
    Record(EventPayload),
}

/// How the agent's prompt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalStop {
    /// The agent finished its answer.
    EndTurn,
    /// It stopped on a limit of its own (tokens, requests) or refused.
    Limit(String),
    /// The prompt was cancelled.
    Cancelled,
}

/// Tokens the agent reported, when it reported any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExternalUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the agent itself says this prompt cost, in USD micros (from a cumulative
    /// session cost it reports), when it says so in dollars.
    pub cost_usd_micros: Option<u64>,
    /// Where the numbers come from: `prompt` (the prompt's answer), `quota` (gemini's
    /// `_meta.quota`), `usage_update` (tokens in the agent's context).
    pub source: &'static str,
}

/// The end of one prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalEnd {
    pub stop: ExternalStop,
    /// `None`: the agent did not say, and the turn records that it could not be measured.
    pub usage: Option<ExternalUsage>,
}

/// Why an external agent could not run the prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExternalError {
    /// It cannot be started here (program or key missing).
    #[error("{0}")]
    Unavailable(String),
    /// It did not answer in time.
    #[error("{0}")]
    Timeout(String),
    /// It broke the protocol, refused a request or went away.
    #[error("{0}")]
    Protocol(String),
}

impl ExternalError {
    /// The user-facing code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unavailable(_) | Self::Protocol(_) => ErrorCode::UpstreamUnavailable,
            Self::Timeout(_) => ErrorCode::Timeout,
        }
    }
}

/// An agent process driven over a protocol.
#[async_trait]
pub trait ExternalAgent: Send + Sync {
    /// The protocol and profile, for `turn_started` (`acp:codex`, `a2a:NAME`). The part
    /// before `:` is the `provider` of its `usage` and `cost` events; the whole label is
    /// the model its prices are looked up under.
    fn label(&self) -> String;

    /// Whether it could run now. Must return promptly (no unbounded waits).
    async fn availability(&self) -> Availability;

    /// Runs one prompt to its end. Reports go to `to_turn` as they happen. On
    /// `cancel`, the adapter asks the agent to stop and ends its whole process tree
    /// within 2 s, then returns `ExternalStop::Cancelled`.
    async fn prompt(
        &self,
        prompt: ExternalPrompt,
        to_turn: mpsc::Sender<ToTurn>,
        cancel: CancellationToken,
    ) -> Result<ExternalEnd, ExternalError>;
}
