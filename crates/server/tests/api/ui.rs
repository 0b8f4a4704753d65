//! The embedded web UI over real HTTP: `/` serves the page without a token and with a
//! strict CSP, the assets it links are served with their types and revalidate by ETag,
//! and every other name under `/assets/` — hostile paths sent byte for byte included —
//! is a 404 in the envelope that serves nothing from the disk. The UI itself is tested
//! end to end in a browser by `scripts/web-e2e.sh`.

use reqwest::header;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Setup, TOKEN, assert_error_envelope};

/// Sends `GET <path>` exactly as written (no client-side normalization of `..` or
/// percent escapes) and returns the status and the body.
async fn raw_get(base: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request written");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("answer read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn the_page_needs_no_token_and_carries_a_strict_csp() {
    let api = Setup::new(vec![]).token(TOKEN).start().await;
    // No token, no client id: the page holds no data.
    let page = api.http.get(api.url("/")).send().await.expect("GET /");
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("ascii");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    assert!(headers.contains_key(header::ETAG));
    let html = page.text().await.expect("body");
    assert!(html.contains("/assets/app.js") && html.contains("/assets/app.css"));
    // The API behind it still needs the token.
    let api_call = api
        .http
        .get(api.url("/v1/threads"))
        .header("X-Client-ID", "alice")
        .send()
        .await
        .expect("GET /v1/threads");
    assert_eq!(api_call.status(), 401);
}

#[tokio::test]
async fn assets_have_their_types_and_revalidate_by_etag() {
    let api = Setup::new(vec![]).start().await;
    for (name, content_type) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("app.css", "text/css; charset=utf-8"),
        ("icon.svg", "image/svg+xml"),
    ] {
        let path = format!("/assets/{name}");
        let first = api.http.get(api.url(&path)).send().await.expect("asset");
        assert_eq!(first.status(), 200, "{path}");
        assert_eq!(
            first.headers()[header::CONTENT_TYPE],
            content_type,
            "{path}"
        );
        assert!(
            first
                .headers()
                .contains_key(header::CONTENT_SECURITY_POLICY)
        );
        let etag = first.headers()[header::ETAG].clone();
        assert!(!first.bytes().await.expect("body").is_empty(), "{path}");
        let again = api
            .http
            .get(api.url(&path))
            .header(header::IF_NONE_MATCH, etag.clone())
            .send()
            .await
            .expect("revalidation");
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.headers()[header::ETAG], etag);
        assert!(again.bytes().await.expect("body").is_empty());
        // A stale validator gets the bytes again.
        let stale = api
            .http
            .get(api.url(&path))
            .header(header::IF_NONE_MATCH, "\"0000\"")
            .send()
            .await
            .expect("stale revalidation");
        assert_eq!(stale.status(), 200, "{path}");
    }
}

#[tokio::test]
async fn unknown_and_hostile_asset_paths_are_404_in_the_envelope() {
    let api = Setup::new(vec![]).start().await;
    for path in [
        "/assets/missing.js",
        "/assets/",
        "/assets/APP.JS",
        "/assets/app.js/",
        "/assets/app.js%00",
        "/assets/../Cargo.toml",
        "/assets/../../../../etc/passwd",
        "/assets/..%2f..%2f..%2fCargo.toml",
        "/assets/%2e%2e/%2e%2e/Cargo.toml",
        "/assets//etc/passwd",
        "/assets/app.js/../../index.html",
        "/assets/..\\..\\Cargo.toml",
        "/assets/%c0%ae%c0%ae/Cargo.toml",
        "/assets/index.html",
    ] {
        let (status, body) = raw_get(&api.base, path).await;
        assert!(status == 404 || status == 400, "{path}: {status} {body}");
        let envelope: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path}: not the envelope ({e}): {body}"));
        assert_error_envelope(&envelope);
        assert!(
            !body.contains("[workspace]") && !body.contains("root:"),
            "{path}"
        );
    }
    // The page is only served at `/`, and only to GET (and HEAD).
    let post = api.http.post(api.url("/")).send().await.expect("POST /");
    assert_eq!(post.status(), 405);
    let head = api.http.head(api.url("/")).send().await.expect("HEAD /");
    assert_eq!(head.status(), 200);
}
