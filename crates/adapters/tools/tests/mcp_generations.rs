//! Our MCP client against servers of each protocol generation, all PyPI's `mcp` 2.3.0
//! restricted to one: a server that speaks only 2026-07-28 (`server/discover`, no
//! `initialize`), and one that speaks only the session-based generations. The client
//! asks `server/discover` first and falls back to `initialize` (2025-11-25). npm's
//! server-everything (session-based) is `mcp_everything.rs`.

mod mcp_support;

use std::time::Duration;

use agentplane_core::ThreadId;
use agentplane_tools::McpServers;
use mcp_support::*;
use serde_json::json;

/// Opens the server's ensemble, calls `stamp` twice, and closes.
async fn two_calls(upstream: &Upstream) {
    let servers = McpServers::new(vec![spec("up", upstream.transport())]);
    let ensemble = servers
        .ensemble("up", &ThreadId::new())
        .expect("configured");
    ensemble.open().await.expect("opens");
    let names: Vec<String> = ensemble.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["mcp__up__stamp"]);
    for n in 1..=2 {
        let out = ensemble
            .call(
                "mcp__up__stamp",
                json!({}),
                &ctx(Duration::from_secs(10), 4096),
            )
            .await
            .expect("stamp answers");
        assert_eq!(out.content, format!("stamp {n}"));
    }
    ensemble.close().await;
}

#[tokio::test]
async fn a_server_that_speaks_only_2026_07_28() {
    let upstream = Upstream::start("modern", None).await;
    two_calls(&upstream).await;
    // Discovery, then every request under the modern version: no `initialize`.
    assert_eq!(upstream.versions().await, ["2026-07-28"]);
}

#[tokio::test]
async fn a_server_that_speaks_only_the_session_generations() {
    let upstream = Upstream::start("legacy", None).await;
    two_calls(&upstream).await;
    // `server/discover` was refused, so `initialize` followed; the session then runs
    // at 2025-11-25, the newest generation with a handshake.
    let versions = upstream.versions().await;
    assert_eq!(
        versions.last().map(String::as_str),
        Some("2025-11-25"),
        "{versions:?}"
    );
}
