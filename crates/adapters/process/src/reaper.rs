//! The reaper: how every process we start is ended with all its descendants, also
//! those that left its process group (`setsid`) or were orphaned on purpose (a double
//! fork).
//!
//! Between fork and exec the child we started becomes a *reaper*: it marks itself a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan below it is re-parented
//! to it instead of to init, forks once more, and the second child goes on to be
//! confined and to exec the program. The reaper never execs; it blocks every signal it
//! can, closes every descriptor but two, and waits on them:
//!
//! - a `signalfd` for `SIGCHLD`: when the program exits, the reaper *sweeps* (below)
//!   and exits with the program's status (the same code, or the same signal);
//! - the read end of a control pipe whose write end only the server holds: when the
//!   server closes it ([`Reaper::end`], dropping the handle) or dies, the reaper sweeps
//!   and kills itself.
//!
//! A sweep reads the reaper's children (`/proc/thread-self/children`), kills each with
//! `SIGKILL` and reaps, again and again, until it has no child left: a descendant whose
//! parent is killed becomes the reaper's child and is killed in the next round. When
//! that file cannot be read (no `/proc`, a kernel without `CONFIG_PROC_CHILDREN`), only
//! the program itself is killed and the survivors are documented (`docs/security.md`).
//!
//! The reaper is outside the sandbox's Landlock domain, so a confined program cannot
//! signal it where the kernel scopes signals (Landlock ABI 6); `SIGTERM` to the group
//! reaches the program and leaves the reaper alone (it blocks it). Nobody else ever
//! sends it `SIGKILL`: ending a tree is closing the control pipe.
//!
//! In namespaces (ADR 0056), the reaper first enters them ([`Namespaces::enter`]);
//! its child is then PID 1 of a new PID namespace, a small init that forks the program
//! and passes the program's wait status back through a pipe. When the program ends the
//! init exits and the kernel kills everything left in the namespace; killing the init
//! (the sweep) does the same. With network, the reaper also holds the egress proxy's
//! listener inside the namespace and hands each connection to the server over a UNIX
//! socket pair (`SCM_RIGHTS`); it keeps no copy.
//!
//! Everything the reaper does is a system call on memory of its own stack: a forked
//! child of a multithreaded process may not allocate or take a lock.
//!
//! What must not live here: confinement (`sandbox`), reading output (`process`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sandbox::Namespaces;

/// The server's end of a reaper: closing it (or dropping it) ends the whole tree.
#[derive(Debug)]
pub struct Reaper {
    control: Option<OwnedFd>,
    /// Where the reaper hands over the connections its tree opens to the egress
    /// proxy (a UNIX socket pair; `None` without network in namespaces).
    handoff: Option<OwnedFd>,
}

/// The reaper's end, moved into the child before fork.
#[derive(Debug)]
pub struct ReaperEnd {
    control: OwnedFd,
    handoff: Option<OwnedFd>,
}

/// A control pipe: the server's end and the reaper's end; with `handoff`, also the
/// socket pair the proxy's connections cross.
pub fn pair(handoff: bool) -> io::Result<(Reaper, ReaperEnd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array on our stack.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (ours, theirs) = if handoff {
        let mut pair = [0 as libc::c_int; 2];
        // SAFETY: socketpair writes two descriptors into the array on our stack.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nothing else.
        unsafe {
            (
                Some(OwnedFd::from_raw_fd(pair[0])),
                Some(OwnedFd::from_raw_fd(pair[1])),
            )
        }
    } else {
        (None, None)
    };
    Ok((
        Reaper {
            control: Some(write),
            handoff: ours,
        },
        ReaperEnd {
            control: read,
            handoff: theirs,
        },
    ))
}

impl Reaper {
    /// Ends the tree: the reaper kills every descendant, then itself.
    pub fn end(&mut self) {
        self.control = None;
    }

    /// The server's end of the handoff socket, once (for the egress proxy).
    pub fn take_handoff(&mut self) -> Option<OwnedFd> {
        self.handoff.take()
    }
}

impl ReaperEnd {
    /// Called in the forked child (from `pre_exec`). Returns only in the program's
    /// process, which goes on to `confine` itself and exec; the reaper (and, in
    /// namespaces, the namespace's init) never return from here. An error means the
    /// tree could not be set up, and nothing was started.
    ///
    /// With `namespaces`, the reaper enters them first ([`Namespaces::enter`]); its
    /// next child is PID 1 of the new PID namespace, a small init that forks the
    /// program, reaps whatever is orphaned to it, and passes the program's status to
    /// the reaper when the program ends (then the kernel ends the rest).
    ///
    /// # Safety
    /// Only between fork and exec, in the child: it forks and never returns in the
    /// reaper.
    pub unsafe fn become_reaper(
        &self,
        namespaces: Option<&Namespaces>,
        confine: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let control = self.control.as_raw_fd();
        let handoff = self.handoff.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        // SAFETY: system calls on our own stack only (see the module docs).
        unsafe {
            if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = match namespaces {
                Some(namespaces) => namespaces.enter()?,
                None => -1,
            };
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            let mut child: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigemptyset(&mut child);
            libc::sigaddset(&mut child, libc::SIGCHLD);
            if libc::sigprocmask(libc::SIG_SETMASK, &all, &mut before) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The default disposition (not "ignore"), so children are not reaped
            // behind our back and SIGCHLD stays pending for the signalfd.
            libc::signal(libc::SIGCHLD, libc::SIG_DFL);
            let signals = libc::signalfd(-1, &child, libc::SFD_CLOEXEC);
            if signals < 0 {
                let error = io::Error::last_os_error();
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return Err(error);
            }
            // In namespaces: the init passes the program's status through this pipe.
            let mut status = [-1 as libc::c_int; 2];
            if namespaces.is_some() && libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                let error = io::Error::last_os_error();
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return Err(error);
            }
            let first = libc::fork();
            if first < 0 {
                let error = io::Error::last_os_error();
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return Err(error);
            }
            if first == 0 {
                for fd in [signals, control, listener, handoff, status[0]] {
                    if fd >= 0 {
                        libc::close(fd);
                    }
                }
                if namespaces.is_some() {
                    // PID 1 of the namespace: fork the program, stay its init.
                    return init(status[1], &before, confine);
                }
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return confine();
            }
            if status[1] >= 0 {
                libc::close(status[1]);
            }
            keep(
                first,
                Fds {
                    signals,
                    control,
                    status: status[0],
                    listener,
                    handoff,
                },
            )
        }
    }
}

/// The namespace's init: forks the program (which returns from here to be confined
/// and exec), then reaps everything orphaned to it until the program ends, writes the
/// program's raw wait status to `status` and exits — and the kernel kills whatever is
/// left in the namespace. Dies with the reaper (`PR_SET_PDEATHSIG`).
///
/// # Safety
/// Only in the init, forked by the reaper.
unsafe fn init(
    status: RawFd,
    before: &libc::sigset_t,
    confine: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    // SAFETY: system calls on our own stack only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let program = libc::fork();
        if program < 0 {
            return Err(io::Error::last_os_error());
        }
        if program == 0 {
            libc::close(status);
            libc::sigprocmask(libc::SIG_SETMASK, before, std::ptr::null_mut());
            return confine();
        }
        close_all_except(&[status]);
        loop {
            let mut code: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut code, 0);
            if pid == program {
                libc::write(
                    status,
                    (&code as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>(),
                );
                libc::_exit(0);
            }
            if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                libc::_exit(0);
            }
        }
    }
}

/// The descriptors the reaper keeps (-1: none).
#[derive(Clone, Copy)]
struct Fds {
    signals: RawFd,
    control: RawFd,
    /// The init's status pipe (namespaces only).
    status: RawFd,
    /// The proxy's listener inside the network namespace.
    listener: RawFd,
    /// The server's handoff socket.
    handoff: RawFd,
}

/// The reaper's life: wait for its child's exit or the control pipe's end, hand over
/// every connection made to the proxy's listener, sweep, exit as the program did.
/// `child` is the program itself, or in namespaces the namespace's init.
///
/// # Safety
/// Only in the reaper (see [`ReaperEnd::become_reaper`]).
unsafe fn keep(child: libc::pid_t, fds: Fds) -> ! {
    // SAFETY: system calls on our own stack only.
    unsafe {
        close_all_except(&[
            fds.signals,
            fds.control,
            fds.status,
            fds.listener,
            fds.handoff,
        ]);
        let mut status: Option<libc::c_int> = None;
        let mut end = false;
        loop {
            let mut polled = [
                libc::pollfd {
                    fd: fds.signals,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: fds.control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: fds.listener,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let count = if fds.listener >= 0 { 3 } else { 2 };
            if libc::poll(polled.as_mut_ptr(), count, -1) < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // Cannot wait any more: end everything rather than leave it running.
                end = true;
            }
            if polled[1].revents != 0 {
                end = true;
            }
            if polled[0].revents != 0 {
                let mut info = [0u8; 128];
                libc::read(fds.signals, info.as_mut_ptr().cast(), info.len());
            }
            if count == 3 && polled[2].revents != 0 {
                hand_over(fds.listener, fds.handoff);
            }
            reap(child, &mut status, libc::WNOHANG);
            if end || status.is_some() {
                break;
            }
        }
        sweep(child, &mut status);
        if fds.status >= 0 && status.is_some() {
            // The init's own status says nothing; the program's came through the pipe
            // (none: the init was killed first, so the program was too).
            let mut code: libc::c_int = libc::SIGKILL;
            let n = libc::read(
                fds.status,
                (&mut code as *mut libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>(),
            );
            status = Some(if n == std::mem::size_of::<libc::c_int>() as isize {
                code
            } else {
                libc::SIGKILL
            });
        }
        match status {
            Some(code) if !end && libc::WIFEXITED(code) => libc::_exit(libc::WEXITSTATUS(code)),
            Some(code) if !end && libc::WIFSIGNALED(code) => {
                let signal = libc::WTERMSIG(code);
                let mut only: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut only);
                libc::sigaddset(&mut only, signal);
                libc::signal(signal, libc::SIG_DFL);
                libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal)
            }
            _ => {
                libc::kill(libc::getpid(), libc::SIGKILL);
                libc::_exit(128 + libc::SIGKILL)
            }
        }
    }
}

/// Accepts every pending connection on the proxy's listener and passes each to the
/// server over `handoff` (`SCM_RIGHTS`); the reaper keeps no copy. Without a server
/// to take them (the socket closed), connections are simply closed.
///
/// # Safety
/// Only in the reaper.
unsafe fn hand_over(listener: RawFd, handoff: RawFd) {
    // SAFETY: accept4/sendmsg/close with structs and buffers on our stack.
    unsafe {
        loop {
            let connection = libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            );
            if connection < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if handoff >= 0 {
                send_fd(handoff, connection);
            }
            libc::close(connection);
        }
    }
}

/// Sends one descriptor over a UNIX socket, with a one-byte message.
///
/// # Safety
/// Only in the reaper.
unsafe fn send_fd(socket: RawFd, fd: RawFd) {
    const SPACE: usize = 64;
    #[repr(C, align(8))]
    struct Control([u8; SPACE]);
    // SAFETY: the message, its iovec and control buffer all live on our stack; the
    // CMSG macros compute offsets within that buffer.
    unsafe {
        let mut byte = [1u8];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = Control([0; SPACE]);
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null() {
            return;
        }
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
        while libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// Reaps children (`flags` 0 blocks for the first); remembers the program's status.
/// Returns false when there is no child left.
///
/// # Safety
/// Only in the reaper.
unsafe fn reap(program: libc::pid_t, status: &mut Option<libc::c_int>, flags: libc::c_int) -> bool {
    let mut flags = flags;
    loop {
        let mut code: libc::c_int = 0;
        // SAFETY: waitpid writes the status into our stack variable.
        let pid = unsafe { libc::waitpid(-1, &mut code, flags) };
        if pid == program && status.is_none() {
            *status = Some(code);
        }
        if pid > 0 {
            flags = libc::WNOHANG;
            continue;
        }
        if pid < 0 {
            let error = io::Error::last_os_error().raw_os_error();
            if error == Some(libc::EINTR) {
                continue;
            }
            return error != Some(libc::ECHILD);
        }
        return true;
    }
}

/// Kills every child and reaps it until there is none: descendants become children
/// as their parents die (the reaper is their subreaper), and are killed in turn.
///
/// # Safety
/// Only in the reaper.
unsafe fn sweep(program: libc::pid_t, status: &mut Option<libc::c_int>) {
    // SAFETY: system calls on our own stack only.
    unsafe {
        loop {
            if !kill_children() {
                // No list of children: the program, at least; then whatever has ended.
                libc::kill(program, libc::SIGKILL);
                reap(program, status, libc::WNOHANG);
                return;
            }
            if !reap(program, status, 0) {
                return;
            }
        }
    }
}

/// Sends `SIGKILL` to every child listed in `/proc/thread-self/children`. False when
/// the list cannot be read.
///
/// # Safety
/// Only in the reaper.
unsafe fn kill_children() -> bool {
    // SAFETY: open/read/close on a static path and a buffer on our stack.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        let mut digits = false;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            if n <= 0 {
                break;
            }
            for &byte in &buf[..n as usize] {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(libc::pid_t::from(byte - b'0'));
                    digits = true;
                } else {
                    if digits && pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                    digits = false;
                }
            }
        }
        if digits && pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(fd);
        true
    }
}

/// Closes every descriptor but those in `keep` (negative entries ignored; the
/// standard streams included: the program has its own copies, and a copy held here
/// would keep pipes open).
///
/// # Safety
/// Only in the reaper or the init.
unsafe fn close_all_except(keep: &[RawFd]) {
    let mut sorted = [-1 as RawFd; 8];
    let mut n = 0;
    for &fd in keep {
        if fd >= 0 && n < sorted.len() {
            sorted[n] = fd;
            n += 1;
        }
    }
    sorted[..n].sort_unstable();
    let mut first: libc::c_int = 0;
    // SAFETY: closes ranges of integers; nothing of ours is in them.
    unsafe {
        for &kept in &sorted[..n] {
            if first < kept {
                close_range(first, kept - 1);
            }
            first = kept + 1;
        }
        close_range(first, libc::c_int::MAX);
    }
}

/// Closes descriptors `first..=last`.
///
/// # Safety
/// Between fork and exec only.
unsafe fn close_range(first: libc::c_int, last: libc::c_int) {
    // SAFETY: close_range takes plain integers; the fallback closes one by one.
    unsafe {
        let done = libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0 as libc::c_uint,
        ) == 0;
        if !done {
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            let top = limit.rlim_cur.min(65_536) as libc::c_int;
            for fd in first..=last.min(top) {
                libc::close(fd);
            }
        }
    }
}
