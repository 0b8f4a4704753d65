//! What the whole process decides once for every confinement it prepares: agentplane's
//! own listening ports (closed to every program), the folders hidden from them, and
//! what runs where the machine gives no namespaces. Set by the runtime at start,
//! read by every `prepare`.
//!
//! What must not live here: per-agent settings (`super::Sandbox`).

use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A setting to read; a poisoned lock still holds a whole value (writers only assign).
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What runs where the machine gives no namespaces (`[sandbox] fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Programs of an agent with network are refused (the default: fail closed).
    #[default]
    Refuse,
    /// They run with Landlock and seccomp alone, loopback services reachable as
    /// `docs/security.md` says.
    Landlock,
}

static FALLBACK: RwLock<Fallback> = RwLock::new(Fallback::Refuse);

/// Sets what runs without namespaces (the runtime, from `[sandbox] fallback`).
pub fn set_fallback(fallback: Fallback) {
    *write(&FALLBACK) = fallback;
}

/// The fallback in force.
pub fn fallback() -> Fallback {
    *read(&FALLBACK)
}

/// Directories no confined process sees, however its rules read: the configuration
/// and data directories (`serve` names them). Hidden under an empty read-only mount
/// in the program's mount namespace.
static MASKED: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// Adds directories hidden from every confined process from now on.
pub fn mask_paths(paths: impl IntoIterator<Item = PathBuf>) {
    let mut masked = write(&MASKED);
    for path in paths {
        let path = path.canonicalize().unwrap_or(path);
        if !masked.contains(&path) {
            masked.push(path);
        }
    }
}

pub(super) fn masked() -> Vec<PathBuf> {
    read(&MASKED).clone()
}

/// The TCP ports agentplane itself listens on, which no confined process may connect
/// to or bind, whatever its network settings ([`forbid_ports`]).
static OWN_PORTS: RwLock<Vec<u16>> = RwLock::new(Vec::new());

/// Closes `ports` (our own listeners) to every process confined from now on: an agent
/// without network reaches no TCP port at all; one with network reaches every port
/// but these. Called by `serve` once it listens.
pub fn forbid_ports(ports: impl IntoIterator<Item = u16>) {
    let mut own = write(&OWN_PORTS);
    for port in ports {
        if !own.contains(&port) {
            own.push(port);
        }
    }
    own.sort_unstable();
}

/// The ports named by [`forbid_ports`]: agentplane's own listeners.
pub fn own_ports() -> Vec<u16> {
    read(&OWN_PORTS).clone()
}
