//! The one place agentplane starts processes, and the confinement they run in: shared
//! by the tool ensembles (`agentplane-tools`: commands, MCP servers) and the ACP client
//! (`agentplane-acp-client`: external agents), which is why it is a crate of its own.
//!
//! - [`process`]: spawning (a confined run of a tool's program, or a long-lived server
//!   on stdio) and ending whole process trees.
//! - [`reaper`] (Linux): the process between us and every program we start, which
//!   kills all its descendants when the program ends or we say so.
//! - [`sandbox`]: the kernel confinement those processes get (Landlock, seccomp,
//!   rlimits, `no_new_privs`; ADR 0023), prepared before the fork.
//! - [`confine`]: workspace confinement of a path and opening files beneath it.
//!
//! What must not live here: which programs may run (the `shell` ensemble's allowlist),
//! policies, or any protocol; this crate runs what it is given, where it is allowed.

pub mod confine;
#[cfg(target_os = "linux")]
pub mod egress;
pub mod process;
#[cfg(target_os = "linux")]
pub mod reaper;
pub mod sandbox;

pub use confine::{Access, resolve_in_workspace};
pub use sandbox::Sandbox;
