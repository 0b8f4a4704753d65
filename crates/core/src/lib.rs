//! The domain of agentplane: the words of `design.md` as types.
//!
//! Everything here is plain data plus pure functions. This crate must never do I/O,
//! never depend on an async runtime and never import another agentplane crate: every
//! other part depends on it, so it changes only when the domain does.

pub mod agent;
pub mod audit;
pub mod chat;
pub mod content;
pub mod error;
pub mod event;
pub mod identity;
pub mod ids;
pub mod policy;
pub mod secret;
pub mod tool;
pub mod version;
pub mod visible;

pub use agent::{AgentLimits, AgentSpec, NetworkAccess, SandboxSpec, ToolCallMode};
pub use chat::{ChatMessage, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice, Usage};
pub use error::ErrorCode;
pub use event::{
    ApprovalOutcome, Event, EventPayload, FileChange, PermissionDecision, StopReason, ToolStatus,
    usd_of_micros,
};
pub use identity::{AccessRole, KeySecret, RoleSet};
pub use ids::{
    ApprovalId, CompletionId, DeliveryId, ExecutionId, HoldId, KeyId, McpCallId, PermissionId,
    ReplicaId, ThreadId, TurnId,
};
pub use tool::{FINISH_TASK, ToolErrorKind, ToolSpec, args_preview_hash, governed_as};
pub use version::{SpecPatch, Stage, TrafficSplit, VersionSpec};
