//! The seccomp filter of a tool's process: system calls no build or inspection tool
//! needs fail with `EPERM` (everything else is allowed). Compiled once per variant
//! (with and without network) and kept for the life of the process.
//!
//! What must not live here: file or TCP rules (Landlock does those, with paths).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;

/// Refused whatever the agent: debugging other processes, mounting, loading kernel
/// code, namespaces, raw kernel interfaces, and `io_uring` (whose operations seccomp
/// cannot see).
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The compiled filter for an agent with or without network.
pub(super) fn filter(network: bool) -> Result<&'static BpfProgram, SandboxError> {
    static WITH_NETWORK: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    static WITHOUT_NETWORK: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    let cell = if network {
        &WITH_NETWORK
    } else {
        &WITHOUT_NETWORK
    };
    cell.get_or_init(|| compile(network))
        .as_ref()
        .map_err(|e| SandboxError::Setup(format!("seccomp: {e}")))
}

fn compile(network: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    if !network {
        rules.insert(libc::SYS_socket, socket_rules().map_err(|e| e.to_string())?);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// Without network: IP sockets other than TCP (which Landlock refuses by port) and
/// packet sockets. UNIX sockets stay (builds use them locally).
fn socket_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let domain = |family: i32| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
    };
    // The type's low bits; SOCK_CLOEXEC and SOCK_NONBLOCK are flags above them.
    let kind = |kind: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            kind as u64,
        )
    };
    let mut rules = vec![SeccompRule::new(vec![domain(libc::AF_PACKET)?])?];
    for family in [libc::AF_INET, libc::AF_INET6] {
        for sock in [
            libc::SOCK_DGRAM,
            libc::SOCK_RAW,
            libc::SOCK_SEQPACKET,
            libc::SOCK_RDM,
        ] {
            rules.push(SeccompRule::new(vec![domain(family)?, kind(sock)?])?);
        }
    }
    Ok(rules)
}
