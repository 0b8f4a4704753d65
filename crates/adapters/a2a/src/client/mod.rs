//! The A2A client: remote A2A agents as governed agents of ours (`kind = "a2a"`,
//! [`A2aAgent`] behind the engine's `ExternalAgent` port) and as a native agent's tool
//! (`a2a__NAME`, [`A2aTool`]). Both speak through one [`Connection`] per remote agent
//! (its card, its credential, its contexts per thread).
//!
//! What must not live here: governance (policies, budgets, rate limits, approvals are
//! the engine's, around the port and the tool path), and wire types (`crate::wire`,
//! `crate::v0_3`).

mod agent;
mod card;
mod exchange;
mod http;
mod remote;
mod tool;

pub use agent::{A2aAgent, INPUT_TOOL};
pub use exchange::APPROVED_TEXT;
pub use remote::{A2aRemoteConfig, Connection, Credential};
pub use tool::{A2aTool, TOOL_PREFIX};
