//! Turning a [`Sandbox`] into a [`Prepared`] confinement before the fork, and applying
//! it between fork and exec with system calls alone.
//!
//! What must not live here: which paths an agent gets (`super::confinement`).

use std::path::{Path, PathBuf};

#[cfg(not(target_os = "linux"))]
use super::Namespaces;
use super::confinement::Sandbox;
use super::error::SandboxError;
use super::kernel::Kernel;
#[cfg(target_os = "linux")]
use super::namespaces::{self, Namespaces};
#[cfg(target_os = "linux")]
use super::settings::{Fallback, fallback, masked, own_ports};
#[cfg(target_os = "linux")]
use super::{rules, seccomp};

/// A confinement ready to be applied in a forked child: everything that allocates or
/// opens paths is done.
pub struct Prepared {
    #[cfg(target_os = "linux")]
    ruleset: Option<landlock::RulesetCreated>,
    #[cfg(target_os = "linux")]
    filters: Option<&'static seccomp::Filters>,
    /// The TCP ports of agentplane's own listeners, closed to an agent with network
    /// (a second Landlock layer; [`forbid_ports`]).
    #[cfg(target_os = "linux")]
    own_ports: Option<landlock::RulesetCreated>,
    /// Drop every capability before exec ([`drop_capabilities`]); not for the
    /// operator's servers.
    #[cfg(target_os = "linux")]
    drop_capabilities: bool,
    /// (resource, limit) pairs for setrlimit.
    #[cfg(target_os = "linux")]
    limits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// Landlock is required to be enforced (the child fails rather than run without).
    required: bool,
    /// A second descriptor of the ruleset, to add the child's own `/proc/self` to it
    /// between fork and exec ([`Sandbox::own_proc`]).
    #[cfg(target_os = "linux")]
    own_proc: Option<std::os::fd::OwnedFd>,
    /// The workspace, opened once with no symlink followed and checked: the program's
    /// working directory (`fchdir`), its Landlock rule and its mount in the
    /// namespace all come from this descriptor, so no later rename or symlink changes
    /// which directory the program gets.
    #[cfg(target_os = "linux")]
    workspace: Option<std::os::fd::OwnedFd>,
    /// Namespaces of its own ([`Namespaces`]); `None` where they are not available
    /// or not asked for ([`prepare`] leaves them out, [`prepare_isolated`] adds them).
    #[cfg(target_os = "linux")]
    namespaces: Option<Namespaces>,
    /// With namespaces: a descriptor of the ruleset to grant the private `/tmp`, and
    /// the rights it gets.
    #[cfg(target_os = "linux")]
    private_tmp: Option<(std::os::fd::OwnedFd, u64)>,
    /// The program moves into `workspace` itself (not when the reaper entered
    /// namespaces and moved there already).
    #[cfg(target_os = "linux")]
    chdir_in_child: bool,
}

/// Builds `sandbox`'s confinement for a process working in `workspace`, without
/// namespaces (external agents, which reach their model over the host's network).
/// Refuses when the sandbox is required and the kernel lacks a feature.
pub fn prepare(sandbox: &Sandbox, workspace: &Path) -> Result<Prepared, SandboxError> {
    prepare_with(sandbox, workspace, false)
}

/// As [`prepare`], and in namespaces of its own where the machine has them (every
/// tool's program). Without them, an agent with network is refused unless the
/// operator chose the Landlock fallback ([`super::set_fallback`]); one without network runs
/// with Landlock and seccomp alone, SysV IPC refused.
pub fn prepare_isolated(sandbox: &Sandbox, workspace: &Path) -> Result<Prepared, SandboxError> {
    prepare_with(sandbox, workspace, true)
}

fn prepare_with(
    sandbox: &Sandbox,
    workspace: &Path,
    isolated: bool,
) -> Result<Prepared, SandboxError> {
    let kernel = Kernel::get();
    if sandbox.spec.required
        && let Some(missing) = kernel.missing()
    {
        return Err(SandboxError::Unsupported(missing));
    }
    #[cfg(target_os = "linux")]
    {
        let namespaced = match namespaces::availability() {
            Ok(()) => isolated,
            Err(why)
                if isolated
                    && sandbox.network
                    && sandbox.spec.required
                    && fallback() == Fallback::Refuse =>
            {
                return Err(SandboxError::Unsupported(format!(
                    "namespaces, which an agent with network needs for its egress to go \
                     through agentplane's proxy ({why})"
                )));
            }
            Err(_) => false,
        };
        let workspace_fd = crate::confine::open_workspace(workspace)
            .map(std::os::fd::OwnedFd::from)
            .map_err(|e| {
                SandboxError::Setup(format!(
                    "the workspace {} could not be opened without following a symlink: {e}",
                    workspace.display()
                ))
            })?;
        // The granted roots, listed once: Landlock's rules, and the roots a private
        // /tmp must mount back.
        let read_only = sandbox.read_only();
        let read_write = sandbox.read_write_extra();
        let ruleset = if kernel.landlock_abi >= 1 {
            Some(rules::confined(
                sandbox,
                (&read_only, &read_write),
                &workspace_fd,
                kernel.landlock_abi,
            )?)
        } else {
            None
        };
        let namespaces = if namespaced {
            let roots: Vec<PathBuf> = read_only.into_iter().chain(read_write).collect();
            let masks = masked();
            // A workspace below a masked directory is mounted back into its mask (an
            // execution's folder in the data directory); one that is a masked
            // directory, or holds one, is never a workspace.
            if masks
                .iter()
                .any(|mask| mask == workspace || mask.starts_with(workspace))
            {
                return Err(SandboxError::Setup(format!(
                    "the workspace {} is or holds a directory no confined process may see",
                    workspace.display()
                )));
            }
            Some(
                Namespaces::new(sandbox.network, &masks, (workspace, &workspace_fd), &roots)
                    .ok_or_else(|| {
                        SandboxError::Setup("the workspace could not be described".to_owned())
                    })?,
            )
        } else {
            None
        };
        let private_tmp = match (&ruleset, &namespaces) {
            (Some(ruleset), Some(_)) => Some((
                ruleset
                    .try_clone()
                    .ok()
                    .and_then(Option::<std::os::fd::OwnedFd>::from)
                    .ok_or_else(|| {
                        SandboxError::Setup("the ruleset could not be shared".to_owned())
                    })?,
                rules::workspace_rights(kernel.landlock_abi),
            )),
            _ => None,
        };
        let own_proc = match &ruleset {
            Some(ruleset) if sandbox.own_proc => {
                let copy = ruleset
                    .try_clone()
                    .map_err(|e| SandboxError::Setup(e.to_string()))?;
                Option::<std::os::fd::OwnedFd>::from(copy)
            }
            _ => None,
        };
        // Without a private IPC namespace, SysV IPC would cross the sandbox: refused.
        let filters = kernel
            .seccomp
            .then(|| seccomp::filters(sandbox.network, namespaces.is_none()))
            .transpose()?;
        let own_ports = if sandbox.network && kernel.landlock_abi >= 4 {
            rules::own_ports(&own_ports(), kernel.landlock_abi)?
        } else {
            None
        };
        let mib = 1024 * 1024;
        let spec = &sandbox.spec;
        Ok(Prepared {
            ruleset,
            filters,
            own_ports,
            drop_capabilities: true,
            limits: vec![
                (libc::RLIMIT_CPU, spec.cpu_secs),
                (libc::RLIMIT_AS, spec.address_space_mb.saturating_mul(mib)),
                (libc::RLIMIT_NOFILE, spec.open_files),
                (libc::RLIMIT_NPROC, spec.processes),
            ],
            required: sandbox.spec.required,
            own_proc,
            workspace: Some(workspace_fd),
            namespaces,
            private_tmp,
            chdir_in_child: true,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (workspace, isolated);
        Ok(Prepared {
            required: sandbox.spec.required,
        })
    }
}

impl Prepared {
    /// The confinement of a long-lived server the operator configured: a Landlock
    /// domain of its own (best effort), so it can neither read our `/proc` entries nor
    /// signal us, and `no_new_privs`. Its files, network and limits are untouched.
    pub fn for_server() -> Prepared {
        #[cfg(target_os = "linux")]
        {
            let kernel = Kernel::get();
            Prepared {
                ruleset: rules::domain_only(kernel.landlock_abi),
                filters: None,
                own_ports: None,
                drop_capabilities: false,
                limits: Vec::new(),
                required: false,
                own_proc: None,
                workspace: None,
                namespaces: None,
                private_tmp: None,
                chdir_in_child: false,
            }
        }
        #[cfg(not(target_os = "linux"))]
        Prepared { required: false }
    }

    /// The namespaces the reaper enters before it forks the program, if any.
    pub fn namespaces(&self) -> Option<&Namespaces> {
        #[cfg(target_os = "linux")]
        return self.namespaces.as_ref();
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Takes the namespaces out, for the reaper to enter (the rest is applied in the
    /// program).
    pub fn take_namespaces(&mut self) -> Option<Namespaces> {
        #[cfg(target_os = "linux")]
        {
            let taken = self.namespaces.take();
            if taken.is_some() {
                // The reaper moves into the workspace as the new mount namespace shows
                // it (checked to be the same directory); a descriptor from outside that
                // namespace would leave the program's `getcwd` unreachable.
                self.chdir_in_child = false;
            }
            taken
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Whether the program works in the workspace's descriptor (`fchdir` in
    /// [`Prepared::apply`]) rather than a directory named to `chdir`.
    pub fn enters_workspace(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.workspace.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Applies the confinement to the calling process. Meant for the child between
    /// fork and exec: it makes system calls only (no allocation, no lock), and runs at
    /// most once (the ruleset is taken). Last, every descriptor but 0, 1 and 2 is
    /// marked close-on-exec, whatever its flags: nothing the server holds or inherited
    /// reaches the program.
    pub fn apply(&mut self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            if let Some(workspace) = self.workspace.as_ref().filter(|_| self.chdir_in_child) {
                // SAFETY: fchdir on a descriptor we own.
                if unsafe { libc::fchdir(workspace.as_raw_fd()) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some((ruleset, rights)) = &self.private_tmp {
                grant(ruleset, c"/tmp", *rights);
            }
            for &(resource, value) in &self.limits {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                // SAFETY: setrlimit reads the struct on our stack and nothing else.
                if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if self.drop_capabilities {
                drop_capabilities()?;
            }
            // SAFETY: a prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(ruleset) = &self.own_proc {
                grant_own_proc(ruleset);
            }
            if let Some(ruleset) = self.ruleset.take() {
                match ruleset.restrict_self() {
                    Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => {}
                    Ok(_) if !self.required => {}
                    // No message: formatting would allocate.
                    Ok(_) | Err(_) => {
                        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                    }
                }
            }
            if let Some(ruleset) = self.own_ports.take() {
                match ruleset.restrict_self() {
                    Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => {}
                    Ok(_) if !self.required => {}
                    Ok(_) | Err(_) => {
                        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                    }
                }
            }
            for filter in self.filters.into_iter().flatten() {
                if seccompiler::apply_filter(filter).is_err() {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
            }
            // SAFETY: close_range with integer arguments; CLOEXEC keeps std's own
            // exec-error pipe working until the exec.
            unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    3 as libc::c_uint,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = self.required;
        Ok(())
    }
}

/// Empties every capability set of the calling process: bounding (so an exec as root
/// regains nothing), ambient, inheritable, permitted and effective; and, where it may,
/// locks root's special treatment off (`SECBIT_NOROOT`). Run as a user without
/// capabilities the bounding set cannot be changed (`EPERM`) and needs no change: the
/// sets are empty and `no_new_privs` keeps file capabilities from adding any.
#[cfg(target_os = "linux")]
fn drop_capabilities() -> std::io::Result<()> {
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: prctl and capset with integers and structs on our stack only.
    unsafe {
        // Best effort: needs CAP_SETPCAP, which only a privileged server has.
        libc::prctl(
            libc::PR_SET_SECUREBITS,
            SECBIT_NOROOT
                | SECBIT_NOROOT_LOCKED
                | SECBIT_NO_SETUID_FIXUP
                | SECBIT_NO_SETUID_FIXUP_LOCKED,
            0,
            0,
            0,
        );
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    // Past the last capability this kernel knows.
                    Some(libc::EINVAL) => break,
                    // No CAP_SETPCAP: nothing to drop from a process without privileges.
                    Some(libc::EPERM) => break,
                    _ => return Err(std::io::Error::last_os_error()),
                }
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let mut header = Header {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let empty = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header as *mut Header, empty.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Adds the calling process's own `/proc/self` directory (read files and list) to the
/// ruleset behind `ruleset`. Called in the child between fork and exec: system calls
/// only, on a static path; a failure leaves `/proc/self` closed, as for tools.
#[cfg(target_os = "linux")]
fn grant_own_proc(ruleset: &std::os::fd::OwnedFd) {
    const READ_FILE: u64 = 1 << 2;
    const READ_DIR: u64 = 1 << 3;
    grant(ruleset, c"/proc/self", READ_FILE | READ_DIR);
}

/// Adds `path` with `rights` to the ruleset behind `ruleset` (between fork and exec:
/// system calls only; a failure leaves the path closed).
#[cfg(target_os = "linux")]
fn grant(ruleset: &std::os::fd::OwnedFd, path: &std::ffi::CStr, rights: u64) {
    use std::os::fd::AsRawFd;
    /// `struct landlock_path_beneath_attr` (packed in the kernel's UAPI).
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;
    // SAFETY: open on a NUL-terminated path, landlock_add_rule with a pointer to a
    // struct on our stack, close of the descriptor we opened: no allocation, no lock.
    unsafe {
        let dir = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if dir < 0 {
            return;
        }
        let attr = PathBeneath {
            allowed_access: rights,
            parent_fd: dir,
        };
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        );
        libc::close(dir);
    }
}
