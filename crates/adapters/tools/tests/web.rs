//! The `web` ensemble against a real HTTP server on 127.0.0.1 (raw HTTP/1.1 over a
//! tokio `TcpListener`): network gating, address screening, redirects, caps.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentplane_core::{NetworkAccess, ToolErrorKind};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use agentplane_tools::{WebEnsemble, WebLimits};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the test server does for a request path.
enum Reply {
    Bytes(Vec<u8>),
    /// Accept and never answer.
    Hang,
}

fn http(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    Reply::Bytes(bytes)
}

struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A server whose routes know its port (for absolute redirects).
async fn serve(routes: impl Fn(u16, &str) -> Reply + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let routes = Arc::new(routes);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                match routes(port, &path) {
                    Reply::Bytes(bytes) => {
                        let _ = socket.write_all(&bytes).await;
                        let _ = socket.shutdown().await;
                    }
                    Reply::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
                }
            });
        }
    });
    Server { port, hits }
}

/// The routes most tests use.
async fn site() -> Server {
    serve(|port, path| match path {
        "/hello" => http(
            "200 OK",
            &[("Content-Type", "text/plain; charset=utf-8")],
            b"hello, agent",
        ),
        "/json" => http(
            "200 OK",
            &[("Content-Type", "application/json")],
            br#"{"ok":true}"#,
        ),
        "/png" => http(
            "200 OK",
            &[("Content-Type", "image/png")],
            b"\x89PNG\r\n\x1a\n0123456789",
        ),
        "/big" => http(
            "200 OK",
            &[("Content-Type", "text/plain")],
            &vec![b'a'; 200_000],
        ),
        "/missing" => http(
            "404 Not Found",
            &[("Content-Type", "text/plain")],
            b"no such page",
        ),
        "/hang" => Reply::Hang,
        "/hop1" => http("302 Found", &[("Location", "/hop2")], b""),
        "/hop2" => {
            let to = format!("http://127.0.0.1:{port}/hello");
            http("301 Moved Permanently", &[("Location", to.as_str())], b"")
        }
        "/to-file" => http("302 Found", &[("Location", "file:///etc/passwd")], b""),
        "/to-creds" => {
            let to = format!("http://user:pw@127.0.0.1:{port}/hello");
            http("307 Temporary Redirect", &[("Location", to.as_str())], b"")
        }
        "/loop" => http("302 Found", &[("Location", "/loop")], b""),
        _ => http("500 Internal Server Error", &[], b"unexpected path"),
    })
    .await
}

fn web(allowed: bool, allow_private: bool, limits: WebLimits) -> WebEnsemble {
    WebEnsemble::new(
        NetworkAccess {
            allowed,
            allow_private,
        },
        limits,
    )
}

fn private_ok() -> WebEnsemble {
    web(true, true, WebLimits::default())
}

fn ctx() -> ToolContext {
    ToolContext {
        workspace: std::env::temp_dir(),
        timeout: Duration::from_secs(10),
        output_cap: 64 * 1024,
        scope: None,
    }
}

async fn fetch(ensemble: &WebEnsemble, url: &str) -> Result<ToolOutput, ToolError> {
    ensemble
        .call("fetch_url", json!({"url": url}), &ctx())
        .await
}

fn assert_denied(result: Result<ToolOutput, ToolError>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind, ToolErrorKind::NotAllowed, "{what}: {err:?}");
    assert_eq!(
        err.security.as_ref().expect(what).event_type,
        "network_denied",
        "{what}"
    );
}

#[test]
fn the_tool_is_read_only() {
    let tools = private_ok().tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "fetch_url");
    assert!(tools[0].side_effects, "a request leaves the machine");
}

#[tokio::test]
async fn everything_is_refused_when_the_network_is_off() {
    let server = site().await;
    assert_denied(
        fetch(
            &web(false, true, WebLimits::default()),
            &server.url("/hello"),
        )
        .await,
        "network off",
    );
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn loopback_and_private_targets_are_refused_by_default() {
    let server = site().await;
    let ensemble = web(true, false, WebLimits::default());
    let port = server.port;
    for url in [
        server.url("/hello"),
        format!("http://localhost:{port}/hello"),
        format!("http://[::1]:{port}/hello"),
        format!("http://[::ffff:127.0.0.1]:{port}/hello"),
        format!("http://0.0.0.0:{port}/hello"),
        format!("http://2130706433:{port}/hello"),
        format!("http://0x7f.1:{port}/hello"),
        "http://10.0.0.1/".to_string(),
        "http://192.168.0.1/".to_string(),
        "http://100.64.0.1/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fd00::1]/".to_string(),
        "http://[fe80::1]/".to_string(),
    ] {
        assert_denied(fetch(&ensemble, &url).await, &url);
    }
    assert_eq!(server.hits(), 0, "no connection may be made");
}

#[tokio::test]
async fn loopback_is_reachable_when_private_networks_are_allowed() {
    let server = site().await;
    let out = fetch(&private_ok(), &server.url("/hello")).await.unwrap();
    assert_eq!(
        out.content,
        format!(
            "HTTP 200 OK\nurl: {}\ncontent-type: text/plain; charset=utf-8\n\nhello, agent",
            server.url("/hello")
        )
    );
    assert!(!out.truncated);

    let by_name = fetch(
        &private_ok(),
        &format!("http://localhost:{}/json", server.port),
    )
    .await
    .unwrap();
    assert!(
        by_name.content.ends_with("\n\n{\"ok\":true}"),
        "{}",
        by_name.content
    );
}

#[tokio::test]
async fn error_statuses_are_results() {
    let server = site().await;
    let out = fetch(&private_ok(), &server.url("/missing")).await.unwrap();
    assert!(
        out.content.starts_with("HTTP 404 Not Found\n"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("no such page"));
}

#[tokio::test]
async fn only_http_and_https_schemes_are_fetched() {
    for url in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/x",
        "gopher://127.0.0.1:70/",
        "data:text/plain,hello",
        "javascript:alert(1)",
    ] {
        assert_denied(fetch(&private_ok(), url).await, url);
    }
    let err = fetch(&private_ok(), "not a url").await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
}

#[tokio::test]
async fn credentials_in_the_url_are_refused_without_echoing_them() {
    let server = site().await;
    let url = format!("http://admin:s3cret@127.0.0.1:{}/hello", server.port);
    let err = fetch(&private_ok(), &url).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::NotAllowed);
    assert!(!err.message.contains("s3cret"));
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn redirects_are_followed_and_each_hop_is_checked() {
    let server = site().await;
    let out = fetch(&private_ok(), &server.url("/hop1")).await.unwrap();
    assert!(
        out.content
            .starts_with(&format!("HTTP 200 OK\nurl: {}\n", server.url("/hello"))),
        "{}",
        out.content
    );
    assert_eq!(server.hits(), 3);

    assert_denied(
        fetch(&private_ok(), &server.url("/to-file")).await,
        "to file://",
    );
    let err = fetch(&private_ok(), &server.url("/to-creds"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::NotAllowed);
    assert!(!err.message.contains("pw@"));
}

#[tokio::test]
async fn redirect_loops_stop_after_five_hops() {
    let server = site().await;
    let err = fetch(&private_ok(), &server.url("/loop"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(
        err.message.contains("more than 5 redirects"),
        "{}",
        err.message
    );
    assert_eq!(server.hits(), 6);
}

#[tokio::test]
async fn the_body_is_cut_at_max_bytes() {
    let server = site().await;
    let limits = WebLimits {
        max_bytes: 1000,
        timeout: Duration::from_secs(10),
    };
    let out = fetch(&web(true, true, limits), &server.url("/big"))
        .await
        .unwrap();
    assert!(out.truncated);
    let body = out.content.split("\n\n").nth(1).unwrap();
    assert!(body.starts_with(&"a".repeat(1000)));
    assert!(!body.starts_with(&"a".repeat(1001)));
    assert!(
        out.content
            .ends_with("[truncated: body is more than 1000 bytes, first 1000 shown]"),
        "{}",
        &out.content[out.content.len() - 80..]
    );
}

#[tokio::test]
async fn the_body_is_also_cut_at_the_output_cap() {
    let server = site().await;
    let small = ToolContext {
        output_cap: 300,
        scope: None,
        ..ctx()
    };
    let out = private_ok()
        .call("fetch_url", json!({"url": server.url("/big")}), &small)
        .await
        .unwrap();
    assert!(out.truncated);
    assert!(out.content.contains("first 300 shown"), "{}", out.content);
}

#[tokio::test]
async fn non_text_bodies_are_described_not_returned() {
    let server = site().await;
    let out = fetch(&private_ok(), &server.url("/png")).await.unwrap();
    assert!(out.content.contains("content-type: image/png\n"));
    assert!(
        out.content
            .ends_with("[body not shown: not text, 18 bytes]"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("PNG"));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = site().await;
    let limits = WebLimits {
        max_bytes: 1000,
        timeout: Duration::from_millis(300),
    };
    let started = std::time::Instant::now();
    let err = fetch(&web(true, true, limits), &server.url("/hang"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_refused_connection_is_a_plain_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = fetch(&private_ok(), &format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.security.is_none());
}
