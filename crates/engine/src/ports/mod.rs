//! The ports: traits the engine calls and adapters implement, one file per port.

pub mod audit;
pub mod budgets;
pub mod executions;
pub mod external;
pub mod keys;
pub mod mcp_gateway;
pub mod model;
pub mod rate;
pub mod records;
pub mod replicas;
pub mod responses;
pub mod store;
pub mod telemetry;
pub mod tool_pins;
pub mod tools;
pub mod versions;
pub mod workspace;

pub use audit::{
    AuditStore, AuditedApproval, AuditedKey, AuditedThread, AuditedTurn, ChainHead, RecordChainTip,
};
pub use budgets::{AccountNeed, BudgetAccount, BudgetLedger, Exceeded, HoldId};
pub use executions::{
    CancelOutcome, DeliveryAttempt, DeliveryRecord, DeliveryStatus, ExecutionEnd, ExecutionFailure,
    ExecutionQuery, ExecutionRecord, ExecutionStatus, ExecutionStore, NewExecution, RestartMode,
};
pub use external::{Availability, ExternalAgent};
pub use keys::{KeyRecord, KeyStore, NewKey, TokenVerifier, VerifiedToken};
pub use mcp_gateway::{McpUpstreams, UpstreamState, UpstreamTool};
pub use model::{
    Capabilities, ChatModel, EmbeddingRequest, Embeddings, ModelError, ModelInfo, TextSink,
};
pub use rate::{Limited, RateError, RateFacts, RateLimits};
pub use replicas::{Announcement, Appended, ReplicaStore};
pub use responses::{KeptResponse, ResponseStore};
pub use store::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalStore, CallStore,
    CostQuery, CostRow, EventStore, McpCallQuery, McpCallRecord, ModelCallRecord, NewApproval,
    NewPermission, NewThread, PermissionPolicy, PermissionRecord, PermissionStatus, StoreError,
    ThreadRecord, ThreadStore, TurnLog, TurnRecord, TurnStatus,
};
pub use telemetry::{CallOutcome, Telemetry, TelemetrySink};
pub use tool_pins::{ToolPin, ToolPinStore};
pub use tools::{
    EgressDecision, Ensemble, SecurityViolation, Spending, Spent, ToolContext, ToolError,
    ToolOutput,
};
pub use versions::{NewTraffic, NewVersion, TrafficRecord, VersionRecord, VersionStore};
pub use workspace::{FileState, WorkspaceScanner, WorkspaceSnapshot};
