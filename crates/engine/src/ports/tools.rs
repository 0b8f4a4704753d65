//! `Ensemble`: a group of tools with one lifecycle (open before use, close after).
//!
//! Builtin `fs`, `shell` and `web` are ensembles; later each MCP server is one. The
//! engine validates arguments against each tool's schema before `call`, enforces the
//! timeout around it and caps what it returns; an ensemble still bounds its own reads
//! so a huge output never sits in memory whole.

use std::path::PathBuf;
use std::time::Duration;

use agentplane_core::{ToolErrorKind, ToolSpec};
use async_trait::async_trait;

/// What a tool call may touch. Built by the engine per turn.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The canonical workspace root; every path a tool touches must resolve inside it.
    pub workspace: PathBuf,
    /// Wall time of the call; the engine also enforces it from outside.
    pub timeout: Duration,
    /// Bytes of output worth keeping; ensembles stop reading well past it.
    pub output_cap: usize,
    /// The agent's `data_scope` policies in force, when any select it: paths and hosts
    /// a tool may reach are then limited to what one of them grants.
    pub scope: Option<std::sync::Arc<Vec<agentplane_core::policy::DataScope>>>,
}

/// A successful tool result, as text for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    /// Whether the ensemble already cut the output at the cap.
    pub truncated: bool,
    /// Breaches seen by a call that still succeeded (a connection the egress proxy
    /// refused while the program ran on): each becomes a `security_event`.
    pub security: Vec<SecurityViolation>,
    /// Every connection the egress proxy decided for the call's program: each becomes
    /// an `egress` event.
    pub egress: Vec<EgressDecision>,
}

/// One connection the egress proxy decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressDecision {
    /// As asked: `host:port`.
    pub destination: String,
    pub allowed: bool,
    /// Where it went (the addresses), or why not.
    pub detail: String,
}

impl ToolOutput {
    /// An untruncated result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            truncated: false,
            security: Vec::new(),
            egress: Vec::new(),
        }
    }
}

/// A confinement breach worth a `security_event` besides the tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityViolation {
    /// `sandbox_violation`, `command_not_allowed`, `network_denied`…
    pub event_type: String,
    pub detail: String,
}

/// A failed tool call. The message goes back to the model, so it says what was wrong
/// and never carries secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
    pub security: Option<SecurityViolation>,
}

impl ToolError {
    /// A plain failure of the given kind.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            security: None,
        }
    }

    /// A refused breach of confinement: a tool error that is also a security event.
    pub fn violation(
        kind: ToolErrorKind,
        event_type: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        Self {
            kind,
            security: Some(SecurityViolation {
                event_type: event_type.into(),
                detail: message.clone(),
            }),
            message,
        }
    }
}

/// A tool whose cost is known only after it ran — a remote agent asked as a tool
/// (`a2a__NAME`), which calls its own models and tells us what it spent. The turn
/// reserves `max_micros` on every budget that applies before the call and settles
/// what the call reports within it (`governance::ceiling`, as for a remote agent's
/// turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spending {
    /// What its reported tokens are priced as, and its `cost` events name
    /// (`a2a:NAME`).
    pub label: String,
    /// The most one call may cost (the remote's `max_cost_usd`), in micro-dollars;
    /// `None`: it has none, and a call under a budget is refused.
    pub max_micros: Option<u64>,
}

/// What a call of a [`Spending`] tool says it spent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spent {
    /// The usage the callee reported, if it did.
    pub usage: Option<crate::ports::external::ExternalUsage>,
    /// Whether it was asked and may have worked (so, reporting nothing, it is charged
    /// its ceiling); `false` only for a call that failed before it reached the callee.
    pub worked: bool,
}

/// A named group of tools.
#[async_trait]
pub trait Ensemble: Send + Sync {
    /// The ensemble's name (`fs`, `shell`, `web`).
    fn name(&self) -> &str;

    /// Prepares the ensemble for a turn (connect, start a process). Builtin ensembles
    /// have nothing to open.
    async fn open(&self) -> Result<(), ToolError> {
        Ok(())
    }

    /// The tools offered, valid after `open`.
    fn tools(&self) -> Vec<ToolSpec>;

    /// Runs one tool. `args` already matched the tool's schema.
    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;

    /// Whether `tool`'s cost is known only after it ran, and its ceiling; `None` (the
    /// default): a call costs nothing the budgets see. The engine then calls
    /// [`Ensemble::call_spending`] in place of [`Ensemble::call`].
    fn spending(&self, _tool: &str) -> Option<Spending> {
        None
    }

    /// [`Ensemble::call`] of a tool with [`Ensemble::spending`], with what it reported
    /// spending.
    async fn call_spending(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> (Result<ToolOutput, ToolError>, Spent) {
        let outcome = self.call(tool, args, ctx).await;
        (
            outcome,
            Spent {
                usage: None,
                worked: true,
            },
        )
    }

    /// Releases what `open` took. Called even when `open` or the turn failed.
    async fn close(&self) {}

    /// What a call would actually run, in words, for a person asked to permit it (the
    /// resolved program, its arguments and environment, its confinement); `None` when
    /// the call's arguments already say it all.
    fn preview(
        &self,
        _tool: &str,
        _args: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Option<String> {
        None
    }
}
