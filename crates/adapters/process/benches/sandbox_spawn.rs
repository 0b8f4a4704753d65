//! What kernel confinement adds to starting a process: `run_command true`, N times,
//! through `process::run` with the default sandbox (Landlock, seccomp, rlimits,
//! `no_new_privs`, applied between fork and exec), against the same spawn without a
//! sandbox (the same scrubbed environment, process group and pipes, no `pre_exec`),
//! interleaved in rounds so both see the same machine. Prints p50/p99 wall time, the
//! CPU time (this process and its children) per start, and the ratios.
//!
//! Run: `cargo bench -p agentplane-process --bench sandbox_spawn` (`SPAWN_BENCH_RUNS`
//! sets N, default 2000).

use std::process::Stdio;
use std::time::{Duration, Instant};

use agentplane_process::Sandbox;
use agentplane_process::process::{self, Invocation};
use tokio::io::AsyncReadExt;

const ROUNDS: usize = 20;
const WARM_UP: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// User + system CPU of this process and its reaped children.
fn cpu() -> Duration {
    let of = |who| {
        // SAFETY: getrusage fills the struct on our stack.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut usage) };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

async fn confined(program: &std::path::Path, workspace: &std::path::Path, sandbox: &Sandbox) {
    let finished = process::run(&Invocation {
        program,
        name: "true",
        args: &[],
        workspace,
        timeout: Duration::from_secs(10),
        output_cap: 64 * 1024,
        env: &[],
        sandbox,
        egress: None,
    })
    .await
    .expect("true runs");
    assert!(matches!(finished.outcome, process::Outcome::Exited(s) if s.success()));
}

/// The spawn `process::run` did before the sandbox: same environment, group, pipes.
async fn unconfined(program: &std::path::Path, workspace: &std::path::Path) {
    let mut child = tokio::process::Command::new(program)
        .current_dir(workspace)
        .env_clear()
        .env("PATH", process::search_path())
        .env("HOME", workspace)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("true starts");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (_, _, status) = tokio::join!(
        out.read_to_end(&mut a),
        err.read_to_end(&mut b),
        child.wait()
    );
    assert!(status.expect("waited").success());
}

fn main() {
    let runs: usize = std::env::var("SPAWN_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(runs));
}

async fn run(runs: usize) {
    let dir = tempfile::tempdir().expect("workspace");
    let workspace = dir.path().canonicalize().expect("canonical");
    let program = process::find_program("true").expect("true on PATH");
    let sandbox = Sandbox::default();
    println!("sandbox in force: {}", sandbox.in_force());
    for _ in 0..WARM_UP {
        confined(&program, &workspace, &sandbox).await;
        unconfined(&program, &workspace).await;
    }
    let per_round = runs.div_ceil(ROUNDS);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut cpu_with, mut cpu_without) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        let cpu_start = cpu();
        for _ in 0..per_round {
            let t = Instant::now();
            confined(&program, &workspace, &sandbox).await;
            with.push(t.elapsed());
        }
        let cpu_mid = cpu();
        for _ in 0..per_round {
            let t = Instant::now();
            unconfined(&program, &workspace).await;
            without.push(t.elapsed());
        }
        cpu_with += cpu_mid - cpu_start;
        cpu_without += cpu() - cpu_mid;
    }
    with.sort();
    without.sort();
    let n = with.len() as u32;
    let (p50w, p99w) = (percentile(&with, 0.5), percentile(&with, 0.99));
    let (p50o, p99o) = (percentile(&without, 0.5), percentile(&without, 0.99));
    println!("{n} starts of `true` each, {ROUNDS} interleaved rounds");
    println!(
        "without sandbox: p50 {p50o:?}  p99 {p99o:?}  cpu/start {:?}",
        cpu_without / n
    );
    println!(
        "with sandbox:    p50 {p50w:?}  p99 {p99w:?}  cpu/start {:?}",
        cpu_with / n
    );
    println!(
        "ratio with/without: p50 {:.2}  p99 {:.2}  cpu {:.2}; added p50 {:?}",
        p50w.as_secs_f64() / p50o.as_secs_f64(),
        p99w.as_secs_f64() / p99o.as_secs_f64(),
        cpu_with.as_secs_f64() / cpu_without.as_secs_f64(),
        p50w.saturating_sub(p50o)
    );
}
