//! The access log: one line per request with method, path, status, duration and
//! client; never the token, the query string or an unvalidated client id.

use std::io::Write;
use std::sync::{Arc, Mutex};

use reqwest::Method;

use crate::harness::{Setup, TOKEN};

/// Collects everything the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().expect("log buffer").clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains("agentplane::access"))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn each_request_is_one_line_without_secrets() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    // Global: a thread-local subscriber races with the callsite cache of tests running
    // beside this one. Other tests' lines are told apart by this test's thread id.
    tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");

    let api = Setup::new(vec![]).token(TOKEN).start().await;
    let thread = api.create_thread("log-reader", "chat").await;
    let path = format!("/v1/threads/{thread}");
    api.get(&format!("{path}?secret=hunter2"), "log-reader")
        .await;
    api.send(api.request(
        Method::GET,
        &format!("{path}/history"),
        Some("evil\" status=200 forged=\""),
    ))
    .await;
    api.send(
        api.http
            .get(api.url(&format!("{path}/history")))
            .header("Authorization", "Bearer wrong-secret"),
    )
    .await;
    // MCP over HTTP is logged like any route, with its client.
    let mcp = api
        .request(Method::POST, "/mcp", Some("log-reader"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .expect("MCP request");
    let _ = mcp.bytes().await;
    // Let the connection tasks drop their bodies.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let mut lines: Vec<String> = captured
        .lines()
        .into_iter()
        .filter(|l| l.contains("log-reader") || l.contains(thread.as_str()))
        .collect();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let created = lines.remove(0);
    for field in [
        "method=POST",
        "path=/v1/threads ",
        "status=201",
        "client=\"log-reader\"",
        "duration_ms=",
        "finished=true",
    ] {
        assert!(created.contains(field), "{field} in {created}");
    }
    let read = &lines[0];
    assert!(read.contains(&format!("path={path} ")), "{read}");
    assert!(read.contains("status=200"), "{read}");
    let forged = &lines[1];
    assert!(
        forged.contains("status=400") && forged.contains("client=\"-\""),
        "{forged}"
    );
    assert!(lines[2].contains("status=401"), "{}", lines[2]);
    let mcp = &lines[3];
    assert!(
        mcp.contains("method=POST")
            && mcp.contains("path=/mcp ")
            && mcp.contains("client=\"log-reader\""),
        "{mcp}"
    );
    let all = lines.join("\n") + &created;
    for secret in [TOKEN, "hunter2", "wrong-secret", "evil", "forged", "Bearer"] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
}
