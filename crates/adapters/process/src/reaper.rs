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
//! Everything the reaper does is a system call on memory of its own stack: a forked
//! child of a multithreaded process may not allocate or take a lock.
//!
//! What must not live here: confinement (`sandbox`), reading output (`process`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The server's end of a reaper: closing it (or dropping it) ends the whole tree.
#[derive(Debug)]
pub struct Reaper {
    control: Option<OwnedFd>,
}

/// The reaper's end, moved into the child before fork.
#[derive(Debug)]
pub struct ReaperEnd {
    control: OwnedFd,
}

/// A control pipe: the server's end and the reaper's end.
pub fn pair() -> io::Result<(Reaper, ReaperEnd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array on our stack.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        Reaper {
            control: Some(write),
        },
        ReaperEnd { control: read },
    ))
}

impl Reaper {
    /// Ends the tree: the reaper kills every descendant, then itself.
    pub fn end(&mut self) {
        self.control = None;
    }
}

impl ReaperEnd {
    /// Called in the forked child (from `pre_exec`). Returns only in the grandchild,
    /// which goes on to `confine` itself and exec the program; the reaper never
    /// returns from here. An error means the reaper could not be set up, and nothing
    /// was started.
    ///
    /// # Safety
    /// Only between fork and exec, in the child: it forks and never returns in the
    /// reaper.
    pub unsafe fn become_reaper(&self, confine: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let control = self.control.as_raw_fd();
        // SAFETY: system calls on our own stack only (see the module docs).
        unsafe {
            if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
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
            let program = libc::fork();
            if program < 0 {
                let error = io::Error::last_os_error();
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return Err(error);
            }
            if program == 0 {
                libc::close(signals);
                libc::close(control);
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return confine();
            }
            keep(program, signals, control)
        }
    }
}

/// The reaper's life: wait for the program's exit or the control pipe's end, sweep,
/// exit as the program did.
///
/// # Safety
/// Only in the reaper (see [`ReaperEnd::become_reaper`]).
unsafe fn keep(program: libc::pid_t, signals: RawFd, control: RawFd) -> ! {
    // SAFETY: system calls on our own stack only.
    unsafe {
        close_all_except(signals, control);
        let mut status: Option<libc::c_int> = None;
        let mut end = false;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: signals,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: control,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // Cannot wait any more: end everything rather than leave it running.
                end = true;
            }
            if fds[1].revents != 0 {
                end = true;
            }
            if fds[0].revents != 0 {
                let mut info = [0u8; 128];
                libc::read(signals, info.as_mut_ptr().cast(), info.len());
            }
            reap(program, &mut status, libc::WNOHANG);
            if end || status.is_some() {
                break;
            }
        }
        sweep(program, &mut status);
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

/// Closes every descriptor but `a` and `b` (the standard streams included: the
/// program has its own copies, and a copy held here would keep pipes open).
///
/// # Safety
/// Only in the reaper.
unsafe fn close_all_except(a: RawFd, b: RawFd) {
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    // SAFETY: close_range takes plain integers; the fallback closes one by one.
    unsafe {
        for (first, last) in [
            (0, low - 1),
            (low + 1, high - 1),
            (high + 1, libc::c_int::MAX),
        ] {
            if first > last {
                continue;
            }
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
}
