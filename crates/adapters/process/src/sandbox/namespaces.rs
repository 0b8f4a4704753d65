//! Namespaces of its own for every confined process tree (ADR 0056): what the program
//! cannot see, it cannot reach, whatever system call it tries.
//!
//! The reaper (`crate::reaper`) calls [`Namespaces::enter`] right after it forked from
//! the server and before it forks anything else. One `unshare` gives it new user,
//! mount, network, IPC, UTS, PID and (where the kernel has it) cgroup namespaces:
//!
//! - **user**: the server's own uid and gid map to themselves, nothing else is mapped;
//!   the capabilities the namespace grants are dropped again before exec
//!   (`super::drop_capabilities`), and seccomp refuses nested namespaces.
//! - **network**: only the namespace's own loopback, brought up here. No socket of any
//!   family, protocol or flag reaches the host's addresses (agentplane's own port, a
//!   model server, a database): there is no route to them. An agent with network gets
//!   a listener on the namespace's `127.0.0.1:`[`PROXY_PORT`], which the reaper hands,
//!   connection by connection, to the server's egress proxy (`crate::egress`).
//! - **IPC**: private, so SysV segments, queues and semaphores of the host are
//!   invisible, and the program's own go when the namespace does.
//! - **PID**: the reaper's next child is the namespace's init; when it ends, the
//!   kernel kills everything in the namespace (`setsid`, double forks, daemons).
//! - **mount**: every mount made private, a fresh `tmpfs` on `/tmp` (granted to the
//!   program by Landlock), and an empty read-only `tmpfs` over each masked directory
//!   ([`super::mask_paths`]: the configuration and data directories).
//! - **UTS**: a hostname of its own.
//!
//! Everything here runs between fork and exec: system calls on memory prepared before
//! the fork, no allocation, no lock.
//!
//! What must not live here: the rules inside (Landlock, seccomp: `super`), the reaper's
//! loop (`crate::reaper`), the proxy (`crate::egress`).

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The port of the egress proxy's listener inside the namespace (its own loopback:
/// nothing else listens there).
pub const PROXY_PORT: u16 = 3128;

/// Switches namespaces off for this process and its children (the fallback's test,
/// and operators on a kernel that misbehaves): `AGENTPLANE_SANDBOX_NAMESPACES=off`.
pub const SWITCH_ENV: &str = "AGENTPLANE_SANDBOX_NAMESPACES";

const FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWPID;

/// Size of the private `/tmp`.
const TMP_OPTIONS: &std::ffi::CStr = c"mode=1777,size=512m,nr_inodes=65536";

/// Whether this machine gives a confined process namespaces of its own; the reason
/// when it does not (probed once: a forked child tries the same `unshare`).
pub fn availability() -> Result<(), String> {
    static PROBED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBED.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    if std::env::var(SWITCH_ENV).is_ok_and(|v| matches!(v.as_str(), "off" | "0" | "false")) {
        return Err(format!("switched off ({SWITCH_ENV}=off)"));
    }
    // SAFETY: the child makes system calls only and leaves with _exit; the parent
    // waits for it by pid.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(format!(
                "could not probe: fork: {}",
                io::Error::last_os_error()
            ));
        }
        if pid == 0 {
            let code = if libc::unshare(FLAGS) == 0 {
                0
            } else {
                io::Error::last_os_error().raw_os_error().unwrap_or(1)
            };
            libc::_exit(code.clamp(0, 255));
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err("could not probe: waitpid failed".to_owned());
            }
        }
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            return Ok(());
        }
        let errno = libc::WEXITSTATUS(status);
        Err(format!(
            "unprivileged user namespaces are refused here ({}); allow them \
             (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, \
             or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or set \
             [sandbox] fallback = \"landlock\"",
            io::Error::from_raw_os_error(errno)
        ))
    }
}

/// A line for `/proc/self/{uid,gid}_map`, formatted before the fork.
struct MapLine {
    bytes: [u8; 32],
    len: usize,
}

impl MapLine {
    fn identity(id: u32) -> MapLine {
        let text = format!("{id} {id} 1\n");
        let mut bytes = [0u8; 32];
        let len = text.len().min(bytes.len());
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        MapLine { bytes, len }
    }
}

/// A granted root below `/tmp`, mounted back into the private `/tmp` at its own path.
/// A descriptor opened outside the new mount namespace cannot be the source of a bind
/// mount inside it, so the root is opened again inside (no symlink followed) before
/// the fresh `tmpfs` hides it; the workspace's new descriptor must be the very
/// directory that was checked (same device and inode), or nothing runs.
/// A directory hidden under an empty read-only `tmpfs`. The workspace may lie below
/// one (an execution's folder in the data directory): then the folders down to it are
/// made in the `tmpfs` and the workspace is mounted back there before the `tmpfs` is
/// made read-only, so the program sees its workspace and nothing beside it.
#[derive(Debug)]
struct Mask {
    path: CString,
    /// The folders from below `path` down to the workspace, parents first; empty when
    /// the workspace is not below `path`.
    to_workspace: Vec<CString>,
}

/// The `tmpfs` of a mask: tiny, and room for the folders down to a workspace.
const MASK_OPTIONS: &std::ffi::CStr = c"mode=0555,size=4k,nr_inodes=64";

struct Rebind {
    /// The root's path (the mount point inside).
    path: CString,
    is_dir: bool,
}

/// The most roots below `/tmp` mounted back (more: the program does not start).
const MAX_REBINDS: usize = 32;

/// What [`Namespaces::enter`] needs, prepared before the fork.
pub struct Namespaces {
    uid_map: MapLine,
    gid_map: MapLine,
    /// Directories hidden under an empty read-only tmpfs.
    masks: Vec<Mask>,
    /// Directories to create in the private `/tmp`, parents first.
    tmp_dirs: Vec<CString>,
    rebinds: Vec<Rebind>,
    /// The workspace's path, and the device and inode of its checked descriptor.
    workspace: CString,
    identity: (u64, u64),
    /// Open a proxy listener on the namespace's loopback.
    network: bool,
}

impl std::fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespaces")
            .field("masks", &self.masks)
            .field("rebinds", &self.rebinds.len())
            .field("workspace", &self.workspace)
            .field("network", &self.network)
            .finish()
    }
}

impl Namespaces {
    /// The namespaces of one process tree. `network` asks for the proxy's listener;
    /// `masks` are hidden; the workspace (its path and checked descriptor) and the
    /// other granted `roots` that lie below `/tmp` are mounted back into the private
    /// `/tmp`. `None` when the workspace's path cannot be passed to the kernel.
    pub fn new(
        network: bool,
        masks: &[std::path::PathBuf],
        workspace: (&Path, &std::os::fd::OwnedFd),
        roots: &[std::path::PathBuf],
    ) -> Option<Namespaces> {
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let identity = {
            use std::os::fd::AsRawFd;
            // SAFETY: fstat of a descriptor we borrow, into a struct on our stack.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(workspace.1.as_raw_fd(), &mut st) } != 0 {
                return None;
            }
            (st.st_dev, st.st_ino)
        };
        let tmp = Path::new("/tmp");
        let mut rebinds = Vec::new();
        let mut tmp_dirs: Vec<std::path::PathBuf> = Vec::new();
        let mut add = |path: &Path, is_dir: bool| {
            let Ok(below) = path.strip_prefix(tmp) else {
                return;
            };
            if below.as_os_str().is_empty()
                || rebinds
                    .iter()
                    .any(|r: &Rebind| r.path.as_bytes() == path.as_os_str().as_bytes())
            {
                return;
            }
            let mut parent = tmp.to_path_buf();
            let parts: Vec<_> = below.components().collect();
            let last = parts.len().saturating_sub(1);
            for (i, part) in parts.iter().enumerate() {
                parent.push(part);
                if (i < last || is_dir) && !tmp_dirs.contains(&parent) {
                    tmp_dirs.push(parent.clone());
                }
            }
            if let Ok(path) = CString::new(path.as_os_str().as_bytes()) {
                rebinds.push(Rebind { path, is_dir });
            }
        };
        add(workspace.0, true);
        for root in roots {
            if root.starts_with(tmp) && !root.starts_with(workspace.0) && root.exists() {
                add(root, root.is_dir());
            }
        }
        tmp_dirs.sort_by_key(|dir| dir.components().count());
        Some(Namespaces {
            uid_map: MapLine::identity(uid),
            gid_map: MapLine::identity(gid),
            masks: masks_for(masks, workspace.0),
            tmp_dirs: tmp_dirs
                .iter()
                .filter_map(|dir| CString::new(dir.as_os_str().as_bytes()).ok())
                .collect(),
            rebinds,
            workspace: CString::new(workspace.0.as_os_str().as_bytes()).ok()?,
            identity,
            network,
        })
    }

    /// Whether the tree gets the proxy's listener.
    pub fn network(&self) -> bool {
        self.network
    }

    /// Enters the namespaces (in the reaper, between fork and exec), and moves into
    /// the workspace as the new mount namespace shows it, checked to be the same
    /// directory as before. Returns the proxy listener's descriptor, or -1 without
    /// network. After it, the caller's next child is PID 1 of a new PID namespace.
    ///
    /// # Safety
    /// Only in a forked child, before exec: system calls on prepared memory only.
    pub unsafe fn enter(&self) -> io::Result<RawFd> {
        // SAFETY: system calls with pointers to memory owned by `self` or our stack.
        unsafe {
            if libc::unshare(FLAGS | libc::CLONE_NEWCGROUP) != 0 && libc::unshare(FLAGS) != 0 {
                return Err(io::Error::last_os_error());
            }
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(
                c"/proc/self/uid_map",
                &self.uid_map.bytes[..self.uid_map.len],
            )?;
            write_file(
                c"/proc/self/gid_map",
                &self.gid_map.bytes[..self.gid_map.len],
            )?;
            let name = b"agentplane-sandbox";
            libc::sethostname(name.as_ptr().cast(), name.len());
            // Nothing mounted here propagates back to the host.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            if is_dir(c"/tmp") {
                self.private_tmp()?;
            }
            for mask in &self.masks {
                // A mask below the private `/tmp` (and no granted root) names nothing
                // in this namespace: there is nothing to hide.
                if !is_dir(&mask.path) {
                    continue;
                }
                self.hide(mask)?;
            }
            let workspace = open_checked(&self.workspace, true, Some(self.identity))?;
            let moved = libc::fchdir(workspace);
            libc::close(workspace);
            check(moved)?;
            if !self.network {
                return Ok(-1);
            }
            loopback_up()?;
            proxy_listener()
        }
    }

    /// An empty read-only `tmpfs` over `mask`, with the workspace mounted back in it
    /// when it lies below (from a descriptor checked before the mount).
    unsafe fn hide(&self, mask: &Mask) -> io::Result<()> {
        const FLAGS: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: system calls on prepared paths and our stack.
        unsafe {
            if mask.to_workspace.is_empty() {
                return check(libc::mount(
                    c"tmpfs".as_ptr(),
                    mask.path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | FLAGS,
                    MASK_OPTIONS.as_ptr().cast(),
                ));
            }
            let workspace = open_checked(&self.workspace, true, Some(self.identity))?;
            let result = (|| {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    mask.path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    FLAGS,
                    MASK_OPTIONS.as_ptr().cast(),
                ))?;
                for dir in &mask.to_workspace {
                    check(libc::mkdir(dir.as_ptr(), 0o755))?;
                }
                check(libc::mount(
                    FdPath::of(workspace).as_ptr(),
                    self.workspace.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
                check(libc::mount(
                    std::ptr::null(),
                    mask.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_RDONLY | FLAGS,
                    MASK_OPTIONS.as_ptr().cast(),
                ))
            })();
            libc::close(workspace);
            result
        }
    }

    /// A fresh `tmpfs` on `/tmp`, with the roots below it mounted back.
    unsafe fn private_tmp(&self) -> io::Result<()> {
        if self.rebinds.len() > MAX_REBINDS {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        let mut fds = [-1 as RawFd; MAX_REBINDS];
        // SAFETY: system calls on prepared paths and our stack.
        unsafe {
            for (slot, rebind) in fds.iter_mut().zip(&self.rebinds) {
                let identity = (rebind.path == self.workspace).then_some(self.identity);
                match open_checked(&rebind.path, rebind.is_dir, identity) {
                    Ok(fd) => *slot = fd,
                    Err(error) => {
                        close_all(&fds);
                        return Err(error);
                    }
                }
            }
            let result = self.mount_tmp(&fds);
            close_all(&fds);
            result
        }
    }

    unsafe fn mount_tmp(&self, fds: &[RawFd]) -> io::Result<()> {
        // SAFETY: system calls on prepared paths and our stack.
        unsafe {
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                TMP_OPTIONS.as_ptr().cast(),
            ))?;
            for dir in &self.tmp_dirs {
                if libc::mkdir(dir.as_ptr(), 0o755) != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                {
                    return Err(io::Error::last_os_error());
                }
            }
            for (rebind, &fd) in self.rebinds.iter().zip(fds) {
                if !rebind.is_dir {
                    let point = libc::open(
                        rebind.path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                        0o644,
                    );
                    if point < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    libc::close(point);
                }
                let source = FdPath::of(fd);
                check(libc::mount(
                    source.as_ptr(),
                    rebind.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            Ok(())
        }
    }
}

/// The masks that name a directory, each with the folders down to `workspace` when it
/// lies below; a mask below another is hidden with it (the caller refuses a workspace
/// that is or holds a mask).
fn masks_for(masks: &[std::path::PathBuf], workspace: &Path) -> Vec<Mask> {
    masks
        .iter()
        .filter(|path| path.is_dir())
        .filter(|path| {
            !masks
                .iter()
                .any(|outer| outer != *path && path.starts_with(outer))
        })
        .filter_map(|path| {
            let below = workspace.strip_prefix(path).ok();
            let mut to_workspace = Vec::new();
            if let Some(below) = below {
                let mut dir = path.clone();
                for part in below.components() {
                    dir.push(part);
                    to_workspace.push(CString::new(dir.as_os_str().as_bytes()).ok()?);
                }
            }
            Some(Mask {
                path: CString::new(path.as_os_str().as_bytes()).ok()?,
                to_workspace,
            })
        })
        .collect()
}

/// `/proc/self/fd/<n>`, formatted on the stack.
struct FdPath([u8; 32]);

impl FdPath {
    fn of(fd: RawFd) -> FdPath {
        let mut buf = [0u8; 32];
        let prefix = b"/proc/self/fd/";
        buf[..prefix.len()].copy_from_slice(prefix);
        let mut digits = [0u8; 12];
        let mut n = fd.max(0) as u32;
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in 0..len {
            buf[prefix.len() + i] = digits[len - 1 - i];
        }
        FdPath(buf)
    }

    fn as_ptr(&self) -> *const libc::c_char {
        self.0.as_ptr().cast()
    }
}

unsafe fn close_all(fds: &[RawFd]) {
    for &fd in fds {
        if fd >= 0 {
            // SAFETY: closing descriptors we opened.
            unsafe { libc::close(fd) };
        }
    }
}

/// Opens `path` (`O_PATH`) with no symlink followed anywhere on it; with `identity`,
/// it must be that device and inode (`EXDEV` otherwise: the path now names another
/// directory than the one checked).
unsafe fn open_checked(
    path: &std::ffi::CStr,
    directory: bool,
    identity: Option<(u64, u64)>,
) -> io::Result<RawFd> {
    // SAFETY: openat2 with a struct on our stack, fstat into our stack.
    unsafe {
        let mut how: libc::open_how = std::mem::zeroed();
        how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
        if directory {
            how.flags |= libc::O_DIRECTORY as u64;
        }
        how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        let fd = libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = fd as RawFd;
        if let Some((dev, ino)) = identity {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 || st.st_dev != dev || st.st_ino != ino {
                libc::close(fd);
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
        Ok(fd)
    }
}

/// Where the program is told its proxy is (`HTTP_PROXY` and the rest).
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

unsafe fn is_dir(path: &std::ffi::CStr) -> bool {
    // SAFETY: stat fills a struct on our stack.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(path.as_ptr(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }
}

unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close with a static path and a slice we hold.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(error);
        }
        Ok(())
    }
}

/// Brings up the namespace's `lo` (it starts down).
unsafe fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket, two ioctls on a struct on our stack, close.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        }
        let error = io::Error::last_os_error();
        libc::close(fd);
        if result != 0 {
            return Err(error);
        }
        Ok(())
    }
}

/// The proxy's listener on the namespace's `127.0.0.1:PROXY_PORT`, non-blocking.
unsafe fn proxy_listener() -> io::Result<RawFd> {
    // SAFETY: socket/setsockopt/bind/listen with structs on our stack.
    unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = PROXY_PORT.to_be();
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let bound = libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) == 0
            && libc::listen(fd, 128) == 0;
        if !bound {
            let error = io::Error::last_os_error();
            libc::close(fd);
            return Err(error);
        }
        Ok(fd)
    }
}

/// Whether `path` is below (or is) one of the masked directories: such a path is
/// invisible inside, so it can be neither a workspace nor a granted root.
pub fn is_masked(path: &Path, masks: &[std::path::PathBuf]) -> bool {
    masks.iter().any(|mask| path.starts_with(mask))
}
