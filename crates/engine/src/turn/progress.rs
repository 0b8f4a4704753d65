//! Where the turn loop stands and how it stops: the conversation and the calls still
//! to handle (`Progress`), each call as the model made it (`PlannedCall`) and how its
//! handling ended (`CallEnd`), a normal end (`Ending`) and an early one (`Stop`). Plain
//! data; the loop (`mod.rs`) and the steps move it along.

use std::collections::VecDeque;

use agentplane_core::{ApprovalId, ChatMessage, ErrorCode, StopReason, ToolCall};
use serde_json::Value;

use super::outcome::TurnError;
use crate::harmony;
use crate::ports::StoreError;

/// How the loop ended when it ended normally.
pub(super) struct Ending {
    pub(super) stop_reason: StopReason,
    pub(super) result: Value,
    pub(super) error: Option<TurnError>,
    /// The loop stopped to wait for this approval; the turn has not ended.
    pub(super) suspended: Option<ApprovalId>,
}

impl Ending {
    pub(super) fn plain(stop_reason: StopReason, result: Value) -> Self {
        Self {
            stop_reason,
            result,
            error: None,
            suspended: None,
        }
    }
}

/// Where the loop stands: model calls made, the conversation, calls still to handle.
pub(super) struct Progress {
    pub(super) step: u32,
    pub(super) messages: Vec<ChatMessage>,
    pub(super) queue: VecDeque<PlannedCall>,
}

impl Progress {
    /// Takes a handled call's end: its answer joins the conversation, or the loop ends
    /// (finished, or suspended on an approval).
    pub(super) fn answer(&mut self, end: CallEnd) -> Option<Ending> {
        match end {
            CallEnd::Finished(result) => Some(Ending::plain(StopReason::Finished, result)),
            CallEnd::Answer { call_id, text } => {
                self.messages.push(ChatMessage::tool_result(call_id, text));
                None
            }
            CallEnd::Suspended(id) => Some(suspended(id)),
        }
    }
}

/// Why the loop stopped early.
pub(super) enum Stop {
    Cancelled,
    Failed(TurnError),
    Store(StoreError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

pub(super) fn failed(code: ErrorCode, message: impl Into<String>) -> Stop {
    Stop::Failed(TurnError {
        code,
        message: message.into(),
    })
}

pub(super) fn suspended(id: ApprovalId) -> Ending {
    Ending {
        stop_reason: StopReason::Interrupted,
        result: Value::Null,
        error: None,
        suspended: Some(id),
    }
}

/// A call as the model made it: well-formed, recovered from its text (ADR 0032), or
/// refused before parsing (Harmony payload errors), which still get planned/result
/// events and a tool answer.
pub(super) enum PlannedCall {
    Ready(ToolCall),
    Recovered(ToolCall),
    Refused(ToolCall, harmony::HarmonyError),
}

impl PlannedCall {
    pub(super) fn call(&self) -> &ToolCall {
        match self {
            Self::Ready(call) | Self::Recovered(call) | Self::Refused(call, _) => call,
        }
    }
}

pub(super) enum CallEnd {
    Finished(Value),
    Answer {
        call_id: String,
        text: String,
    },
    /// The turn waits for this approval.
    Suspended(ApprovalId),
}
