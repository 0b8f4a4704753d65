//! What the MCP ensemble adds to a tool call: N `echo` calls to the official
//! server-everything over stdio, made directly with rmcp (`peer.call_tool`) and through
//! `McpServers`' ensemble `call`, interleaved in rounds so both see the same machine.
//! Prints p50/p99 of each, their ratio and the added microseconds.
//!
//! Run: `eval "$(scripts/test-peers.sh)"; cargo bench -p agentplane-tools --bench mcp_call`
//! (`MCP_BENCH_CALLS` sets N, default 2000).

use std::time::{Duration, Instant};

use agentplane_core::ThreadId;
use agentplane_engine::ports::ToolContext;
use agentplane_tools::{McpServerSpec, McpServers, McpTransport};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use serde_json::json;

const ROUNDS: usize = 20;
const WARM_UP: usize = 200;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run `eval \"$(scripts/test-peers.sh)\"` first")
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn main() {
    let calls: usize = std::env::var("MCP_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let node = env("AGENTPLANE_TEST_NODE");
    let script = format!(
        "{}/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        env("AGENTPLANE_TEST_NODE_PEERS")
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(calls, node, script));
}

async fn run(calls: usize, node: String, script: String) {
    // rmcp directly, over the pipes of a process we start.
    let mut child = tokio::process::Command::new(&node)
        .args([script.as_str(), "stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let direct = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("bench", "0"),
    )
    .serve(transport)
    .await
    .expect("initialize");

    // The same server through our ensemble.
    let servers = McpServers::new(vec![McpServerSpec {
        name: "ev".into(),
        transport: McpTransport::Stdio {
            command: node.clone(),
            args: vec![script.clone(), "stdio".into()],
            env: Default::default(),
            cwd: None,
        },
        startup_timeout: Duration::from_secs(30),
        call_timeout: None,
        idle_timeout: Duration::ZERO,
        tools: Default::default(),
        pin: Default::default(),
        screen: Default::default(),
    }]);
    let ensemble = servers
        .ensemble("ev", &ThreadId::new())
        .expect("configured");
    ensemble.open().await.expect("opens");
    let ctx = ToolContext {
        workspace: std::env::temp_dir(),
        timeout: Duration::from_secs(10),
        output_cap: 64 * 1024,
        scope: None,
    };

    let direct_call = || async {
        let args = json!({"message": "ping"}).as_object().cloned().unwrap();
        let params = CallToolRequestParams::new("echo").with_arguments(args);
        let started = Instant::now();
        let result = direct.call_tool(params).await.expect("direct echo");
        assert!(result.is_error != Some(true));
        started.elapsed()
    };
    let ensemble_call = || async {
        let started = Instant::now();
        let out = ensemble
            .call("mcp__ev__echo", json!({"message": "ping"}), &ctx)
            .await
            .expect("ensemble echo");
        assert_eq!(out.content, "Echo: ping");
        started.elapsed()
    };

    for _ in 0..WARM_UP {
        direct_call().await;
        ensemble_call().await;
    }
    let per_round = calls.div_ceil(ROUNDS);
    let mut direct_times = Vec::with_capacity(calls);
    let mut ensemble_times = Vec::with_capacity(calls);
    for round in 0..ROUNDS {
        // Alternate which side goes first, so neither always runs on a warmer cache.
        for side in [round % 2, 1 - round % 2] {
            for _ in 0..per_round {
                if side == 0 {
                    direct_times.push(direct_call().await);
                } else {
                    ensemble_times.push(ensemble_call().await);
                }
            }
        }
    }
    direct_times.sort();
    ensemble_times.sort();

    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, d99) = (
        percentile(&direct_times, 0.5),
        percentile(&direct_times, 0.99),
    );
    let (e50, e99) = (
        percentile(&ensemble_times, 0.5),
        percentile(&ensemble_times, 0.99),
    );
    println!(
        "mcp_call: {} echo calls each over stdio to server-everything, {ROUNDS} interleaved rounds",
        direct_times.len()
    );
    println!(
        "  rmcp peer.call_tool   p50 {:8.1} us   p99 {:8.1} us",
        micros(d50),
        micros(d99)
    );
    println!(
        "  McpServers ensemble   p50 {:8.1} us   p99 {:8.1} us",
        micros(e50),
        micros(e99)
    );
    println!(
        "  ratio                 p50 {:8.3}      p99 {:8.3}",
        micros(e50) / micros(d50),
        micros(e99) / micros(d99)
    );
    println!(
        "  added                 p50 {:+8.1} us   p99 {:+8.1} us",
        micros(e50) - micros(d50),
        micros(e99) - micros(d99)
    );

    ensemble.close().await;
    let _ = direct.cancel().await;
    let _ = child.kill().await;
    servers.shutdown().await;
}
