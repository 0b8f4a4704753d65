//! The seccomp filters of a confined process. Two kinds of rule:
//!
//! - system calls no build or inspection tool needs fail with `EPERM` whatever the
//!   agent (a list of what is refused: the kernel's surface beyond these is what a
//!   program is);
//! - sockets are an allowlist: [`socket_rules`] refuses every family, type and protocol
//!   but the few a confined tool needs. Without network that is none (UNIX socket
//!   pairs stay: runtimes use them as pipes); with network, TCP and UDP over IPv4 and
//!   IPv6, and nothing else — not MPTCP, SCTP or raw IP, which Landlock's TCP rule does
//!   not see, nor NETLINK, PACKET, VSOCK or pathname UNIX sockets, which it cannot.
//!
//! On x86_64 a second, hand-written filter refuses the x32 system call numbers, which
//! seccompiler's filter (matching exact numbers) would let through to a kernel built
//! with the x32 ABI.
//!
//! Compiled once per variant (with and without network) and kept for the life of the
//! process.
//!
//! What must not live here: file or TCP port rules (Landlock does those, with paths).

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

/// SysV IPC: refused where the process has no private IPC namespace (there it would
/// reach the host's segments, queues and semaphores).
const SYSV_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// The `clone` flags that make a namespace: a nested one is refused (`unshare` and
/// `setns` are in [`REFUSED`]; `clone3`, whose flags sit in memory seccomp cannot
/// read, answers `ENOSYS`, so libc falls back to `clone`).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// A confined process's filters, in the order they are installed.
pub(super) type Filters = Vec<BpfProgram>;

/// The compiled filters for an agent with or without network, and with SysV IPC
/// refused (`refuse_ipc`: no private IPC namespace) or not.
pub(super) fn filters(network: bool, refuse_ipc: bool) -> Result<&'static Filters, SandboxError> {
    static CELLS: [OnceLock<Result<Filters, String>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let cell = &CELLS[usize::from(network) * 2 + usize::from(refuse_ipc)];
    cell.get_or_init(|| compile(network, refuse_ipc))
        .as_ref()
        .map_err(|e| SandboxError::Setup(format!("seccomp: {e}")))
}

fn compile(network: bool, refuse_ipc: bool) -> Result<Filters, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let failed = |e: seccompiler::BackendError| e.to_string();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    if refuse_ipc {
        rules.extend(SYSV_IPC.iter().map(|&call| (call, Vec::new())));
    }
    rules.insert(libc::SYS_socket, socket_rules(network).map_err(failed)?);
    rules.insert(libc::SYS_socketpair, socketpair_rules().map_err(failed)?);
    rules.insert(libc::SYS_clone, clone_rules().map_err(failed)?);
    for (call, rules_of) in fast_open_rules().map_err(failed)? {
        rules.insert(call, rules_of);
    }
    let (mknod, mknodat) = device_node_rules().map_err(failed)?;
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, mknod);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = mknod;
    rules.insert(libc::SYS_mknodat, mknodat);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let mut filters = vec![BpfProgram::try_from(filter).map_err(|e| e.to_string())?];
    if let Some(guard) = enosys_guard() {
        filters.push(guard);
    }
    Ok(filters)
}

/// TCP Fast Open, which opens a connection without `connect()` (so without Landlock's
/// connect hook): `MSG_FASTOPEN` on `sendto`, `sendmsg` and `sendmmsg`, and the
/// `TCP_FASTOPEN*` socket options. Inside a network namespace it reaches nothing
/// anyway; this closes it on the Landlock fallback too.
fn fast_open_rules() -> Result<Vec<(i64, Vec<SeccompRule>)>, seccompiler::BackendError> {
    let flag = |index: u8| {
        SeccompRule::new(vec![SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(libc::MSG_FASTOPEN as u64),
            libc::MSG_FASTOPEN as u64,
        )?])
    };
    let option = |name: i32| {
        SeccompRule::new(vec![
            arg(1, SeccompCmpOp::Eq, libc::IPPROTO_TCP.into())?,
            arg(2, SeccompCmpOp::Eq, name.into())?,
        ])
    };
    Ok(vec![
        (libc::SYS_sendto, vec![flag(3)?]),
        (libc::SYS_sendmsg, vec![flag(2)?]),
        (libc::SYS_sendmmsg, vec![flag(3)?]),
        (
            libc::SYS_setsockopt,
            vec![
                option(libc::TCP_FASTOPEN)?,
                option(libc::TCP_FASTOPEN_CONNECT)?,
            ],
        ),
    ])
}

/// `clone` with any namespace flag (the flags are its first argument on every
/// architecture we build for).
fn clone_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag as u64),
                flag as u64,
            )?])
        })
        .collect()
}

fn arg(
    index: u8,
    op: SeccompCmpOp,
    value: i64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value as u64)
}

/// The type's low bits; `SOCK_CLOEXEC` and `SOCK_NONBLOCK` are flags above them.
const SOCK_TYPE_MASK: u64 = 0xf;

/// When `socket(family, type, protocol)` is refused: every rule is one refused shape,
/// so together they are the complement of what is allowed. Without network nothing
/// is allowed; with it, `(AF_INET | AF_INET6, SOCK_STREAM, 0 | IPPROTO_TCP)` — which
/// Landlock's TCP rule governs — and `(AF_INET | AF_INET6, SOCK_DGRAM, 0 |
/// IPPROTO_UDP)`.
fn socket_rules(network: bool) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    if !network {
        // An empty rule list matches every call.
        return Ok(Vec::new());
    }
    let type_is = |value: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            MaskedEq(SOCK_TYPE_MASK),
            value as u64,
        )
    };
    // "type & 0xf is neither" has no single comparison (a masked one compares equal
    // only), so the refused types are listed one by one: every value of the mask.
    let mut rules = vec![SeccompRule::new(vec![
        arg(0, Ne, libc::AF_INET.into())?,
        arg(0, Ne, libc::AF_INET6.into())?,
    ])?];
    for family in [libc::AF_INET, libc::AF_INET6] {
        for sock in 0..=SOCK_TYPE_MASK as i32 {
            if sock != libc::SOCK_STREAM && sock != libc::SOCK_DGRAM {
                rules.push(SeccompRule::new(vec![
                    arg(0, Eq, family.into())?,
                    type_is(sock)?,
                ])?);
            }
        }
        for (sock, protocol) in [
            (libc::SOCK_STREAM, libc::IPPROTO_TCP),
            (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
        ] {
            rules.push(SeccompRule::new(vec![
                arg(0, Eq, family.into())?,
                type_is(sock)?,
                arg(2, Ne, 0)?,
                arg(2, Ne, protocol.into())?,
            ])?);
        }
    }
    Ok(rules)
}

/// `socketpair` only for UNIX sockets: a connected pair reaches nothing outside the
/// process tree.
fn socketpair_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    Ok(vec![SeccompRule::new(vec![arg(
        0,
        SeccompCmpOp::Ne,
        libc::AF_UNIX.into(),
    )?])?])
}

/// `mknod` and `mknodat` of a character or block device (Landlock grants no device
/// creation either, and the capability is dropped: three walls).
fn device_node_rules() -> Result<(Vec<SeccompRule>, Vec<SeccompRule>), seccompiler::BackendError> {
    let of = |mode_arg: u8| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        [libc::S_IFCHR, libc::S_IFBLK]
            .into_iter()
            .map(|kind| {
                SeccompRule::new(vec![SeccompCondition::new(
                    mode_arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(u64::from(libc::S_IFMT)),
                    u64::from(kind),
                )?])
            })
            .collect()
    };
    Ok((of(1)?, of(2)?))
}

/// On x86_64: a filter that answers `ENOSYS` (as a kernel without them would) to
/// `clone3` and to every system call number with the x32 bit set, checked after the
/// architecture.
#[cfg(target_arch = "x86_64")]
fn enosys_guard() -> Option<BpfProgram> {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    Some(vec![
        op(LD_W_ABS, 0, 0, ARCH_OFFSET),
        // Another architecture is the first filter's to refuse.
        op(JEQ_K, 0, 4, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, NR_OFFSET),
        op(JGE_K, 1, 0, X32_SYSCALL_BIT),
        op(JEQ_K, 0, 1, libc::SYS_clone3 as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

#[cfg(not(target_arch = "x86_64"))]
fn enosys_guard() -> Option<BpfProgram> {
    None
}
