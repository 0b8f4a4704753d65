//! What a turn gives back: its events as they happen (`TurnObserver`) and how it ended
//! (`TurnOutcome`, `TurnError`). Plain data; nothing here records or decides anything.

use agentplane_core::{ApprovalId, ErrorCode, Event, StopReason, ThreadId, TurnId, Usage};
use serde_json::Value;

/// Sees a turn as it happens. Called from the turn's task: keep it quick.
pub trait TurnObserver: Send + Sync {
    /// A stored event.
    fn on_event(&self, event: &Event);

    /// Raw text as the model streams it, before it is coalesced into events.
    fn on_text(&self, _text: &str) {}
}

/// An observer that ignores everything.
pub struct NoObserver;

impl TurnObserver for NoObserver {
    fn on_event(&self, _event: &Event) {}
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub thread: ThreadId,
    pub turn: TurnId,
    pub stop_reason: StopReason,
    /// `finish_task`'s arguments, `{"text": …}` for a plain answer, `null` otherwise.
    pub result: Value,
    /// Set when `stop_reason` is `Error`.
    pub error: Option<TurnError>,
    /// Tokens of all model calls of the turn (of this run, when resumed).
    pub usage: Usage,
    /// Set when the turn did not end but is suspended on this approval: it resumes on
    /// the decision, and `stop_reason` means nothing yet.
    pub suspended: Option<ApprovalId>,
}

/// A failure that ended a turn, as recorded in its `error` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnError {
    pub code: ErrorCode,
    pub message: String,
}
