//! Load on a real `agentplane serve` process (the release binary): many threads each
//! running one turn at once, and many idle SSE subscribers.
//!
//! The model is the testkit's scripted server with zero delay, in this process. Each
//! turn is `POST /v1/threads/{id}/turns` read until its `turn_completed`; the baseline,
//! run in the same rounds before and after the turns, is the bare streamed chat request
//! the server's model client sends, read to the end. A fresh server (and SQLite file)
//! per N, so each peak RSS (`VmHWM`) belongs to one N. Then a fresh server gets 10,000
//! `GET /v1/threads/{id}/events` subscribers on a few threads: RSS before and after, and
//! how long one turn per thread takes to reach all of them. The server logs as it does
//! by default (warnings and one access line per request), to a file.
//!
//! Run (the method and results are in `docs/performance.md`):
//!     ulimit -n 20000 && cargo bench -p agentplane --bench load
//! Environment: `BENCH_LOAD_N` (default `10,100,1000`), `BENCH_LOAD_SAMPLES` (turns per
//! N, default 1000: N concurrent turns per round, as many rounds as needed),
//! `BENCH_SSE_SUBSCRIBERS` (default 10000, 0 skips), `BENCH_SSE_THREADS` (default 4),
//! `BENCH_SSE_WAVES` (default 3), `BENCH_LOAD_NEW_CONNECTIONS=1` (a new TCP connection per request instead of a pool),
//! `BENCH_AGENTPLANE_BIN` (the `agentplane` binary to serve; default the one Cargo built).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const BUILT: &str = env!("CARGO_BIN_EXE_agentplane");

/// The binary under test: `BENCH_AGENTPLANE_BIN` (another build, to compare two side by
/// side with one benchmark), else the one Cargo built.
fn binary() -> String {
    std::env::var("BENCH_AGENTPLANE_BIN").unwrap_or_else(|_| BUILT.to_owned())
}
const CLIENT: &str = "bench";
/// Longest wait for anything that should be quick (a start, a fan-out).
const PATIENCE: Duration = Duration::from_secs(120);

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

/// p50 and p99 of a sample, and how many.
#[derive(Debug, Clone, Copy)]
struct Latency {
    p50: Duration,
    p99: Duration,
    max: Duration,
    count: usize,
}

fn latency(mut samples: Vec<Duration>) -> Latency {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Latency {
        p50: at(0.5),
        p99: at(0.99),
        max: *samples.last().expect("not empty"),
        count: samples.len(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A running `agentplane serve` with its own temp dir; killed when dropped.
struct Served {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Served {
    async fn start(model_url: &str) -> Served {
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).expect("workspace");
        // The configuration folder beside the workspace, never above it (ADR 0040).
        let conf = dir.path().join("conf");
        std::fs::create_dir(&conf).expect("configuration folder");
        let config = conf.join("agentplane.toml");
        std::fs::write(
            &config,
            // The starvation caps (ADR 0025) raised past the 10,000 subscribers, which
            // all come from one address and one client.
            "[llm]\nmax_retries = 0\n[agents.chat]\nsystem_prompt = \"Answer briefly.\"\n\
             [server]\nmax_connections = 20000\nmax_connections_per_address = 20000\n\
             max_sse_followers = 20000\nmax_sse_followers_per_client = 20000\n\
             max_sse_followers_per_address = 20000\n",
        )
        .expect("config");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let log = dir.path().join("serve.log");
        // Started in the temporary folder: on loopback `serve` confines workspaces to
        // the folder it starts in, which must hold this one wherever the bench runs.
        let child = Command::new(binary())
            .current_dir(dir.path())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
            .arg(conf.join("events.db"))
            .env("AGENTPLANE_CONFIG", &config)
            .env("AGENTPLANE_LLM_BASE_URL", model_url)
            .env("AGENTPLANE_LLM_MODEL", "scripted-model")
            .env_remove("AGENTPLANE_LOG")
            .env_remove("AGENTPLANE_AUTH_TOKEN")
            .env_remove("AGENTPLANE_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn agentplane serve");
        let mut served = Served {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
            log,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = served.child.try_wait().expect("try_wait") {
                panic!("serve exited with {status}:\n{}", served.stderr());
            }
            if http
                .get(format!("{}/healthz", served.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return served;
            }
            assert!(Instant::now() < deadline, "serve never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn workspace(&self) -> PathBuf {
        self._dir.path().join("ws")
    }

    /// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`), in MiB.
    fn memory_mib(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{field} missing"));
        kb / 1024.0
    }

    /// How many files (sockets included) the server has open.
    fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|dir| dir.count())
            .unwrap_or(0)
    }

    /// User + system CPU time of the server so far.
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("/proc/PID/stat");
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        // USER_HZ is 100 on every Linux this runs on.
        Duration::from_millis(ticks * 10)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The load's HTTP client: connections kept alive, unless `BENCH_LOAD_NEW_CONNECTIONS=1`
/// asks for a new connection per request (which also sidesteps delayed ACKs).
fn client() -> reqwest::Client {
    let idle = if env_number("BENCH_LOAD_NEW_CONNECTIONS", 0) == 1 {
        0
    } else {
        2_000
    };
    reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .timeout(PATIENCE)
        .build()
        .expect("client")
}

/// Creates `n` threads of the `chat` agent, 64 at a time.
async fn create_threads(http: &reqwest::Client, served: &Served, n: usize) -> Vec<String> {
    let gate = Arc::new(Semaphore::new(64));
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let http = http.clone();
        let url = format!("{}/v1/threads", served.base);
        let body =
            json!({"agent": "chat", "cwd": served.workspace(), "title": format!("load {i}")});
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire().await.expect("semaphore");
            let response = http
                .post(&url)
                .header("X-Client-ID", CLIENT)
                .json(&body)
                .send()
                .await
                .expect("create thread");
            assert_eq!(response.status(), 201);
            let thread: Value = response.json().await.expect("thread JSON");
            thread["id"].as_str().expect("id").to_owned()
        });
    }
    tasks.join_all().await
}

/// One turn, from sending the request to reading its `turn_completed` event.
async fn turn(http: reqwest::Client, base: String, thread: String) -> Result<Duration, String> {
    let started = Instant::now();
    let mut response = http
        .post(format!("{base}/v1/threads/{thread}/turns"))
        .header("X-Client-ID", CLIENT)
        .json(&json!({"input": "What is the answer?"}))
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    if response.status() != 200 {
        let status = response.status();
        return Err(format!(
            "{status}: {}",
            response.text().await.unwrap_or_default()
        ));
    }
    let mut body = String::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("read: {e}"))? {
        body.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(at) = body.find("event: turn_completed")
            && body[at..].contains("\n\n")
        {
            let elapsed = started.elapsed();
            return if body[at..].contains("\"stop_reason\":\"text_answer\"") {
                Ok(elapsed)
            } else {
                Err(format!(
                    "the turn did not end with a text answer: {}",
                    &body[at..]
                ))
            };
        }
    }
    Err(format!("the stream ended before turn_completed: {body}"))
}

/// One bare streamed chat request to the scripted model, read to the end.
async fn bare(http: reqwest::Client, url: String, body: Value) -> Result<Duration, String> {
    let started = Instant::now();
    let response = http
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| format!("read: {e}"))?;
    if status != 200 || bytes.is_empty() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&bytes)));
    }
    Ok(started.elapsed())
}

/// Results of rounds of `n` concurrent operations.
struct Rounds {
    samples: Vec<Duration>,
    wall: Duration,
    errors: Vec<String>,
}

/// Runs `rounds` rounds; in each, `n` operations start at once and the round ends when
/// the last one does.
async fn rounds<F, Fut>(n: usize, rounds: usize, mut operation: F) -> Rounds
where
    F: FnMut(usize, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Duration, String>> + Send + 'static,
{
    let mut result = Rounds {
        samples: Vec::with_capacity(n * rounds),
        wall: Duration::ZERO,
        errors: Vec::new(),
    };
    for round in 0..rounds {
        let mut tasks = JoinSet::new();
        let started = Instant::now();
        for i in 0..n {
            tasks.spawn(operation(round, i));
        }
        while let Some(outcome) = tasks.join_next().await {
            match outcome.expect("task") {
                Ok(sample) => result.samples.push(sample),
                Err(e) => result.errors.push(e),
            }
        }
        result.wall += started.elapsed();
    }
    result
}

async fn concurrent_turns(model: &ScriptedServer, n: usize, samples: usize) {
    let rounds_needed = samples.div_ceil(n).max(1);
    let served = Served::start(&model.base_url()).await;
    let http = client();
    let chat_url = format!("{}/chat/completions", model.base_url());
    let chat_body = json!({
        "model": "scripted-model",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the answer?"}
        ]
    });

    // Warm-up: connections, the model list, SQLite pages.
    let warm = create_threads(&http, &served, 20).await;
    for thread in warm {
        turn(http.clone(), served.base.clone(), thread)
            .await
            .expect("warm-up turn");
    }
    let rss_idle = served.memory_mib("VmRSS");

    let bare_round = |_: usize, _: usize| bare(http.clone(), chat_url.clone(), chat_body.clone());
    let before = rounds(n, rounds_needed, bare_round).await;

    let mut threads = Vec::with_capacity(rounds_needed);
    for _ in 0..rounds_needed {
        threads.push(create_threads(&http, &served, n).await);
    }
    let cpu_before = served.cpu();
    let turns = rounds(n, rounds_needed, |round, i| {
        turn(http.clone(), served.base.clone(), threads[round][i].clone())
    })
    .await;
    let cpu = served.cpu().saturating_sub(cpu_before);
    let peak = served.memory_mib("VmHWM");

    let after = rounds(n, rounds_needed, bare_round).await;

    for (what, errors) in [
        ("bare", &before.errors),
        ("turn", &turns.errors),
        ("bare", &after.errors),
    ] {
        if let Some(first) = errors.first() {
            println!("  N={n}: {} {what} errors, first: {first}", errors.len());
        }
    }
    let turn_latency = latency(turns.samples.clone());
    let bare_latency = latency([before.samples, after.samples].concat());
    let turns_per_s = turns.samples.len() as f64 / turns.wall.as_secs_f64();
    let bare_per_s = 2.0 * (n * rounds_needed) as f64 / (before.wall + after.wall).as_secs_f64();
    println!(
        "| {n} | {rounds_needed}×{n} | {turns_per_s:.0} | {bare_per_s:.0} | {:.2} / {:.2} | {:.2} / {:.2} | +{:.2} / +{:.2} | {:.1}× / {:.1}× | {:.2} | {rss_idle:.1} | {peak:.1} |",
        ms(turn_latency.p50),
        ms(turn_latency.p99),
        ms(bare_latency.p50),
        ms(bare_latency.p99),
        ms(turn_latency.p50.saturating_sub(bare_latency.p50)),
        ms(turn_latency.p99.saturating_sub(bare_latency.p99)),
        turn_latency.p50.as_secs_f64() / bare_latency.p50.as_secs_f64(),
        turn_latency.p99.as_secs_f64() / bare_latency.p99.as_secs_f64(),
        ms(cpu) / turn_latency.count as f64,
    );
}

/// The `seq` of a thread's last stored event (0 if none).
async fn last_seq_of(http: &reqwest::Client, served: &Served, thread: &str) -> u64 {
    let history: Value = http
        .get(format!(
            "{}/v1/threads/{thread}/history?includeEvents=1",
            served.base
        ))
        .header("X-Client-ID", CLIENT)
        .send()
        .await
        .expect("history")
        .json()
        .await
        .expect("history JSON");
    history["turns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["events"].as_array()?.last()?["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// The soft limit on open files of this process (children inherit it).
fn open_file_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// One idle subscriber: connects, follows the thread after `after`, reads the response
/// head, then reads until the first `turn_completed` (answering `when` it saw it, and
/// its still open connection) or the connection closes.
async fn subscriber(
    addr: String,
    thread: String,
    after: u64,
    connected: Arc<Semaphore>,
    gate: Arc<Semaphore>,
) -> Result<(Instant, tokio::net::TcpStream), String> {
    let mut stream = {
        let _permit = gate.acquire().await.map_err(|e| e.to_string())?;
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let request = format!(
            "GET /v1/threads/{thread}/events?after={after} HTTP/1.1\r\nHost: {addr}\r\n\
             X-Client-ID: {CLIENT}\r\nAccept: text/event-stream\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = stream
                .read(&mut byte)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if read == 0 {
                return Err("closed before the response head".to_owned());
            }
            head.extend_from_slice(&byte[..read]);
        }
        if !head.starts_with(b"HTTP/1.1 200") {
            return Err(String::from_utf8_lossy(&head).into_owned());
        }
        stream
    };
    connected.add_permits(1);
    let mut tail = String::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = stream
            .read(&mut buffer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if read == 0 {
            return Err("closed before turn_completed".to_owned());
        }
        tail.push_str(&String::from_utf8_lossy(&buffer[..read]));
        if tail.contains("event: turn_completed") {
            return Ok((Instant::now(), stream));
        }
        // Keep only what could hold the start of a split marker.
        if tail.len() > 64 {
            let cut = tail.len() - 32;
            let cut = (cut..tail.len())
                .find(|&i| tail.is_char_boundary(i))
                .unwrap_or(cut);
            tail.drain(..cut);
        }
    }
}

async fn idle_subscribers(model: &ScriptedServer, subscribers: usize, threads_n: usize) {
    let limit = open_file_limit();
    if limit < subscribers + 512 {
        println!(
            "skipped: {subscribers} subscribers need about {} open files, the limit is {limit}; \
             run `ulimit -n 20000` first",
            subscribers + 512
        );
        return;
    }
    let served = Served::start(&model.base_url()).await;
    let http = client();
    let threads = create_threads(&http, &served, threads_n).await;
    // One turn first, so the subscribers' replay has stored events to skip past.
    turn(http.clone(), served.base.clone(), threads[0].clone())
        .await
        .expect("first turn");
    let before = served.memory_mib("VmRSS");
    println!(
        "subscribers: {subscribers} on {threads_n} threads; server RSS before: {before:.1} MiB, \
         {} open files",
        served.open_files()
    );
    // Several waves: if later ones need no more memory than the first, what stays after
    // one left is the allocator keeping freed pages, not a leak.
    for wave in 1..=env_number("BENCH_SSE_WAVES", 3) {
        subscriber_wave(&served, &http, &threads, subscribers, wave, before).await;
    }
}

/// Connects `subscribers` idle streams, measures, ends one turn per thread through all
/// of them, and measures again after they left.
async fn subscriber_wave(
    served: &Served,
    http: &reqwest::Client,
    threads: &[String],
    subscribers: usize,
    wave: usize,
    before: f64,
) {
    let addr = served.base.trim_start_matches("http://").to_owned();
    // Follow from each thread's last stored event, so only the coming turn counts.
    let mut last_seq = Vec::with_capacity(threads.len());
    for thread in threads {
        last_seq.push(last_seq_of(http, served, thread).await);
    }
    let connected = Arc::new(Semaphore::new(0));
    let gate = Arc::new(Semaphore::new(256));
    let mut tasks = JoinSet::new();
    let connecting = Instant::now();
    for i in 0..subscribers {
        tasks.spawn(subscriber(
            addr.clone(),
            threads[i % threads.len()].clone(),
            last_seq[i % threads.len()],
            connected.clone(),
            gate.clone(),
        ));
    }
    let all = u32::try_from(subscribers).expect("fits");
    let ready = tokio::time::timeout(PATIENCE, connected.acquire_many(all)).await;
    if ready.is_err() {
        panic!(
            "only {} of {subscribers} subscribers connected:\n{}",
            connected.available_permits(),
            served.stderr()
        );
    }
    let connect_time = connecting.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = served.memory_mib("VmRSS");
    let files_idle = served.open_files();

    // One turn per thread; every subscriber must see it end, and then disconnects.
    let cpu_before = served.cpu();
    let started = Instant::now();
    let mut turns = JoinSet::new();
    for thread in threads {
        turns.spawn(turn(http.clone(), served.base.clone(), thread.clone()));
    }
    let mut fan_out = Vec::with_capacity(subscribers);
    // Kept open until every subscriber has seen the turn end, so the fan-out's CPU is
    // the delivery alone; closing them all is measured on its own after.
    let mut open = Vec::with_capacity(subscribers);
    let mut errors = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while let Ok(Some(outcome)) = tokio::time::timeout_at(deadline, tasks.join_next()).await {
        match outcome.expect("task") {
            Ok((seen, stream)) => {
                fan_out.push(seen.saturating_duration_since(started));
                open.push(stream);
            }
            Err(e) => errors.push(e),
        }
    }
    let fan_out_cpu = served.cpu().saturating_sub(cpu_before);
    tasks.abort_all();
    let closing = served.cpu();
    drop(open);
    // The server sees each close at once (a read of zero bytes on an idle stream).
    let wait_closed = Instant::now();
    while served.open_files() > files_idle.saturating_sub(subscribers) + 64
        && wait_closed.elapsed() < PATIENCE
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let close_cpu = served.cpu().saturating_sub(closing);
    let turn_latency = latency(
        turns
            .join_all()
            .await
            .into_iter()
            .map(|r| r.expect("turn"))
            .collect(),
    );
    let peak = served.memory_mib("VmHWM");
    // A stream notices its client left when a write fails: at the latest, the next
    // heartbeat (every 15 s).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let left = served.memory_mib("VmRSS");
    let files_left = served.open_files();

    if let Some(first) = errors.first() {
        println!("  {} subscriber errors, first: {first}", errors.len());
    }
    let reached = latency(fan_out);
    println!(
        "wave {wave}: connected in {:.1} s; idle: RSS {idle:.1} MiB (+{:.1} KiB each), \
         {files_idle} open files; peak {peak:.1} MiB; 20 s after they left: RSS {left:.1} MiB, \
         {files_left} open files",
        connect_time.as_secs_f64(),
        (idle - before) * 1024.0 / subscribers as f64
    );
    println!(
        "wave {wave}: one turn per thread reached {} of {subscribers} subscribers: p50 {:.1} ms, \
         p99 {:.1} ms, last {:.1} ms after the turns started (turn p50 {:.1} ms); \
         server CPU {:.0} ms ({:.1} µs per delivered event stream); then {} disconnects: \
         server CPU {:.0} ms",
        reached.count,
        ms(reached.p50),
        ms(reached.p99),
        ms(reached.max),
        ms(turn_latency.p50),
        ms(fan_out_cpu),
        fan_out_cpu.as_secs_f64() * 1e6 / reached.count as f64,
        reached.count,
        ms(close_cpu),
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let ns = env_list("BENCH_LOAD_N", &[10, 100, 1000]);
    let samples = env_number("BENCH_LOAD_SAMPLES", 1000);
    let subscribers = env_number("BENCH_SSE_SUBSCRIBERS", 10_000);
    let sse_threads = env_number("BENCH_SSE_THREADS", 4).max(1);

    let model = ScriptedServer::start(
        Scenario::new(vec![Step::text("The answer is 42.").with_usage(20, 5)]).repeating(true),
    )
    .await
    .expect("scripted model");

    println!("binary: {}", binary());
    println!(
        "| N | rounds × concurrent | turns/s | bare req/s | turn p50 / p99 ms | bare p50 / p99 ms | added p50 / p99 ms | ratio p50 / p99 | server CPU ms/turn | RSS idle MiB | peak RSS MiB |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for n in ns {
        concurrent_turns(&model, n, samples).await;
    }
    if subscribers > 0 {
        idle_subscribers(&model, subscribers, sse_threads).await;
    }
}
