//! The one place in this crate that spawns processes.
//!
//! A confined run: the program is executed directly with an argv (no shell ever
//! interprets anything), in the workspace, with a scrubbed environment (only `PATH`,
//! `HOME` = the workspace, `LANG=C.UTF-8`, `TERM=dumb`, and what the caller adds),
//! stdin closed, in a process group of its own, and confined by the kernel
//! ([`crate::sandbox`]: Landlock, seccomp, rlimits, `no_new_privs`, applied between
//! fork and exec). When the sandbox is required and the kernel cannot enforce it, the
//! program is not started. stdout and stderr are read concurrently; each keeps at most the
//! output cap and is drained (and discarded) beyond it, so the program never blocks on
//! a full pipe, until [`DRAIN_CEILING`], where the group is killed.
//!
//! Every process starts under a [`reaper`](crate::reaper): the whole tree below it —
//! also what left the process group (`setsid`) or was orphaned by a double fork — is
//! killed on timeout, on output overflow, when the run's future is dropped (the
//! engine's own timeout, a cancelled turn), and also right after the program exits:
//! background children a command leaves behind do not outlive the call. Should
//! something still hold the output pipes open, the run stops waiting for them after
//! [`PIPE_GRACE`].
//!
//! Long-lived servers (MCP over stdio, [`start_server`]) are the other kind of process:
//! the operator configured them, so they inherit the host's environment minus our own
//! `AGENTPLANE_*` secrets, run in a Landlock domain of their own (so they cannot read
//! this process's `/proc` entries or signal it), keep their pipes open, and are ended by
//! [`ServerProcess::terminate`]: SIGTERM to the group and to every descendant found
//! through `/proc` (also those that left the group), a short grace, then the reaper
//! kills the whole tree. Dropping a [`ServerProcess`] kills the same tree at once.
//!
//! What must not live here: allowlists and how results read for the model (the
//! `shell` ensemble decides those); this module only runs a program it is given.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

pub use crate::sandbox::search_path;
use crate::sandbox::{self, Sandbox};

/// Bytes drained from one stream before the process group is killed: beyond this the
/// output is useless to a model and only costs CPU.
pub const DRAIN_CEILING: u64 = 16 * 1024 * 1024;

/// How long to keep reading output pipes after the program exited and its group was
/// killed; only a process that left the group can hold them open that long.
pub const PIPE_GRACE: Duration = Duration::from_secs(1);

/// What to run. `program` is already resolved (see [`find_program`]); `name` is what
/// the program sees as `argv[0]`.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// The executable, as [`find_program`] found it.
    pub program: &'a Path,
    /// The bare name the caller asked for; the program's `argv[0]`.
    pub name: &'a str,
    /// Arguments, passed as they are: nothing interprets them.
    pub args: &'a [String],
    /// The working directory, and `HOME`.
    pub workspace: &'a Path,
    /// Wall time before the process group is killed.
    pub timeout: Duration,
    /// Bytes kept per stream.
    pub output_cap: usize,
    /// Variables added to the scrubbed environment (e.g. git's hardening).
    pub env: &'a [(String, String)],
    /// The kernel confinement.
    pub sandbox: &'a Sandbox,
    /// Decides each connection the program makes through the egress proxy (an agent
    /// with network, in namespaces); `None` refuses them all.
    pub egress: Option<std::sync::Arc<dyn crate::egress::EgressPolicy>>,
}

/// One output stream: the first `output_cap` bytes and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes, at most the invocation's `output_cap`.
    pub kept: Vec<u8>,
    /// Every byte read, kept or not.
    pub total: u64,
}

impl Captured {
    /// Whether more was produced than kept.
    pub fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The program exited on its own (or was killed by someone else).
    Exited(ExitStatus),
    /// The timeout passed; the process group was killed.
    TimedOut,
    /// A stream passed [`DRAIN_CEILING`]; the process group was killed.
    OutputOverflow,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct Finished {
    /// How it ended; only [`Outcome::Exited`] carries an exit status.
    pub outcome: Outcome,
    /// What the program wrote to stdout (partial after a kill).
    pub stdout: Captured,
    /// What the program wrote to stderr (partial after a kill).
    pub stderr: Captured,
    /// The program exited but something outside its group held the output pipes open
    /// past [`PIPE_GRACE`]; the output may be incomplete.
    pub pipes_left_open: bool,
    /// Every connection the egress proxy decided for it, allowed or refused.
    pub egress: Vec<crate::egress::Egress>,
}

/// A policy that refuses every destination (an [`Invocation`] without one).
#[derive(Debug)]
struct RefuseAll;

impl crate::egress::EgressPolicy for RefuseAll {
    fn admit(
        &self,
        _host: String,
        _port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::egress::Decision> + Send>> {
        Box::pin(async { Err("no destination is allowed for this program".to_owned()) })
    }
}

/// Finds an executable file named `name` on [`search_path`]. `name` must be a bare
/// program name; callers check that before (a name with a separator is refused there).
pub fn find_program(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&search_path())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Runs `invocation` to completion under the rules in the module docs. An `Err` means
/// the program could not be started; every way it can end once started is an
/// [`Outcome`].
pub async fn run(invocation: &Invocation<'_>) -> std::io::Result<Finished> {
    let confinement = sandbox::prepare_isolated(invocation.sandbox, invocation.workspace)?;
    let proxied = confinement.namespaces().is_some_and(|n| n.network());
    let (mut ending, reaper_end) = Ending::pair(proxied)?;
    let mut command = Command::new(invocation.program);
    command
        .args(invocation.args)
        .env_clear()
        .env("PATH", search_path())
        .env("HOME", invocation.workspace)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb");
    if !confinement.enters_workspace() {
        command.current_dir(invocation.workspace);
    }
    #[cfg(target_os = "linux")]
    if proxied {
        let proxy = sandbox::namespaces::proxy_url();
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            command.env(name, &proxy);
        }
        command.env("NO_PROXY", "").env("no_proxy", "");
    }
    command
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Never SIGKILL the reaper: ending the tree is closing its control pipe.
        .kill_on_drop(false);
    #[cfg(unix)]
    command.arg0(invocation.name);
    pre_exec(command.as_std_mut(), confinement, reaper_end);

    let spawned = command.spawn();
    // The closure holds the reaper's end of the control pipe: let it go here.
    drop(command);
    let mut child = spawned?;
    let proxy = match ending.take_handoff() {
        Some(handoff) => Some(crate::egress::serve(
            handoff,
            invocation
                .egress
                .clone()
                .unwrap_or_else(|| std::sync::Arc::new(RefuseAll)),
        )?),
        None => None,
    };
    let mut group = ending.of(child.id());
    let stdout_pipe = child.stdout.take();
    let stderr_pipe = child.stderr.take();

    let mut stdout = Captured::default();
    let mut stderr = Captured::default();
    let mut status = None;
    let mut overflow = false;
    let mut timed_out = false;
    let mut pipes_left_open = false;
    {
        let mut deadline = Instant::now() + invocation.timeout;
        let stdout_drain = drain(stdout_pipe, invocation.output_cap, &mut stdout);
        let stderr_drain = drain(stderr_pipe, invocation.output_cap, &mut stderr);
        tokio::pin!(stdout_drain, stderr_drain);
        let (mut stdout_done, mut stderr_done) = (false, false);
        while status.is_none() || !stdout_done || !stderr_done {
            tokio::select! {
                exit = child.wait(), if status.is_none() => {
                    status = Some(exit?);
                    group.kill();
                    deadline = deadline.min(Instant::now() + PIPE_GRACE);
                }
                over = &mut stdout_drain, if !stdout_done => {
                    stdout_done = true;
                    if over {
                        overflow = true;
                        group.kill();
                    }
                }
                over = &mut stderr_drain, if !stderr_done => {
                    stderr_done = true;
                    if over {
                        overflow = true;
                        group.kill();
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    if status.is_none() {
                        timed_out = true;
                    } else {
                        pipes_left_open = true;
                    }
                    group.kill();
                    break;
                }
            }
        }
    }

    if status.is_none() {
        // Ended above: the reaper kills the tree, then itself. Reap it so no zombie is
        // left; only a reaper that does not go in time is killed from here.
        status = tokio::time::timeout(PIPE_GRACE, child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        if status.is_none() {
            let _ = child.start_kill();
        }
    }
    group.disarm();

    let outcome = match status {
        _ if timed_out => Outcome::TimedOut,
        _ if overflow => Outcome::OutputOverflow,
        Some(status) => Outcome::Exited(status),
        None => Outcome::TimedOut,
    };
    Ok(Finished {
        outcome,
        stdout,
        stderr,
        pipes_left_open,
        egress: proxy.map(crate::egress::Proxy::finish).unwrap_or_default(),
    })
}

/// Reads `pipe` to its end, keeping the first `cap` bytes in `into`. Returns true if it
/// stopped at [`DRAIN_CEILING`] instead.
async fn drain<R: AsyncRead + Unpin>(pipe: Option<R>, cap: usize, into: &mut Captured) -> bool {
    let Some(mut pipe) = pipe else {
        return false;
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                let room = cap.saturating_sub(into.kept.len());
                into.kept.extend_from_slice(&buf[..n.min(room)]);
                into.total += n as u64;
                if into.total > DRAIN_CEILING {
                    return true;
                }
            }
        }
    }
}

/// How a started tree is ended: on Linux its reaper (closing the control pipe kills
/// every descendant); elsewhere the process group, with SIGKILL.
struct Ending {
    #[cfg(target_os = "linux")]
    reaper: crate::reaper::Reaper,
    pgid: Option<u32>,
}

/// What the child needs to become a reaper (nothing off Linux).
#[cfg(target_os = "linux")]
type ReaperEnd = crate::reaper::ReaperEnd;
#[cfg(not(target_os = "linux"))]
type ReaperEnd = ();

impl Ending {
    /// With `handoff`, the reaper also passes its tree's proxy connections.
    fn pair(handoff: bool) -> std::io::Result<(Self, ReaperEnd)> {
        #[cfg(target_os = "linux")]
        {
            let (reaper, end) = crate::reaper::pair(handoff)?;
            Ok((Self { reaper, pgid: None }, end))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = handoff;
            Ok((Self { pgid: None }, ()))
        }
    }

    /// The server's end of the proxy's handoff socket, once.
    fn take_handoff(&mut self) -> Option<std::os::fd::OwnedFd> {
        #[cfg(target_os = "linux")]
        return self.reaper.take_handoff();
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// The tree of the child `pid`, started with `process_group(0)`.
    fn of(mut self, pid: Option<u32>) -> Self {
        self.pgid = pid;
        self
    }

    /// Kills the whole tree (once; later calls do nothing).
    fn kill(&mut self) {
        #[cfg(target_os = "linux")]
        self.reaper.end();
        #[cfg(all(unix, not(target_os = "linux")))]
        if let Some(pgid) = self.pgid.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) takes plain integers and touches no memory of ours. A
            // negative pid addresses the whole group; ESRCH (already gone) is fine.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    /// After the final kill: the group is gone, and its id may be reused later.
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sets up the child between fork and exec: on Linux it becomes the reaper and its
/// own child is confined and execs; elsewhere the child is confined directly. In a
/// process group of its own either way.
fn pre_exec(
    command: &mut std::process::Command,
    mut confinement: sandbox::Prepared,
    reaper_end: ReaperEnd,
) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: the reaper and `apply` make system calls only (no allocation, no
        // lock), which is what a forked child of a multithreaded process may do.
        unsafe {
            let namespaces = confinement.take_namespaces();
            command.pre_exec(move || {
                reaper_end.become_reaper(namespaces.as_ref(), || confinement.apply())
            });
        }
        #[cfg(not(target_os = "linux"))]
        // SAFETY: as above.
        unsafe {
            let () = reaper_end;
            command.pre_exec(move || confinement.apply());
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (command, &mut confinement, reaper_end);
    }
}

/// A long-lived program the crate talks to over its standard streams (an MCP server):
/// what to start. Unlike a confined [`run`], it inherits the host's environment (minus
/// [`SECRET_ENV_PREFIX`] variables) because servers are configured by the operator, not
/// chosen by a model.
#[derive(Clone, Copy)]
pub struct ServerCommand<'a> {
    /// The program; a bare name is looked up on the host's `PATH`.
    pub program: &'a str,
    /// Arguments, passed as they are.
    pub args: &'a [String],
    /// Added to the inherited environment, after the secret variables are removed.
    pub env: &'a std::collections::BTreeMap<String, String>,
    /// The working directory; the host's own when `None`.
    pub cwd: Option<&'a Path>,
}

/// Variables whose names start with this are ours (tokens, keys) and never reach a
/// server process.
pub const SECRET_ENV_PREFIX: &str = "AGENTPLANE_";

/// Further variables no server process may inherit: those `[secrets]` are read from.
/// A secret reaches a server only through an explicit, granted reference.
static WITHHELD_ENV: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Adds variables that server processes never inherit (the runtime names the
/// environment variables its secrets come from, once, at start).
pub fn withhold_env(names: impl IntoIterator<Item = String>) {
    let mut withheld = match WITHHELD_ENV.write() {
        Ok(withheld) => withheld,
        Err(poisoned) => poisoned.into_inner(),
    };
    for name in names {
        if !withheld.contains(&name) {
            withheld.push(name);
        }
    }
}

/// A started [`ServerCommand`]: its pipes, and the process tree to end later.
pub struct StartedServer {
    /// The program's stdin (requests go here).
    pub stdin: tokio::process::ChildStdin,
    /// The program's stdout (responses come from here).
    pub stdout: tokio::process::ChildStdout,
    /// The program's stderr, for diagnostics.
    pub stderr: tokio::process::ChildStderr,
    /// The process and its group.
    pub process: ServerProcess,
}

/// Starts `command` in a process group of its own with all three streams piped, in a
/// Landlock domain of its own ([`sandbox::Prepared::for_server`]).
pub fn start_server(command: &ServerCommand<'_>) -> std::io::Result<StartedServer> {
    spawn_server(command, sandbox::Prepared::for_server())
}

/// As [`start_server`], confined by `confinement` (from [`sandbox::prepare`]): an
/// external agent's whole process tree under the kernel sandbox, like a tool's.
pub fn start_confined_server(
    command: &ServerCommand<'_>,
    confinement: sandbox::Prepared,
) -> std::io::Result<StartedServer> {
    spawn_server(command, confinement)
}

fn spawn_server(
    command: &ServerCommand<'_>,
    confinement: sandbox::Prepared,
) -> std::io::Result<StartedServer> {
    let mut cmd = Command::new(command.program);
    cmd.args(command.args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with(SECRET_ENV_PREFIX) {
            cmd.env_remove(&name);
        }
    }
    let withheld = match WITHHELD_ENV.read() {
        Ok(withheld) => withheld.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for name in withheld {
        cmd.env_remove(name);
    }
    cmd.envs(command.env);
    if let Some(cwd) = command.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let (ending, reaper_end) = Ending::pair(false)?;
    pre_exec(cmd.as_std_mut(), confinement, reaper_end);

    let spawned = cmd.spawn();
    drop(cmd);
    let mut child = spawned?;
    let missing = || std::io::Error::other("a piped stream of the child was not available");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    let pid = child.id();
    Ok(StartedServer {
        stdin,
        stdout,
        stderr,
        process: ServerProcess {
            child,
            pid,
            ending: ending.of(pid),
        },
    })
}

/// A server's process, leader of its own group. [`ServerProcess::terminate`] ends the
/// group and every descendant, also those that left the group; dropping it without
/// that kills them at once (SIGKILL), so no path leaves a process behind.
pub struct ServerProcess {
    child: tokio::process::Child,
    /// `None` once reaped: the id may then belong to someone else.
    pid: Option<u32>,
    /// Ends the whole tree (the reaper), also when dropped.
    ending: Ending,
}

impl ServerProcess {
    /// The process id while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the process itself has exited (its descendants may live on).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until the process itself exits, and says how. Its group and descendants
    /// may live on (holding its pipes open); [`ServerProcess::terminate`] still ends
    /// them. Lets a caller stop waiting for a server that is already gone.
    pub async fn exited(&mut self) -> String {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.to_string(),
                Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => return e.to_string(),
            }
        }
    }

    /// SIGTERM to the group and to every descendant, up to `grace` for them to go, then
    /// SIGKILL to whatever is left; the process is reaped. Descendants are found before
    /// any signal, while they are still linked to the process by their parent ids.
    pub async fn terminate(&mut self, grace: Duration) {
        let Some(pid) = self.pid else {
            return;
        };
        let tree = ProcessTree::below(pid);
        tree.signal(SignalKind::Terminate);
        let deadline = Instant::now() + grace;
        loop {
            let exited = self.has_exited();
            if exited && !tree.any_alive() {
                break;
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The reaper kills what is left, then itself; only if it does not go in time
        // is the remembered tree killed from here.
        self.ending.kill();
        if tokio::time::timeout(PIPE_GRACE, self.child.wait())
            .await
            .is_err()
        {
            tree.signal(SignalKind::Kill);
            let _ = tokio::time::timeout(PIPE_GRACE, self.child.wait()).await;
        }
        self.ending.disarm();
        self.pid = None;
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // `ending` kills the whole tree when it is dropped, right after this.
        #[cfg(not(target_os = "linux"))]
        if let Some(pid) = self.pid {
            ProcessTree::below(pid).signal(SignalKind::Kill);
        }
    }
}

#[derive(Clone, Copy)]
enum SignalKind {
    Terminate,
    Kill,
}

/// A process group and the descendants of its leader, each remembered with its start
/// time so that a pid reused by an unrelated process is never signalled.
struct ProcessTree {
    leader: u32,
    descendants: Vec<(u32, u64)>,
}

impl ProcessTree {
    /// The group led by `leader`, and every process below it (walking `/proc/*/stat`).
    fn below(leader: u32) -> Self {
        Self {
            leader,
            descendants: descendants_of(leader),
        }
    }

    fn signal(&self, kind: SignalKind) {
        #[cfg(unix)]
        {
            let signal = match kind {
                SignalKind::Terminate => libc::SIGTERM,
                SignalKind::Kill => libc::SIGKILL,
            };
            if let Ok(pgid) = i32::try_from(self.leader) {
                // SAFETY: kill(2) takes plain integers and touches no memory of ours; a
                // negative pid addresses the group; ESRCH (already gone) is fine.
                unsafe {
                    libc::kill(-pgid, signal);
                }
            }
            for &(pid, start) in &self.descendants {
                if proc_stat(pid).is_some_and(|s| s.start_time == start)
                    && let Ok(pid) = i32::try_from(pid)
                {
                    // SAFETY: as above; the start time check makes sure it is still
                    // the same process.
                    unsafe {
                        libc::kill(pid, signal);
                    }
                }
            }
        }
        #[cfg(not(unix))]
        let _ = kind;
    }

    /// Whether a remembered descendant still runs (zombies count as gone).
    fn any_alive(&self) -> bool {
        self.descendants.iter().any(|&(pid, start)| {
            proc_stat(pid).is_some_and(|s| s.start_time == start && s.state != 'Z')
        })
    }
}

/// The fields of `/proc/PID/stat` this module needs.
struct ProcStat {
    state: char,
    ppid: u32,
    start_time: u64,
}

/// Reads `/proc/PID/stat`; `None` when the process is gone (or on a system without
/// `/proc`, where only the process group is signalled).
fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a stat line. The command name (field 2) is in parentheses and may itself
/// contain spaces and parentheses, so fields are counted after its *last* `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), … starttime (22).
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Every process below `root` in the parent tree, with its start time.
fn descendants_of(root: u32) -> Vec<(u32, u64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: std::collections::HashMap<u32, Vec<(u32, u64)>> = Default::default();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = proc_stat(pid) {
            children
                .entry(stat.ppid)
                .or_default()
                .push((pid, stat.start_time));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &(pid, start) in children.get(&parent).into_iter().flatten() {
            // A cycle cannot happen in a real tree; the bound guards a racing /proc.
            if found.len() < 4096 && !found.iter().any(|&(p, _)| p == pid) {
                found.push((pid, start));
                queue.push(pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let line =
            "4242 (a (weird) name) S 17 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let stat = parse_stat(line).expect("parses");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 17);
        assert_eq!(stat.start_time, 987654);
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("1 (x) S").is_none());
    }
}
