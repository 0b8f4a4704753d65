//! The ports: traits the engine calls and adapters implement, one file per port.

pub mod external;
pub mod model;
pub mod store;
pub mod tools;

pub use external::{Availability, ExternalAgent};
pub use model::{ChatModel, ModelError, ModelInfo};
pub use store::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStatus, CostQuery, CostRow,
    EventStore, NewApproval, NewPermission, NewThread, PermissionRecord, PermissionStatus,
    StoreError, ThreadRecord, TurnRecord, TurnStatus,
};
pub use tools::{Ensemble, SecurityViolation, ToolContext, ToolError, ToolOutput};
