//! The services: one per use case, each holding the narrow store ports it uses and
//! nothing of the others' state. The composition root (`runtime`) builds them once
//! (`HubBuilder::build` returns them all, with the hub, as `hub::Services`: the hub is
//! the one layer above them); the interfaces hold the services and call one method per
//! request.
//!
//! - `identity`: who a caller is (keys, OIDC tokens, the setup token) and the role
//!   check every other service makes first;
//! - `reports`: what was spent and what was recorded (costs, MCP gateway calls, a
//!   thread's audit chain), read only;
//! - `model_gateway`: the OpenAI-compatible gateway's governed model call;
//! - `versions`: agent versions, promotion, traffic and the version a thread runs
//!   (ADR 0016), over `VersionStore`;
//! - `mcp_gateway`: the MCP gateway's tools, its governed call (`govern.rs`) and the
//!   calls that wait for an approval;
//! - `tool_pins`: upstream MCP tools' pinned definitions, and an admin's approval of a
//!   changed one (over `ToolPinStore`);
//! - threads, turns, approvals and shadow runs are still one service,
//!   `Hub`, in `hub/`, above these (its split goes on; see ADR 0058).

pub mod identity;
pub mod mcp_gateway;
pub mod model_gateway;
pub mod reports;
pub mod tool_pins;
pub mod version_settings;
pub mod versions;
