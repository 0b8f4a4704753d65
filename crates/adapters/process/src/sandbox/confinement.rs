//! One agent's confinement ([`Sandbox`]): the paths it may read and write, the `PATH`
//! its programs are found on, and what the kernel enforces for it, in words.
//!
//! What must not live here: building the rulesets and filters (`super::prepare`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use agentplane_core::SandboxSpec;

use super::kernel::{Kernel, namespaces_available};
use super::settings::{Fallback, fallback};

/// `PATH` when the host process has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// System paths every confined process may read and execute: what dynamic linking,
/// locales, time zones, TLS roots and the compilers under `/usr` need. Of `/proc` only
/// the machine-wide files: Landlock's ptrace rule turned out not to close
/// `/proc/PID/environ` of a process outside the domain (it stays readable with
/// `PTRACE_MODE_READ` on this kernel), so no process directory is granted — not even
/// the program's own (`/proc/self` resolves to one); `readlink /proc/self/exe` works
/// (Landlock does not govern readlink).
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/version",
    "/proc/loadavg",
    "/proc/filesystems",
    "/proc/sys/kernel",
    "/proc/sys/vm",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];

/// Devices every confined process may write.
pub const SYSTEM_READ_WRITE: &[&str] = &["/dev/null", "/dev/full"];

/// The `PATH` used both to find programs and inside the child: the host's `PATH`
/// without relative entries (`.`, empty), so a file the model wrote into the workspace
/// can never be picked up as a program.
pub fn search_path() -> OsString {
    let host = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
    let absolute: Vec<PathBuf> = std::env::split_paths(&host)
        .filter(|dir| dir.is_absolute())
        .collect();
    std::env::join_paths(absolute).unwrap_or_else(|_| FALLBACK_PATH.into())
}

/// One agent's confinement.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    /// Paths, limits, whether kernel support is required.
    pub spec: SandboxSpec,
    /// The agent's `network.allowed`: TCP and UDP sockets are refused without it.
    pub network: bool,
    /// Let the started program read its own `/proc/<pid>` directory (`/proc/self`):
    /// granted in the child, after the fork, so it is the child's directory, never
    /// ours. Runtimes like Bun abort without `/proc/self/maps` (external agents).
    pub own_proc: bool,
}

impl Sandbox {
    /// The read-only roots: system paths, `PATH`'s directories, `sandbox.read_only`.
    pub fn read_only(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = SYSTEM_READ_ONLY.iter().map(PathBuf::from).collect();
        paths.extend(std::env::split_paths(&search_path()));
        paths.extend(self.spec.read_only.iter().map(PathBuf::from));
        paths
    }

    /// The read-write roots: the workspace, writable devices, `sandbox.read_write`.
    pub fn read_write(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut paths = vec![workspace.to_path_buf()];
        paths.extend(self.read_write_extra());
        paths
    }

    /// The read-write roots besides the workspace.
    pub fn read_write_extra(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = SYSTEM_READ_WRITE.iter().map(PathBuf::from).collect();
        paths.extend(self.spec.read_write.iter().map(PathBuf::from));
        paths
    }

    /// What the kernel enforces for this sandbox, in words (startup summary,
    /// `GET /v1/agents`, `agentplane agents`).
    pub fn in_force(&self) -> String {
        let kernel = Kernel::get();
        let mut parts = Vec::new();
        match kernel.missing() {
            Some(missing) if self.spec.required => {
                return format!(
                    "REFUSING to run processes: the kernel lacks {missing} \
                     (set sandbox.required = false to run them less confined)"
                );
            }
            Some(missing) => parts.push(format!(
                "OPTED OUT (sandbox.required = false), the kernel lacks {missing}"
            )),
            None if !self.spec.required => parts.push(
                "not required (sandbox.required = false: on a kernel without Landlock \
                 it would run less confined)"
                    .to_owned(),
            ),
            None => {}
        }
        if kernel.landlock_abi >= 1 {
            let mut landlock = format!("landlock ABI {}: files", kernel.landlock_abi);
            if kernel.landlock_abi >= 4 && !self.network {
                landlock.push_str(", TCP denied");
            } else if kernel.landlock_abi >= 4 {
                landlock.push_str(", TCP to agentplane's own ports denied");
            }
            if kernel.landlock_abi >= 6 {
                landlock.push_str(", signals and sockets scoped");
            }
            parts.push(landlock);
        }
        match namespaces_available() {
            Ok(()) if self.network => parts.push(
                "namespaces (user, pid, net, ipc, mount, uts): egress only through \
                 agentplane's proxy"
                    .to_owned(),
            ),
            Ok(()) => parts.push("namespaces (user, pid, net, ipc, mount, uts)".to_owned()),
            Err(why) if self.network && self.spec.required && fallback() == Fallback::Refuse => {
                return format!(
                    "REFUSING to run processes with network: no namespaces ({why}); \
                     [sandbox] fallback = \"landlock\" runs them with Landlock alone"
                );
            }
            Err(why) => parts.push(format!(
                "NO namespaces ({why}); Landlock fallback{}",
                if self.network {
                    ": loopback services other than agentplane's own ports are reachable"
                } else {
                    ", SysV IPC refused"
                }
            )),
        }
        if kernel.seccomp {
            parts.push(if self.network {
                "seccomp (sockets: TCP and UDP only)".to_owned()
            } else {
                "seccomp (no sockets)".to_owned()
            });
        }
        parts.push(format!(
            "rlimits cpu {}s, memory {} MiB, files {}, processes {}",
            self.spec.cpu_secs,
            self.spec.address_space_mb,
            self.spec.open_files,
            self.spec.processes
        ));
        parts.push("no_new_privs, no capabilities".to_owned());
        if cfg!(target_os = "linux") {
            parts.push("no process outlives its call".to_owned());
        }
        parts.join("; ")
    }
}
