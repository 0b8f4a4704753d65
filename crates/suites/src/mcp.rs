//! A JSON-RPC client of `/mcp` for the suites: a session opened with an API key, and one
//! request answered in it (sent back as JSON or as an event of an SSE stream).

use reqwest::Method;
use serde_json::{Value, json};

use crate::Served;

/// The protocol version the sessions speak.
const PROTOCOL: &str = "2025-06-18";

fn post(served: &Served, key: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(Method::POST, format!("{}/mcp", served.base))
        .bearer_auth(key)
        .header("Accept", "application/json, text/event-stream")
}

/// Opens an MCP session on `/mcp` with `key` (initialize, then initialized); its id.
pub async fn mcp_session(served: &Served, key: &str) -> String {
    let response = post(served, key)
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "agentplane-suites", "version": "1"}}
        }))
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status(), 200, "MCP initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let _ = response.bytes().await;
    let response = post(served, key)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", PROTOCOL)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized");
    assert!(response.status().is_success(), "{}", response.status());
    session
}

/// One JSON-RPC request `id` in `session`: the message answering it.
pub async fn mcp_request(
    served: &Served,
    key: &str,
    session: &str,
    id: usize,
    method: &str,
    params: Value,
) -> Value {
    let response = post(served, key)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", PROTOCOL)
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .send()
        .await
        .expect("MCP request");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "MCP {method}: {text}");
    std::iter::once(text.as_str())
        .chain(text.lines().filter_map(|l| l.strip_prefix("data:")))
        .filter_map(|candidate| serde_json::from_str::<Value>(candidate.trim()).ok())
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer to MCP {method} {id}: {text}"))
}

/// The official `mcp` client (`testkit/peers/mcp_client.py`, PyPI's `mcp`) against
/// `base` + `path` (`/mcp/gateway` or `/mcp`) over streamable HTTP, as
/// [`CLIENT`](crate::CLIENT): it lists the tools and calls `tool` with `arguments`; its
/// printed document.
pub async fn official_client_call(base: &str, path: &str, tool: &str, arguments: &Value) -> Value {
    use agentplane_testkit::peers;
    let mut cmd = std::process::Command::new(peers::python());
    cmd.arg(peers::mcp_client_script())
        .args(["--timeout", "60", "--http"])
        .arg(format!("{base}{path}"))
        .arg("--header")
        .arg(format!("X-Client-ID: {}", crate::CLIENT))
        .args(["--tool", tool, "--arguments"])
        .arg(arguments.to_string())
        .stdin(std::process::Stdio::null());
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("the MCP client runs");
    peers::client_json(&output)
}
