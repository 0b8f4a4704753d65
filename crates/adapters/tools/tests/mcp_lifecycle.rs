//! MCP server processes over their whole life: lazy start, failed starts (exits at
//! once, garbage instead of JSON-RPC, silence, no such program), the environment they
//! get, connections kept per thread and reaped, shutdown, and no process left behind
//! (grandchildren included, also one that left the process group).

mod mcp_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentplane_core::{ThreadId, ToolErrorKind};
use agentplane_tools::{McpServers, McpTransport};
use mcp_support::*;
use serde_json::json;

fn echo_ctx() -> agentplane_engine::ports::ToolContext {
    ctx(Duration::from_secs(10), 64 * 1024)
}

#[tokio::test]
async fn grandchildren_die_with_the_server_even_outside_its_group() {
    let marker = marker("tree");
    let script = "sleep 300 & setsid sleep 301 & exec \"$0\" \"$@\"";
    let transport = stdio(
        "sh",
        &["-c", script, &node(), &everything_js(), "stdio"],
        &marker,
    );
    let servers = McpServers::new(vec![spec("ev", transport)]);
    let ensemble = servers.ensemble("ev", &ThreadId::new()).unwrap();
    assert!(marked(&marker).is_empty(), "nothing starts before open");
    ensemble.open().await.expect("opens");
    let out = ensemble
        .call("mcp__ev__echo", json!({"message": "hi"}), &echo_ctx())
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: hi");
    let running = marked(&marker);
    assert_eq!(running.len(), 3, "node and two sleeps: {running:?}");

    let started = Instant::now();
    ensemble.close().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        marked(&marker),
        Vec::<u32>::new(),
        "no process outlives close"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_fails_open_with_its_stderr() {
    let marker = marker("exits");
    let script = "i=0; while [ $i -lt 300 ]; do echo noise-$i >&2; i=$((i+1)); done; \
                  echo 'fatal: no config' >&2; exit 3";
    let servers = McpServers::new(vec![spec("dead", stdio("sh", &["-c", script], &marker))]);
    let ensemble = servers.ensemble("dead", &ThreadId::new()).unwrap();
    let started = Instant::now();
    let err = ensemble.open().await.expect_err("exits");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.message.contains("`dead`"), "{}", err.message);
    assert!(err.message.contains("fatal: no config"), "{}", err.message);
    assert!(
        !err.message.contains("noise-0\n"),
        "only the tail: {}",
        err.message
    );
    assert!(err.message.len() < 3000, "bounded: {}", err.message.len());
    assert!(ensemble.tools().is_empty());
    ensemble.close().await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test]
async fn garbage_or_silence_instead_of_an_answer_is_a_startup_timeout() {
    let marker = marker("garbage");
    let garbage = "echo 'this is not json'; echo '{\"jsonrpc\": broken'; echo '[1,2,3]'; \
                   echo 'garbage said this' >&2; sleep 300";
    let mut noisy = spec("noisy", stdio("sh", &["-c", garbage], &marker));
    noisy.startup_timeout = Duration::from_millis(800);
    let mut silent = spec("silent", stdio("sleep", &["300"], &marker));
    silent.startup_timeout = Duration::from_millis(800);
    let servers = McpServers::new(vec![noisy, silent]);

    for (name, stderr) in [("noisy", "garbage said this"), ("silent", "")] {
        let ensemble = servers.ensemble(name, &ThreadId::new()).unwrap();
        let started = Instant::now();
        let err = ensemble.open().await.expect_err("no answer");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(750) && took < Duration::from_secs(3),
            "{took:?}"
        );
        assert!(
            err.message.contains(&format!("`{name}`")),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("startup timeout of 800 ms"),
            "{}",
            err.message
        );
        assert!(err.message.contains(stderr), "{}", err.message);
        ensemble.close().await;
    }
    assert_eq!(
        gone_within(&marker, Duration::from_secs(1)).await,
        Vec::<u32>::new()
    );
}

#[tokio::test]
async fn a_missing_program_fails_open_and_names_it() {
    let servers = McpServers::new(vec![spec(
        "ghost",
        stdio("/nonexistent/mcp-server", &[], "unused"),
    )]);
    let ensemble = servers.ensemble("ghost", &ThreadId::new()).unwrap();
    let err = ensemble.open().await.expect_err("no such program");
    assert!(err.message.contains("`ghost`"), "{}", err.message);
    assert!(
        err.message.contains("/nonexistent/mcp-server"),
        "{}",
        err.message
    );
    ensemble.close().await;
}

#[tokio::test]
async fn an_open_cut_short_leaves_nothing_running() {
    let marker = marker("cancelled");
    let servers = McpServers::new(vec![spec("slow", stdio("sleep", &["300"], &marker))]);
    let ensemble = servers.ensemble("slow", &ThreadId::new()).unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(300), ensemble.open()).await;
    assert!(cut.is_err(), "still starting");
    ensemble.close().await;
    assert_eq!(
        gone_within(&marker, Duration::from_secs(1)).await,
        Vec::<u32>::new()
    );
}

#[tokio::test]
async fn the_server_inherits_the_environment_without_our_secrets() {
    assert!(
        std::env::vars().any(|(k, _)| k.starts_with("AGENTPLANE_")),
        "the test environment holds AGENTPLANE_ variables"
    );
    let marker = marker("env");
    let mut transport = everything_stdio(&marker);
    let cwd = tempfile::tempdir().unwrap();
    if let McpTransport::Stdio { env, cwd: dir, .. } = &mut transport {
        env.insert("MCP_TEST_EXTRA".into(), "from-the-spec".into());
        *dir = Some(cwd.path().to_path_buf());
    }
    let servers = McpServers::new(vec![spec("ev", transport)]);
    let ensemble = servers.ensemble("ev", &ThreadId::new()).unwrap();
    ensemble.open().await.expect("opens");
    let out = ensemble
        .call(
            "mcp__ev__get-env",
            json!({}),
            &ctx(Duration::from_secs(10), 1 << 20),
        )
        .await
        .expect("get-env");
    ensemble.close().await;
    let env: BTreeMap<String, String> = serde_json::from_str(&out.content).expect("JSON");
    assert_eq!(
        env.get("MCP_TEST_EXTRA").map(String::as_str),
        Some("from-the-spec")
    );
    assert!(env.contains_key("PATH"), "inherited");
    assert!(
        !env.keys().any(|k| k.starts_with("AGENTPLANE_")),
        "{:?}",
        env.keys()
    );

    // The working directory is the spec's.
    let pwd = spec_with_cwd(&marker, cwd.path());
    let servers = McpServers::new(vec![pwd]);
    let err = servers
        .ensemble("pwd", &ThreadId::new())
        .unwrap()
        .open()
        .await
        .expect_err("exits");
    let real = cwd.path().canonicalize().unwrap();
    assert!(
        err.message.contains(&real.display().to_string()),
        "{}",
        err.message
    );
}

fn spec_with_cwd(marker: &str, dir: &std::path::Path) -> agentplane_tools::McpServerSpec {
    let mut transport = stdio("sh", &["-c", "pwd -P >&2; exit 1"], marker);
    if let McpTransport::Stdio { cwd, .. } = &mut transport {
        *cwd = Some(dir.to_path_buf());
    }
    spec("pwd", transport)
}

#[tokio::test]
async fn kept_connections_are_reused_by_the_thread_and_reaped_when_idle() {
    let marker = marker("idle");
    let mut kept = spec("ev", everything_stdio(&marker));
    // Long enough that starting another server on a loaded machine (CI runs the suite
    // in parallel on two cores) cannot outlast it before the checks below.
    kept.idle_timeout = Duration::from_secs(5);
    let servers = McpServers::new(vec![kept]);
    let (a, b) = (ThreadId::new(), ThreadId::new());

    let first = servers.ensemble("ev", &a).unwrap();
    first.open().await.expect("opens");
    first.close().await;
    let after_first = marked(&marker);
    assert_eq!(after_first.len(), 1, "kept after close: {after_first:?}");

    let second = servers.ensemble("ev", &a).unwrap();
    second.open().await.expect("reuses");
    assert_eq!(
        marked(&marker),
        after_first,
        "the same process serves the thread"
    );
    let out = second
        .call("mcp__ev__echo", json!({"message": "reused"}), &echo_ctx())
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: reused");
    second.close().await;

    let other = servers.ensemble("ev", &b).unwrap();
    other.open().await.expect("opens");
    assert_eq!(marked(&marker).len(), 2, "another thread gets its own");
    other.close().await;

    // Each is reaped once idle for the timeout; closing `second` restarted A's clock.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        marked(&marker).len(),
        2,
        "not reaped before the idle timeout"
    );
    assert_eq!(
        gone_within(&marker, Duration::from_secs(10)).await,
        Vec::<u32>::new()
    );

    // A thread whose connection was reaped connects anew.
    let third = servers.ensemble("ev", &a).unwrap();
    third.open().await.expect("reconnects");
    let out = third
        .call("mcp__ev__echo", json!({"message": "fresh"}), &echo_ctx())
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: fresh");
    third.close().await;
    servers.shutdown().await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test]
async fn broken_connections_are_never_kept() {
    let marker = marker("broken");
    let mut kept = spec("ev", everything_stdio(&marker));
    kept.idle_timeout = Duration::from_secs(60);
    let servers = McpServers::new(vec![kept]);
    let thread = ThreadId::new();
    let ensemble = servers.ensemble("ev", &thread).unwrap();
    ensemble.open().await.expect("opens");
    let pid = marked(&marker)[0];
    kill9(pid);
    let err = ensemble
        .call("mcp__ev__echo", json!({"message": "x"}), &echo_ctx())
        .await
        .expect_err("dead");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    ensemble.close().await;
    assert!(
        gone_within(&marker, Duration::from_secs(1))
            .await
            .is_empty()
    );

    let next = servers.ensemble("ev", &thread).unwrap();
    next.open().await.expect("a new connection");
    let now = marked(&marker);
    assert!(now.len() == 1 && now[0] != pid, "{now:?}");
    next.close().await;
    servers.shutdown().await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test]
async fn shutdown_ends_kept_and_busy_connections() {
    let marker = marker("shutdown");
    let mut kept = spec("ev", everything_stdio(&marker));
    kept.idle_timeout = Duration::from_secs(60);
    let servers = McpServers::new(vec![kept]);

    let idle = servers.ensemble("ev", &ThreadId::new()).unwrap();
    idle.open().await.expect("opens");
    idle.close().await;
    let busy = servers.ensemble("ev", &ThreadId::new()).unwrap();
    busy.open().await.expect("opens");
    assert_eq!(marked(&marker).len(), 2);

    servers.clone().shutdown().await;
    assert_eq!(marked(&marker), Vec::<u32>::new());
    let err = busy
        .call("mcp__ev__echo", json!({"message": "x"}), &echo_ctx())
        .await
        .expect_err("shut down");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    busy.close().await;
}
