//! Hostile and broken requests: every answer is the envelope with a 4xx, never a 500.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::harness::{Api, Setup, assert_error_envelope};

/// Sends raw, asserts the envelope with `status` and returns the code.
async fn expect(api: &Api, request: reqwest::RequestBuilder, status: u16, what: &str) -> String {
    let answer = api.send(request).await;
    assert_eq!(answer.status.as_u16(), status, "{what}: {:?}", answer.body);
    assert_error_envelope(&answer.body);
    answer.body["error"]["code"]
        .as_str()
        .expect("code")
        .to_owned()
}

#[tokio::test]
async fn broken_bodies_are_400_413_or_415_in_the_envelope() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    let cwd = api.workspace.display().to_string();
    let json_post = |path: &str, body: String| {
        api.request(Method::POST, path, Some("alice"))
            .header("content-type", "application/json")
            .body(body)
    };
    let turns = format!("/v1/threads/{thread}/turns");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "/v1/threads",
            "{\"agent\": \"chat\",".into(),
            "truncated JSON",
        ),
        ("/v1/threads", "not json".into(), "not JSON"),
        ("/v1/threads", "[]".into(), "an array"),
        ("/v1/threads", "null".into(), "null"),
        ("/v1/threads", "".into(), "empty"),
        (
            "/v1/threads",
            json!({"agent": 5, "cwd": cwd}).to_string(),
            "wrong type",
        ),
        (
            "/v1/threads",
            json!({"cwd": cwd}).to_string(),
            "missing agent",
        ),
        (
            "/v1/threads",
            json!({"agent": "chat", "cwd": cwd, "titel": "typo"}).to_string(),
            "unknown field",
        ),
        (
            "/v1/threads",
            json!({"agent": "chat", "cwd": cwd, "title": ["x"]}).to_string(),
            "title list",
        ),
        (
            "/v1/threads",
            "{\"agent\":\"chat\",\"cwd\":\"\\ud800\"}".into(),
            "lone surrogate",
        ),
        (
            turns.as_str(),
            json!({"input": 42}).to_string(),
            "numeric input",
        ),
        (
            turns.as_str(),
            json!({"input": null}).to_string(),
            "null input",
        ),
        (turns.as_str(), json!({}).to_string(), "no input"),
        (
            turns.as_str(),
            json!({"input": "x", "stream": false}).to_string(),
            "extra field",
        ),
    ];
    for (path, body, what) in cases {
        let code = expect(&api, json_post(path, body), 400, what).await;
        assert_eq!(code, "INVALID_ARGUMENT", "{what}");
    }

    // Not JSON at all: a type any web page may send without a preflight is refused
    // by the ingress guard before the route (`ingress.rs`); another is 415.
    let code = expect(
        &api,
        api.request(Method::POST, "/v1/threads", Some("alice"))
            .header("content-type", "text/plain")
            .body(json!({"agent": "chat", "cwd": cwd}).to_string()),
        403,
        "text/plain",
    )
    .await;
    assert_eq!(code, "FORBIDDEN");
    let code = expect(
        &api,
        api.request(Method::POST, "/v1/threads", Some("alice"))
            .header("content-type", "application/xml")
            .body(json!({"agent": "chat", "cwd": cwd}).to_string()),
        415,
        "application/xml",
    )
    .await;
    assert_eq!(code, "INVALID_ARGUMENT");
    expect(
        &api,
        api.request(Method::POST, "/v1/threads", Some("alice"))
            .body(json!({"agent": "chat", "cwd": cwd}).to_string()),
        415,
        "no content type",
    )
    .await;

    // Bigger than the limit, declared or streamed.
    let huge = json!({"input": "x".repeat(2 * 1024 * 1024)}).to_string();
    let code = expect(&api, json_post(&turns, huge.clone()), 413, "2 MiB body").await;
    assert_eq!(code, "INVALID_ARGUMENT");
    let chunks = futures_util::stream::iter(
        huge.into_bytes()
            .chunks(64 * 1024)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    expect(
        &api,
        api.request(Method::POST, "/v1/threads", Some("alice"))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(chunks)),
        413,
        "2 MiB chunked body",
    )
    .await;

    // Nothing was created by any of it.
    let listed = api.get("/v1/threads", "alice").await;
    assert_eq!(listed.body["threads"].as_array().map(Vec::len), Some(1));
    assert!(api.scripted.requests().is_empty());
}

#[tokio::test]
async fn odd_ids_are_404_not_500() {
    let api = Setup::new(vec![]).start().await;
    let real = api.create_thread("alice", "chat").await;
    let ids = [
        "..",
        "..%2F..%2Fetc%2Fpasswd",
        "thr_..%2F..%2Fetc",
        "thr_",
        "thr_%00",
        "thr_%ff%fe",
        "thr_' OR 1=1 --",
        "%2e%2e",
        &format!("{real}x%2Fy"),
        &"thr_a".repeat(100),
        &real.replace("thr_", "turn_"),
        &real.to_uppercase(),
        "turn_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
    ];
    for id in ids {
        for (method, suffix) in [
            (Method::GET, ""),
            (Method::DELETE, ""),
            (Method::GET, "/history"),
            (Method::GET, "/events"),
            (Method::POST, "/compact"),
        ] {
            let path = format!("/v1/threads/{id}{suffix}");
            let answer = api
                .send(api.request(method.clone(), &path, Some("alice")))
                .await;
            assert_eq!(
                answer.status,
                StatusCode::NOT_FOUND,
                "{method} {path}: {:?}",
                answer.body
            );
            assert_error_envelope(&answer.body);
        }
        let path = format!("/v1/turns/{id}/cancel");
        let answer = api
            .send(api.request(Method::POST, &path, Some("alice")))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::NOT_FOUND,
            "{path}: {:?}",
            answer.body
        );
    }
    // The real thread is untouched.
    assert_eq!(
        api.get(&format!("/v1/threads/{real}"), "alice")
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn bad_queries_and_positions_are_400() {
    let api = Setup::new(vec![]).start().await;
    let thread = api.create_thread("alice", "chat").await;
    let t = format!("/v1/threads/{thread}");
    for query in [
        "/history?includeEvents=yes",
        "/history?includeEvents=2",
        "/history?includeInternal=",
        "/history?includeEvents=1&includeEvents=0",
        "/history?include_events=1",
        "/events?after=-1",
        "/events?after=abc",
        "/events?after=1.5",
        "/events?after=99999999999999999999999",
        "/events?from=3",
        "/events?after=9223372036854775808",
    ] {
        let answer = api.get(&format!("{t}{query}"), "alice").await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
    for (query, header) in [
        ("", "abc"),
        ("", "-1"),
        ("", ""),
        ("", "1 2"),
        ("", "9223372036854775808"),
        ("?after=-1", "0"),
    ] {
        let answer = api
            .send(
                api.request(Method::GET, &format!("{t}/events{query}"), Some("alice"))
                    .header("Last-Event-ID", header),
            )
            .await;
        answer.assert_error(400, "INVALID_ARGUMENT");
    }
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405_in_the_envelope() {
    let api = Setup::new(vec![]).start().await;
    for (method, path) in [
        // `/` is the web UI (tests/api/ui.rs); nothing else at the root is served.
        (Method::GET, "/index.html"),
        (Method::GET, "/v1"),
        (Method::GET, "/v1/nothing"),
        (Method::GET, "/v2/threads"),
        (Method::GET, "/v1/threads/a/b/c/d"),
        (Method::GET, "/../../etc/passwd"),
        (Method::GET, "/v1/permissions"),
    ] {
        let answer = api
            .send(api.request(method.clone(), path, Some("alice")))
            .await;
        answer.assert_error(404, "NOT_FOUND");
    }
    for (method, path, allowed) in [
        (Method::PUT, "/v1/threads", "GET,HEAD,POST"),
        (Method::POST, "/healthz", "GET,HEAD"),
        (Method::DELETE, "/v1/agents", "GET,HEAD"),
        (Method::GET, "/v1/threads/thr_x/turns", "POST"),
        (Method::PATCH, "/v1/permissions/perm_x", "POST"),
        (Method::GET, "/v1/turns/turn_x/cancel", "POST"),
    ] {
        let answer = api
            .send(api.request(method.clone(), path, Some("alice")))
            .await;
        answer.assert_error(405, "INVALID_ARGUMENT");
        let allow = answer
            .headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .replace(' ', "");
        let mut allow: Vec<&str> = allow.split(',').collect();
        allow.sort_unstable();
        assert_eq!(allow.join(","), allowed, "{method} {path}");
    }
}
