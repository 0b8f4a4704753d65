//! The server cannot be starved (issue 17): slow clients (slowloris), floods of idle
//! TCP connections and of event-stream followers against the real binary, then
//! `/healthz` must answer and the server's memory (`VmRSS` in `/proc/PID/status`) must
//! come back near where it was.
//!
//! Sizes: 2,000 slow clients and 20,000 idle connections, from many loopback addresses
//! (127.0.x.y all reach the server), with short timeouts in the server's configuration
//! so the suite stays within a minute or two on 2 cores. The test process raises its
//! own open-files limit (`RLIMIT_NOFILE`) to hold half the idle flood; the other half
//! is held by a second process (a small Python script), so 20,000 are open at once even
//! where one process may hold no more than 20,000 descriptors.
//! Timings are printed (`starvation-figures …`, `--no-capture`), never asserted beyond
//! a loose bound that catches "never answers"; resource bounds are asserted loosely.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use agentplane_suites::{CLIENT, Served, api, create_thread, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const SLOW_CLIENTS: usize = 2_000;
const IDLE_CONNECTIONS: usize = 20_000;
/// Timeouts the server runs with here (the defaults are 10 s and 60 s), and a total
/// cap (default 4096) the flood surely reaches while the 4 s idle timeout also reaps:
/// on a loaded machine the flood opens connections slowly enough that the reaping
/// alone would keep fewer than 4096 open.
const LIMITS: &str =
    "[server]\nheader_read_timeout_secs = 2\nidle_timeout_secs = 4\nmax_connections = 1000\n";
/// `max_connections` above.
const MAX_CONNECTIONS: usize = 1000;
/// Holds `n` idle connections to `host:port` from `base.1` … `base.100` until its stdin
/// closes; prints `ready OPENED FAILED` once they are open.
const HOLDER: &str = r#"
import socket, sys
host, port, n, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
held, failed = [], 0
for i in range(n):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((f"{base}.{1 + i % 100}", 0))
        s.connect((host, port))
        held.append(s)
    except OSError:
        failed += 1
        s.close()
print(f"ready {len(held)} {failed}", flush=True)
sys.stdin.read()
"#;

/// The second process holding part of the idle flood: its child, and how many it
/// opened and failed to open.
fn hold_elsewhere(to: SocketAddr, n: usize) -> (std::process::Child, usize, usize) {
    use std::io::BufRead;
    let mut child = std::process::Command::new("python3")
        .args(["-c", HOLDER])
        .arg(to.ip().to_string())
        .arg(to.port().to_string())
        .arg(n.to_string())
        .arg("127.0.3")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 for the second half of the idle flood");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the holder's ready line");
    let mut parts = line.split_whitespace().skip(1);
    let mut next = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let opened = next();
    let failed = next();
    (child, opened, failed)
}

/// A bound that only catches a server that does not answer at all.
const ANSWER_BOUND: Duration = Duration::from_secs(10);

/// Raises this process's open-files limit towards `want` and returns what it got.
fn raise_open_files(want: u64) -> u64 {
    // SAFETY: getrlimit/setrlimit read or write the one struct passed.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        let wanted = libc::rlimit {
            rlim_cur: want.max(limit.rlim_cur),
            rlim_max: want.max(limit.rlim_max),
        };
        // Raising the hard limit needs CAP_SYS_RESOURCE; else take what the hard allows.
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
            let soft = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur
    }
}

/// A field of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`).
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .expect("a kB figure")
}

/// How many file descriptors the server has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// Connects from `from` (a loopback address) to the server.
async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::V4(SocketAddrV4::new(from, 0)))?;
    socket.connect(to).await
}

/// `GET /healthz` on a fresh connection from 127.0.0.1: its latency, or why not.
async fn healthz(served: &Served) -> Result<Duration, String> {
    let started = Instant::now();
    let response = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(ANSWER_BOUND)
        .build()
        .expect("client")
        .get(format!("{}/healthz", served.base))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("status {}", response.status()));
    }
    Ok(started.elapsed())
}

fn server_addr(served: &Served) -> SocketAddr {
    served
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("base is an address")
}

/// Waits until the server holds at most `at_most` descriptors; whether it did.
async fn fds_fall_to(pid: u32, at_most: usize, budget: Duration) -> bool {
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if open_fds(pid) <= at_most {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_floods_do_not_starve_the_server() {
    let files = raise_open_files((SLOW_CLIENTS + IDLE_CONNECTIONS + 1_000) as u64);
    // Half the idle flood here, half in a second process.
    let elsewhere_target = IDLE_CONNECTIONS / 2;
    let idle_target = (IDLE_CONNECTIONS - elsewhere_target)
        .min(usize::try_from(files).unwrap_or(0).saturating_sub(1_000));
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox(LIMITS);
    // Started after the limit was raised: the server inherits it.
    let served = start(&sb, &model.base_url(), &[]).await;
    let pid = served.pid();
    let to = server_addr(&served);
    for _ in 0..20 {
        healthz(&served).await.expect("warm-up");
    }
    let idle_fds = open_fds(pid);
    let idle_rss = status_kb(pid, "VmRSS");

    // 1. One address past its cap: refused with the canned 429, and said in the log.
    let mut same = Vec::new();
    for _ in 0..300 {
        same.push(
            connect_from(Ipv4Addr::new(127, 0, 3, 1), to)
                .await
                .expect("connect"),
        );
    }
    let mut refused = 0;
    for stream in &mut same {
        let mut buf = [0u8; 64];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(20), stream.read(&mut buf)).await
            && buf[..n].starts_with(b"HTTP/1.1 429")
        {
            refused += 1;
        }
    }
    assert_eq!(refused, 300 - 256, "over max_connections_per_address (256)");
    drop(same);
    assert!(
        served.stderr().contains("max_connections_per_address"),
        "{}",
        served.stderr()
    );

    // 2. Slow clients: one byte of a request head every 2 s, from 20 addresses.
    let slow_started = Instant::now();
    let mut slow = tokio::task::JoinSet::new();
    for i in 0..SLOW_CLIENTS {
        let from = Ipv4Addr::new(127, 0, 1, 1 + (i % 20) as u8);
        slow.spawn(async move {
            let Ok(mut stream) = connect_from(from, to).await else {
                return false;
            };
            let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
            let mut buf = [0u8; 256];
            for byte in head.iter().cycle().take(60) {
                if stream.write_all(&[*byte]).await.is_err() {
                    return true;
                }
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        // Closed by the server (or answered 408-like): either ends it.
                        Ok(_) | Err(_) => return true,
                    },
                    () = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
            false
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during_slow = healthz(&served)
        .await
        .expect("/healthz during the slow clients");
    let mut closed = 0;
    while let Some(result) = slow.join_next().await {
        if result.expect("slow client task") {
            closed += 1;
        }
    }
    let slow_took = slow_started.elapsed();
    assert_eq!(
        closed, SLOW_CLIENTS,
        "every slow client was cut off by the server"
    );

    // 3. Idle connections: never a byte, from 100 addresses (under the per-address cap),
    // far past max_connections.
    let idle_started = Instant::now();
    let mut idle = Vec::with_capacity(idle_target);
    let mut failed = 0;
    for batch in 0..idle_target.div_ceil(500) {
        let mut connecting = tokio::task::JoinSet::new();
        for i in batch * 500..((batch + 1) * 500).min(idle_target) {
            let from = Ipv4Addr::new(127, 0, 2, 1 + (i % 100) as u8);
            connecting.spawn(connect_from(from, to));
        }
        while let Some(result) = connecting.join_next().await {
            match result.expect("connect task") {
                Ok(stream) => idle.push(stream),
                Err(_) => failed += 1,
            }
        }
    }
    let (mut holder, held_elsewhere, failed_elsewhere) =
        tokio::task::spawn_blocking(move || hold_elsewhere(to, elsewhere_target))
            .await
            .expect("holder task");
    failed += failed_elsewhere;
    let opened_in = idle_started.elapsed();
    let held = idle.len() + held_elsewhere;
    assert!(
        held >= IDLE_CONNECTIONS * 95 / 100,
        "only {held} of {IDLE_CONNECTIONS} idle connections opened ({failed} failed)"
    );
    let peak_fds = open_fds(pid);
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(
            healthz(&served)
                .await
                .expect("/healthz under 20,000 idle connections"),
        );
    }
    let worst = answers.iter().max().copied().unwrap_or_default();
    let peak_rss = status_kb(pid, "VmRSS");
    let log = served.stderr();
    assert!(log.contains("server.max_connections reached"), "{log}");
    // Evicted connections close when their task next runs, so on a busy machine a
    // few hundred may still hold a descriptor for a moment: bounded, not exact.
    assert!(
        peak_fds <= 2 * MAX_CONNECTIONS + idle_fds + 64,
        "the server holds about max_connections: {peak_fds} descriptors"
    );

    // 4. The idle ones are closed by the server itself (idle_timeout_secs), still held
    // open by this side.
    let reaped = fds_fall_to(pid, idle_fds + 16, Duration::from_secs(60)).await;
    let reaped_after = idle_started.elapsed();
    assert!(reaped, "{} descriptors still open", open_fds(pid));
    drop(idle);
    drop(holder.stdin.take());
    let _ = holder.kill();
    let _ = holder.wait();
    // The server gives freed memory back within one 5 s round after a burst of closes.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after_rss = status_kb(pid, "VmRSS");
    let hwm = status_kb(pid, "VmHWM");
    println!(
        "starvation-figures: open-files limit {files}; idle connections {} of {IDLE_CONNECTIONS} \
         opened in {opened_in:?} ({failed} failed to connect); slow clients {SLOW_CLIENTS} all cut \
         off within {slow_took:?}; /healthz during slow clients {during_slow:?}, under the idle \
         flood worst of 5 {worst:?}; server fds idle {idle_fds}, peak {peak_fds}; idle \
         connections reaped by {reaped_after:?}; VmRSS idle {idle_rss} kB, peak {peak_rss} kB, \
         after {after_rss} kB (VmHWM {hwm} kB)",
        held,
    );
    assert!(
        after_rss <= 2 * idle_rss + 64 * 1024,
        "VmRSS after {after_rss} kB, idle {idle_rss} kB"
    );
    assert_eq!(healthz(&served).await.map(|_| ()), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_followers_are_capped_per_client_and_in_total() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    // All from 127.0.0.1: the per-address caps (256 connections, 256 followers) must
    // not refuse first.
    let sb = sandbox(
        "[server]\nmax_sse_followers = 300\nmax_sse_followers_per_client = 200\n\
         max_connections_per_address = 1000\nmax_sse_followers_per_address = 1000\n",
    );
    let served = start(&sb, &model.base_url(), &[]).await;
    let pid = served.pid();
    let thread = create_thread(&served, &sb, "chat", "followed").await;
    let http = reqwest::Client::new();
    let follow = |client: &str| {
        http.get(format!("{}/v1/threads/{thread}/events", served.base))
            .header("X-Client-ID", client)
            .send()
    };
    // Another client's thread is NOT_FOUND for it, so the second client follows its own.
    let other = {
        let response = http
            .post(format!("{}/v1/threads", served.base))
            .header("X-Client-ID", "other")
            .json(&json!({"agent": "chat", "cwd": sb.workspace, "title": "other"}))
            .send()
            .await
            .expect("create");
        let body: Value = response.json().await.expect("json");
        body["id"].as_str().expect("id").to_owned()
    };
    let idle_rss = status_kb(pid, "VmRSS");
    let mut open = Vec::new();
    for _ in 0..200 {
        let response = follow(CLIENT).await.expect("follow");
        assert_eq!(response.status(), 200);
        open.push(response);
    }
    let refused = follow(CLIENT).await.expect("follow");
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("retry-after").is_some());
    let body: Value = refused.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "RATE_LIMITED", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_sse_followers_per_client")),
        "{body}"
    );
    let other_follow = || {
        http.get(format!("{}/v1/threads/{other}/events", served.base))
            .header("X-Client-ID", "other")
            .send()
    };
    for i in 0..100 {
        let response = other_follow()
            .await
            .unwrap_or_else(|e| panic!("follow {i}: {e:?}\n{}", served.stderr()));
        let status = response.status();
        if status != 200 {
            let body = response.text().await.unwrap_or_default();
            panic!("follow {i}: {status} {body}");
        }
        open.push(response);
    }
    let total = other_follow().await.expect("follow");
    assert_eq!(total.status(), 429, "the total cap (300)");
    let body: Value = total.json().await.expect("envelope");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_sse_followers")),
        "{body}"
    );
    let peak_rss = status_kb(pid, "VmRSS");
    // The places come back once the clients leave (the server notices the closed
    // connection when it next writes, at the latest with a heartbeat).
    drop(open);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut back = None;
    while Instant::now() < deadline {
        let response = follow(CLIENT).await.expect("follow");
        if response.status() == 200 {
            back = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(back.is_some(), "a follower's place came back after it left");
    drop(back);
    // The server gives freed memory back within one 5 s round after a burst of closes.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after_rss = status_kb(pid, "VmRSS");
    println!(
        "starvation-figures followers: VmRSS idle {idle_rss} kB, with 300 followers \
         {peak_rss} kB, after they left {after_rss} kB"
    );
    assert!(
        after_rss <= 2 * idle_rss + 64 * 1024,
        "VmRSS after {after_rss} kB, idle {idle_rss} kB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_listing_is_paged_and_refuses_hostile_queries() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(create_thread(&served, &sb, "chat", &format!("t{i}")).await);
    }
    made.reverse(); // newest first, as listed
    let page = |query: String| {
        let request = api(&served, Method::GET, &format!("/v1/threads{query}"));
        async move {
            let response = request.send().await.expect("list");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("json"))
        }
    };
    // The old shape without a query: every thread (under the default page of 100).
    let (status, all) = page(String::new()).await;
    assert_eq!(status, 200);
    assert_eq!(all["threads"].as_array().map(Vec::len), Some(7));
    assert_eq!(all["next_cursor"], Value::Null);
    // Pages of 3, by cursor, in order, nothing twice.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("?limit=3&cursor={c}"),
            None => "?limit=3".to_owned(),
        };
        let (status, body) = page(query).await;
        assert_eq!(status, 200, "{body}");
        for thread in body["threads"].as_array().expect("threads") {
            seen.push(thread["id"].as_str().expect("id").to_owned());
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, made);
    // Hostile queries: one envelope each, never a 500.
    let hostile = [
        "?limit=0",
        "?limit=-1",
        "?limit=1001",
        "?limit=99999999999999999999999",
        "?limit=abc",
        "?cursor=",
        "?cursor=../../etc/passwd",
        "?cursor=thr_",
        "?cursor=thr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
        "?limit=2&limit=3",
        "?unknown=1",
    ];
    for query in hostile {
        let (status, body) = page(query.to_owned()).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{query}: {body}");
    }
    // Another client's thread is no cursor of mine.
    let (status, body) = {
        let response = reqwest::Client::new()
            .get(format!("{}/v1/threads?cursor={}", served.base, made[0]))
            .header("X-Client-ID", "someone-else")
            .send()
            .await
            .expect("list");
        (
            response.status().as_u16(),
            response.json::<Value>().await.expect("json"),
        )
    };
    assert_eq!(status, 400, "{body}");
}
