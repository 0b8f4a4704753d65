//! The endpoints, one module per group. Each handler extracts, calls one hub method
//! and maps the result; the `#[utoipa::path]` on it is the endpoint's contract in the
//! OpenAPI document. Errors every endpoint of a kind can return (missing client id,
//! bad token, malformed id, body too large) are added to the document in `openapi.rs`;
//! the attributes here list the ones specific to the endpoint.

pub(crate) mod agents;
pub(crate) mod approvals;
pub(crate) mod costs;
pub(crate) mod events;
pub(crate) mod executions;
pub(crate) mod gateway;
pub(crate) mod health;
pub(crate) mod keys;
pub(crate) mod mcp_calls;
pub(crate) mod mcp_servers;
pub(crate) mod mcp_tools;
pub(crate) mod metrics;
pub(crate) mod permissions;
pub(crate) mod policies;
pub(crate) mod threads;
pub(crate) mod turns;
pub(crate) mod ui;
pub(crate) mod versions;

/// OpenAPI tags, one per group.
pub(crate) mod tags {
    pub const SYSTEM: &str = "system";
    pub const AGENTS: &str = "agents";
    pub const THREADS: &str = "threads";
    pub const TURNS: &str = "turns";
    pub const PERMISSIONS: &str = "permissions";
    pub const COSTS: &str = "costs";
    pub const POLICIES: &str = "policies";
    pub const APPROVALS: &str = "approvals";
    pub const EXECUTIONS: &str = "executions";
    pub const VERSIONS: &str = "versions";
    pub const KEYS: &str = "keys";
    pub const MCP: &str = "mcp";
}
