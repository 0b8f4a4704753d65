//! The Agent2Agent (A2A) protocol's wire, written as serde types (ADR 0050): protocol
//! 1.0's JSON-RPC binding as the official `a2a-sdk` (1.3) sends it (`wire`), and the
//! 0.3 generation's shapes with conversions both ways (`v0_3`). Only what agentplane
//! serves and sends; fields the spec leaves open to extension are tolerated when
//! unknown, required ones are required. The tests hold the types to JSON the official
//! SDKs produced.
//!
//! `client` is agentplane as the client of remote A2A agents: agents of
//! `kind = "a2a"` behind the engine's `ExternalAgent` port, and the `a2a__NAME` tool.

pub mod client;
pub mod v0_3;
pub mod wire;
