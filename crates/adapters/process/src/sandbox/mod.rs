//! Kernel confinement of the processes tools start (ADR 0023).
//!
//! A [`Sandbox`] is an agent's confinement: its [`SandboxSpec`](agentplane_core::SandboxSpec) (extra paths, resource
//! limits, whether the kernel's support is required) and whether it may use the
//! network. [`prepare`] turns it into a [`Prepared`] confinement *before* the fork: the
//! Landlock ruleset is built and its file descriptor held, the seccomp filter compiled.
//! Between fork and exec the child only makes system calls ([`Prepared::apply`]):
//! rlimits, `no_new_privs`, `landlock_restrict_self`, `seccomp`. Nothing there
//! allocates or takes a lock, which is all a child of a multithreaded process may do.
//!
//! What the child gets:
//! - Landlock files: read-write beneath the workspace and `sandbox.read_write`;
//!   read and execute beneath the system directories a build needs, the directories on
//!   `PATH` and `sandbox.read_only`; nothing else (not `/etc/shadow`, the data
//!   directory, other workspaces, `/tmp`).
//!   No device node can be created anywhere.
//! - Landlock TCP: `bind` and `connect` refused unless the agent's `network.allowed`;
//!   with it, refused on agentplane's own listening ports ([`forbid_ports`]), a layer
//!   of its own built once.
//! - Landlock scopes (ABI 6): no signals to, no abstract UNIX sockets of, and — as for
//!   every Landlock domain — no `ptrace` of processes outside the sandbox. `/proc`'s
//!   process directories are not granted at all, which is what closes
//!   `/proc/<server pid>/environ`.
//! - seccomp: `ptrace`, `mount`, `kexec_*`, `bpf`, module loading, namespaces,
//!   `io_uring`, device nodes and the like fail with `EPERM`; sockets by allowlist:
//!   none without network (UNIX socket pairs only), TCP and UDP with it.
//! - capabilities: every set emptied, the bounding set included, whoever runs the
//!   server.
//! - rlimits (CPU seconds, address space, open files, processes), `no_new_privs`.
//!
//! Long-lived servers (MCP, ACP agents) are the operator's programs, not the model's;
//! they get [`Prepared::for_server`]: a Landlock domain with no file rules, which keeps
//! the server's secrets in `/proc` and its signals out of their reach and changes
//! nothing else.
//!
//! Where each part lives: the agent's confinement and its roots in `confinement`, what
//! the kernel offers in `kernel`, building and applying in `prepare` (Landlock rulesets
//! in `rules`, seccomp filters in `seccomp`, namespaces in `namespaces`), process-wide
//! settings in `settings`. This file only names them, so each part can use the others'
//! types without a circle.
//!
//! What must not live here: which programs may run (the `shell` ensemble), spawning
//! (`process`).

#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
mod rules;
#[cfg(target_os = "linux")]
mod seccomp;

mod confinement;
mod error;
mod kernel;
mod prepare;
mod settings;

pub use confinement::{SYSTEM_READ_ONLY, SYSTEM_READ_WRITE, Sandbox, search_path};
pub use error::SandboxError;
pub use kernel::{Kernel, REQUIRED_LANDLOCK_ABI, namespaces_available};
#[cfg(target_os = "linux")]
pub use namespaces::Namespaces;
pub use prepare::{Prepared, prepare, prepare_isolated};
pub use settings::{Fallback, fallback, forbid_ports, mask_paths, own_ports, set_fallback};

/// Namespaces exist on Linux only; elsewhere nothing is entered.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub struct Namespaces;
