//! What the turn loop adds to a model call.
//!
//! Against the scripted model server with zero delay, compares a bare HTTP round trip
//! (the same chat request, streamed, read to the end with reqwest) with whole turns run
//! through the runtime: model call, event writes to a real SQLite file (WAL), schema
//! checks, a cheap tool call. Reports medians and the ratio. Run with
//! `cargo bench -p agentplane-runtime --bench turn_overhead`; method and figures are in
//! `bench/README.md`. Environment: `BENCH_TURNS` (default 300), `BENCH_ROUND_TRIPS`
//! (default 2000). Besides wall time it reports the CPU time the whole process (scripted
//! server, client and runtime together) spent per operation, read from `/proc/self/stat`:
//! on a shared machine that is the steadier figure.

use std::time::{Duration, Instant};

use agentplane_engine::NoObserver;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime, Task};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Stats {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let total: Duration = samples.iter().sum();
    Stats {
        p50: at(0.5),
        p99: at(0.99),
        mean: total / samples.len() as u32,
    }
}

/// CPU time (user + system) this process has used so far, from `/proc/self/stat`.
fn cpu_now() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let per_second = 100; // USER_HZ on Linux
    Duration::from_micros((ticks(11) + ticks(12)) * 1_000_000 / per_second)
}

/// Runs `work`, returning its result and the CPU time the process spent meanwhile.
async fn cpu_of<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let before = cpu_now();
    let out = work.await;
    (out, cpu_now().saturating_sub(before))
}

fn show(name: &str, s: &Stats) {
    println!(
        "{name:<44} p50 {:>9.1} µs   p99 {:>9.1} µs   mean {:>9.1} µs",
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.mean.as_secs_f64() * 1e6
    );
}

async fn run_turn(
    runtime: &Runtime,
    agent: &str,
    workspace: &std::path::Path,
) -> Result<agentplane_engine::TurnOutcome, agentplane_runtime::RuntimeError> {
    runtime
        .run_task(
            Task {
                agent: agent.to_owned(),
                workspace: workspace.to_path_buf(),
                input: "What is the answer?".to_owned(),
            },
            &NoObserver,
            CancellationToken::new(),
        )
        .await
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let turns = env_count("BENCH_TURNS", 300);
    let round_trips = env_count("BENCH_ROUND_TRIPS", 2000);

    // One server per measurement, both answering the same way.
    let text_server = ScriptedServer::start(
        Scenario::new(vec![Step::text("The answer is 42.").with_usage(20, 5)]).repeating(true),
    )
    .await
    .expect("server");
    let tool_server = ScriptedServer::start(
        Scenario::new(vec![
            Step::tool_call("list_files", json!({})).with_usage(20, 5),
            Step::tool_call("finish_task", json!({"summary": "done"})).with_usage(30, 5),
        ])
        .repeating(true),
    )
    .await
    .expect("server");

    // Baseline: the same request the adapter sends, streamed and read to the end.
    let client = reqwest::Client::new();
    let body = json!({
        "model": "scripted-model",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the answer?"}
        ]
    });
    let url = format!("{}/chat/completions", text_server.base_url());
    let bare = |n: usize| {
        let client = client.clone();
        let body = body.clone();
        let url = url.clone();
        async move {
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let started = Instant::now();
                let response = client.post(&url).json(&body).send().await.expect("send");
                let bytes = response.bytes().await.expect("body");
                assert!(!bytes.is_empty());
                samples.push(started.elapsed());
            }
            samples
        }
    };
    bare(200).await; // warm-up

    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("ws");
    std::fs::write(workspace.join("a.txt"), "a").expect("file");
    let runtime_for = |name: &'static str, base_url: String| {
        let root = dir.path().to_path_buf();
        async move {
            let file = root.join(format!("bench-{name}.toml"));
            std::fs::write(
                &file,
                format!(
                    "[llm]\nbase_url = \"{base_url}\"\nmodel = \"scripted-model\"\n\
                     [store]\npath = \"bench-{name}.db\"\n\
                     [agents.chat]\nsystem_prompt = \"Answer briefly.\"\n\
                     [agents.lister]\nsystem_prompt = \"List files.\"\nensembles = [\"fs\"]\n"
                ),
            )
            .expect("config");
            let env = |_: &str| None;
            let config = Config::load_from(&ConfigSource {
                explicit: Some(&file),
                cwd: &root,
                env: &env,
            })
            .expect("config");
            Runtime::start(config).await.expect("runtime")
        }
    };
    let text_runtime = runtime_for("text", text_server.base_url()).await;
    let tool_runtime = runtime_for("tool", tool_server.base_url()).await;
    let run = |runtime, agent| run_turn(runtime, agent, &workspace);
    for _ in 0..50 {
        run(&text_runtime, "chat").await.expect("warm-up");
        run(&tool_runtime, "lister").await.expect("warm-up");
    }

    let (baseline, bare_cpu) = cpu_of(bare(round_trips)).await;
    let baseline = stats(baseline);
    let (chat, chat_cpu) = cpu_of(async {
        let mut chat = Vec::with_capacity(turns);
        for _ in 0..turns {
            let started = Instant::now();
            let outcome = run(&text_runtime, "chat").await.expect("turn");
            assert!(outcome.stop_reason.is_success());
            chat.push(started.elapsed());
        }
        chat
    })
    .await;
    let chat = stats(chat);
    let (tool, tool_cpu) = cpu_of(async {
        let mut tool = Vec::with_capacity(turns);
        for _ in 0..turns {
            let started = Instant::now();
            let outcome = run(&tool_runtime, "lister").await.expect("turn");
            assert!(outcome.stop_reason.is_success());
            // Two model calls per turn: report per call.
            tool.push(started.elapsed() / 2);
        }
        tool
    })
    .await;
    let tool = stats(tool);
    let (baseline_again, bare_cpu_again) = cpu_of(bare(round_trips)).await;
    let baseline_again = stats(baseline_again);

    println!(
        "turn loop overhead per model call ({turns} turns, {round_trips} bare round trips, each side)"
    );
    show("bare HTTP round trip (before)", &baseline);
    show("bare HTTP round trip (after)", &baseline_again);
    show("turn, 1 model call, text answer", &chat);
    show("turn, 2 model calls + list_files, per call", &tool);
    let base = (baseline.p50 + baseline_again.p50) / 2;
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64();
    println!(
        "ratio to bare round trip (p50): text turn {:.2}x, tool turn per call {:.2}x; added per call: {:.0} µs / {:.0} µs",
        ratio(chat.p50),
        ratio(tool.p50),
        (chat.p50.as_secs_f64() - base.as_secs_f64()) * 1e6,
        (tool.p50.as_secs_f64() - base.as_secs_f64()) * 1e6,
    );
    let per = |cpu: Duration, n: usize| cpu.as_secs_f64() * 1e6 / n as f64;
    let bare_per = per(bare_cpu + bare_cpu_again, 2 * round_trips);
    let chat_per = per(chat_cpu, turns);
    let tool_per = per(tool_cpu, 2 * turns);
    println!(
        "CPU per operation (whole process): bare round trip {bare_per:.0} µs, text turn {chat_per:.0} µs ({:.2}x), tool turn per call {tool_per:.0} µs ({:.2}x)",
        chat_per / bare_per,
        tool_per / bare_per,
    );
}
