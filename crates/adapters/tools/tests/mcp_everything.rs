//! The MCP client against the official `@modelcontextprotocol/server-everything`, over
//! stdio and streamable HTTP: listing, calls, errors, timeouts, a server killed in the
//! middle of a call, and no process left behind.

mod mcp_support;

use std::time::{Duration, Instant};

use agentplane_core::{ThreadId, ToolErrorKind};
use agentplane_tools::{McpServerSpec, McpServers};
use mcp_support::*;
use serde_json::json;

/// One server-everything, reached one way or the other.
enum Peer {
    Stdio { marker: String },
    Http(HttpEverything),
}

impl Peer {
    async fn start(http: bool) -> Self {
        if http {
            Peer::Http(HttpEverything::start(0).await)
        } else {
            Peer::Stdio {
                marker: marker("stdio"),
            }
        }
    }

    fn spec(&self) -> McpServerSpec {
        match self {
            Peer::Stdio { marker } => spec("ev", everything_stdio(marker)),
            Peer::Http(server) => spec("ev", server.transport()),
        }
    }

    /// Kills the server process (stdio: the one we started; HTTP: the listener).
    async fn kill(&mut self) {
        match self {
            Peer::Stdio { marker } => {
                let pids = marked(marker);
                assert_eq!(pids.len(), 1, "one stdio server runs: {pids:?}");
                kill9(pids[0]);
            }
            Peer::Http(server) => server.kill().await,
        }
    }

    /// Starts the server again where the spec expects it.
    async fn restart(&mut self) {
        if let Peer::Http(server) = self {
            let port = server.port;
            *server = HttpEverything::start(port).await;
        }
    }
}

async fn tools_calls_and_errors(http: bool) {
    let peer = Peer::start(http).await;
    let mut spec = peer.spec();
    spec.call_timeout = Some(Duration::from_millis(400));
    let servers = McpServers::new(vec![spec]);
    let thread = ThreadId::new();
    assert!(servers.ensemble("nope", &thread).is_none());
    let ensemble = servers.ensemble("ev", &thread).expect("configured");
    assert_eq!(ensemble.name(), "ev");
    assert!(ensemble.tools().is_empty(), "nothing before open");
    ensemble.open().await.expect("opens");

    let tools = ensemble.tools();
    assert!(tools.len() >= 5, "{tools:?}");
    assert!(tools.iter().all(|t| t.name.starts_with("mcp__ev__")));
    let echo = tools
        .iter()
        .find(|t| t.name == "mcp__ev__echo")
        .expect("echo");
    assert!(
        echo.side_effects,
        "echo is annotated read-only, but hints are not trusted (ADR 0016)"
    );
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert!(tools.iter().any(|t| t.name == "mcp__ev__get-sum"));

    let ctx = ctx(Duration::from_secs(10), 64 * 1024);
    let out = ensemble
        .call("mcp__ev__echo", json!({"message": "hello"}), &ctx)
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: hello");
    assert!(!out.truncated);

    let out = ensemble
        .call("mcp__ev__get-sum", json!({"a": 2, "b": 40.5}), &ctx)
        .await
        .expect("get-sum");
    assert!(out.content.contains("42.5"), "{}", out.content);

    // The server rejects arguments its own schema refuses: a tool error, not a panic.
    let err = ensemble
        .call("mcp__ev__get-sum", json!({"a": "two"}), &ctx)
        .await
        .expect_err("bad arguments");
    eprintln!("bad arguments: {}", err.message);
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed, "{err:?}");
    assert!(!err.message.is_empty());

    let err = ensemble
        .call("mcp__ev__no-such-tool", json!({}), &ctx)
        .await
        .expect_err("unknown");
    assert_eq!(err.kind, ToolErrorKind::UnknownTool);
    let err = ensemble
        .call("mcp__ev__echo", json!([1]), &ctx)
        .await
        .expect_err("not an object");
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);

    // The slow tool hits the server's call timeout (shorter than the turn's).
    let started = Instant::now();
    let err = ensemble
        .call(
            "mcp__ev__trigger-long-running-operation",
            json!({"duration": 5, "steps": 5}),
            &ctx,
        )
        .await
        .expect_err("too slow");
    assert_eq!(err.kind, ToolErrorKind::Timeout, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // ... and the turn's own timeout when it is the shorter one.
    let short = mcp_support::ctx(Duration::from_millis(150), 1024);
    let err = ensemble
        .call(
            "mcp__ev__trigger-long-running-operation",
            json!({"duration": 5, "steps": 5}),
            &short,
        )
        .await
        .expect_err("too slow");
    assert_eq!(err.kind, ToolErrorKind::Timeout, "{err:?}");
    assert!(err.message.contains("150 ms"), "{}", err.message);

    // The connection survives timeouts.
    let out = ensemble
        .call("mcp__ev__echo", json!({"message": "still here"}), &ctx)
        .await
        .expect("echo after timeouts");
    assert_eq!(out.content, "Echo: still here");

    // Output is cut at the cap.
    let tiny = mcp_support::ctx(Duration::from_secs(10), 8);
    let out = ensemble
        .call("mcp__ev__echo", json!({"message": "a long message"}), &tiny)
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: a ");
    assert!(out.truncated);

    ensemble.close().await;
    let err = ensemble
        .call("mcp__ev__echo", json!({"message": "x"}), &ctx)
        .await
        .expect_err("closed");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    if let Peer::Stdio { marker } = &peer {
        assert_eq!(
            marked(marker),
            Vec::<u32>::new(),
            "no process outlives close"
        );
    }
}

#[tokio::test]
async fn stdio_tools_calls_errors_and_timeouts() {
    tools_calls_and_errors(false).await;
}

#[tokio::test]
async fn http_tools_calls_errors_and_timeouts() {
    tools_calls_and_errors(true).await;
}

async fn killed_mid_call(http: bool) {
    let mut peer = Peer::start(http).await;
    let servers = McpServers::new(vec![peer.spec()]);
    let thread = ThreadId::new();
    let ensemble = servers.ensemble("ev", &thread).unwrap();
    ensemble.open().await.expect("opens");
    let ctx = ctx(Duration::from_secs(20), 64 * 1024);

    let call = ensemble.call(
        "mcp__ev__trigger-long-running-operation",
        json!({"duration": 10, "steps": 10}),
        &ctx,
    );
    let kill = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peer.kill().await;
    };
    let started = Instant::now();
    let (result, ()) = tokio::join!(call, kill);
    let err = result.expect_err("the server died");
    eprintln!("killed mid-call: {}", err.message);
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed, "{err:?}");
    assert!(err.message.contains("`ev`"), "{}", err.message);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "noticed in {:?}",
        started.elapsed()
    );

    // Later calls fail fast.
    let started = Instant::now();
    let err = ensemble
        .call("mcp__ev__echo", json!({"message": "x"}), &ctx)
        .await
        .expect_err("broken");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(started.elapsed() < Duration::from_millis(500));
    ensemble.close().await;
    if let Peer::Stdio { marker } = &peer {
        assert_eq!(
            gone_within(marker, Duration::from_secs(2)).await,
            Vec::<u32>::new()
        );
    }

    // The next turn's ensemble reconnects.
    peer.restart().await;
    let next = servers.ensemble("ev", &thread).unwrap();
    next.open().await.expect("reconnects");
    let out = next
        .call("mcp__ev__echo", json!({"message": "again"}), &ctx)
        .await
        .expect("works");
    assert_eq!(out.content, "Echo: again");
    next.close().await;
    if let Peer::Stdio { marker } = &peer {
        assert_eq!(marked(marker), Vec::<u32>::new());
    }
}

#[tokio::test]
async fn stdio_server_killed_mid_call() {
    killed_mid_call(false).await;
}

#[tokio::test]
async fn http_server_killed_mid_call() {
    killed_mid_call(true).await;
}

#[tokio::test]
async fn list_reports_every_server_concurrently() {
    let http = HttpEverything::start(0).await;
    let marker = marker("list");
    let mut broken = spec(
        "broken",
        stdio("sh", &["-c", "echo cannot-start >&2; exit 3"], &marker),
    );
    broken.startup_timeout = Duration::from_secs(5);
    let mut unreachable = spec(
        "gone",
        agentplane_tools::McpTransport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: [(
                "Authorization".to_string(),
                "Bearer s3cret-token".to_string(),
            )]
            .into(),
            oauth: None,
        },
    );
    unreachable.startup_timeout = Duration::from_secs(5);
    let mut wrong_path = spec(
        "wrong",
        agentplane_tools::McpTransport::Http {
            url: format!("http://127.0.0.1:{}/not-mcp", http.port),
            headers: [(
                "Authorization".to_string(),
                "Bearer s3cret-token".to_string(),
            )]
            .into(),
            oauth: None,
        },
    );
    wrong_path.startup_timeout = Duration::from_secs(5);
    let servers = McpServers::new(vec![
        spec("local", everything_stdio(&marker)),
        spec("remote", http.transport()),
        broken,
        unreachable,
        wrong_path,
    ]);
    let reports = servers.list().await;
    let names: Vec<&str> = reports.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["local", "remote", "broken", "gone", "wrong"]);
    assert!(
        reports[0].transport.starts_with("stdio: "),
        "{}",
        reports[0].transport
    );
    assert!(reports[0].transport.ends_with("index.js stdio"));
    assert_eq!(reports[1].transport, format!("http: {}", http.url()));
    for report in &reports[..2] {
        let tools = report.tools.as_ref().expect("listed");
        let echo = format!("mcp__{}__echo", report.name);
        assert!(tools.iter().any(|t| t.name == echo), "{tools:?}");
    }
    let err = reports[2].tools.as_ref().expect_err("exits at once");
    assert!(
        err.contains("`broken`") && err.contains("cannot-start"),
        "{err}"
    );
    let err = reports[3].tools.as_ref().expect_err("nothing listens");
    eprintln!(
        "unreachable: {err}\nbroken: {}",
        reports[2].tools.as_ref().unwrap_err()
    );
    assert!(err.contains("`gone`"), "{err}");
    assert!(!err.contains("rmcp::"), "no type names: {err}");
    assert!(err.to_lowercase().contains("refused"), "the cause: {err}");
    let err = reports[4].tools.as_ref().expect_err("no MCP there");
    eprintln!("wrong path: {err}");
    assert!(err.contains("`wrong`") && err.contains("404"), "{err}");
    assert!(err.len() < 1500, "an error page is cut: {}", err.len());
    for report in &reports {
        assert!(!format!("{report:?}").contains("s3cret"), "{report:?}");
    }
    assert_eq!(
        marked(&marker),
        Vec::<u32>::new(),
        "list leaves nothing running"
    );
}
