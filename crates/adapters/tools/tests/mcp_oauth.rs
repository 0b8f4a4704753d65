//! A hostile token endpoint on 127.0.0.1 for an MCP server with an OAuth grant: an
//! error status (with a description naming the secret), a body that is not JSON, a
//! huge body, tokens that have already expired, a token that is not a bearer token,
//! and an endpoint that never answers. Each fails the server's start with an error
//! naming the server and why, holding neither the token nor the secret, and in time.

mod mcp_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentplane_core::ThreadId;
use agentplane_tools::{ClientAuth, McpServers, McpTransport, OAuthClient};
use mcp_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "client-s3cret-Zq81";
const TOKEN: &str = "leaked-token-Hy62";

/// A token endpoint answering every request with `status` and `body` (or nothing, when
/// `body` is `None`); its URL.
async fn endpoint(status: u16, body: Option<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/token", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let Some(body) = body else {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return;
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            });
        }
    });
    url
}

async fn open_error(token_url: String, startup: Duration) -> (String, Duration) {
    let mut spec = spec(
        "up",
        McpTransport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: BTreeMap::new(),
            oauth: Some(OAuthClient {
                token_url,
                client_id: "agentplane".into(),
                client_secret: SECRET.into(),
                scopes: vec![],
                resource: None,
                audience: None,
                client_auth: ClientAuth::Post,
            }),
        },
    );
    spec.startup_timeout = startup;
    let servers = McpServers::new(vec![spec]);
    let ensemble = servers
        .ensemble("up", &ThreadId::new())
        .expect("configured");
    let started = Instant::now();
    let err = ensemble.open().await.expect_err("no token, no server");
    (err.message, started.elapsed())
}

#[tokio::test]
async fn hostile_token_endpoints_fail_clearly_and_leak_nothing() {
    let cases = [
        (
            500,
            Some(format!(
                "{{\"error\":\"server_error\",\"error_description\":\"{SECRET} {TOKEN}\"}}"
            )),
            "HTTP 500 (`server_error`)",
        ),
        (
            401,
            Some(format!("{{\"error\":\"{TOKEN}\\\"x\"}}")),
            "HTTP 401 (no error code)",
        ),
        (
            200,
            Some(format!("<html>{TOKEN}</html>")),
            "not a token response",
        ),
        (
            200,
            Some(format!(
                "{{\"access_token\":\"{TOKEN}\",\"pad\":\"{}\"}}",
                "x".repeat(1 << 20)
            )),
            "over 16 KiB",
        ),
        (
            200,
            Some(format!(
                "{{\"access_token\":\"{TOKEN}\",\"token_type\":\"Bearer\",\"expires_in\":0}}"
            )),
            "already expired (expires_in 0)",
        ),
        (
            200,
            Some(format!(
                "{{\"access_token\":\"{TOKEN}\",\"token_type\":\"bearer\",\"expires_in\":-30}}"
            )),
            "already expired (expires_in -30)",
        ),
        (
            200,
            Some(format!(
                "{{\"access_token\":\"{TOKEN}\",\"token_type\":\"DPoP\",\"expires_in\":60}}"
            )),
            "token_type `DPoP`",
        ),
        (
            200,
            Some(format!(
                "{{\"access_token\":\"{TOKEN} two\",\"expires_in\":60}}"
            )),
            "not a bearer token's characters",
        ),
    ];
    for (status, body, expected) in cases {
        let (err, took) = open_error(endpoint(status, body).await, Duration::from_secs(20)).await;
        eprintln!("{status}: {err}");
        assert!(
            err.contains("MCP server `up`") && err.contains(expected),
            "{expected}: {err}"
        );
        assert!(
            !err.contains(TOKEN) && !err.contains(SECRET),
            "leaks: {err}"
        );
        assert!(!err.contains("Io error"), "{err}");
        assert!(took < Duration::from_secs(5), "{expected}: took {took:?}");
    }
    // An endpoint that never answers: the startup timeout ends the wait.
    let (err, took) = open_error(endpoint(200, None).await, Duration::from_secs(2)).await;
    assert!(err.contains("startup timeout"), "{err}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
}
