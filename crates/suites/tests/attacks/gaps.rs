//! The smaller gaps an outside attack found (issue 30, part 7), each now refused
//! through the real binary: tool calls refused without a `security_event`, one address
//! taking every event-stream place by rotating `X-Client-ID`, a declared body far over
//! the limit left waiting for the body timeout, a body validated before the caller's
//! roles were checked, and `/mcp` answering pages of foreign origins.

use std::time::{Duration, Instant};

use agentplane_suites::attacks::{Tally, assert_envelope, probe, script};
use agentplane_suites::mcp::{mcp_request, mcp_session};
use agentplane_suites::{CLIENT, EVENT_BUDGET, create_thread, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};

use crate::identity::{call, cli_key, refused, send};

/// A policy that denies `write_file` to the `prober` agent.
const DENY_WRITES: &str = "name: no-writes\ntype: tool_access\n\
    targets: {agents: [prober]}\nrules: {deny: [write_file]}\n";

/// A model that answers every request with a short text.
async fn chatty_model() -> ScriptedServer {
    ScriptedServer::start(Scenario::new(vec![Step::text("hi")]).repeating(true))
        .await
        .expect("model")
}

/// Every tool call the gate refuses is a `security_event` as well as a tool error: a
/// tool that was not offered (made up, another agent's, an MCP tool of no configured
/// server) and a `tool_access` denial. Before: a tool error only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tool_calls_are_security_events() {
    let cases = [
        ("made-up tool", "launch_rockets", json!({})),
        (
            "another agent's tool",
            "run_command",
            json!({"program": "ls", "args": []}),
        ),
        (
            "an MCP tool of no configured server",
            "mcp__github__delete_repo",
            json!({"repo": "x"}),
        ),
        (
            "denied by tool_access",
            "write_file",
            json!({"path": "a.txt", "content": "x"}),
        ),
    ];
    let calls: Vec<(String, Value)> = cases
        .iter()
        .map(|(_, tool, args)| ((*tool).to_owned(), args.clone()))
        .collect();
    let model = ScriptedServer::start(Scenario::new(script(&calls)))
        .await
        .expect("model");
    let sb = sandbox(
        "[agents.prober]\nsystem_prompt = \"You probe.\"\nensembles = [\"fs\"]\n\
         [policies]\ndir = \"policies\"\n",
    );
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies/deny.yaml"), DENY_WRITES).expect("policy");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "prober", "refusals").await;
    let mut tally = Tally::default();
    for (name, tool, _) in &cases {
        let probe = probe(&served, &thread, name).await;
        if *tool == "write_file" {
            probe.assert_refused_as("policy_denied", "policy_denied");
            assert!(
                probe.events.iter().any(|e| e["kind"] == "policy_denied"),
                "{name}: no policy_denied event"
            );
        } else {
            probe.assert_refused_as("unknown_tool", "unknown_tool");
            // The answer names the tools the model is offered, never one a policy
            // hides by denying it outright. Before: "the tools are: …, write_file".
            let answer = probe.result.to_string();
            assert!(answer.contains("read_file"), "{name}: {answer}");
            assert!(!answer.contains("write_file"), "{name}: {answer}");
        }
        assert_eq!(probe.security.len(), 1, "{name}: {:?}", probe.security);
        assert_eq!(probe.security[0]["tool"], *tool, "{name}");
        tally.case(true);
    }
    assert!(!sb.workspace.join("a.txt").exists(), "the denied write ran");
    tally.report("gaps-refusals");
}

/// One address may hold at most `max_sse_followers_per_address` event streams, whatever
/// client ids it names, and every loopback address counts as one. Before: each new
/// `X-Client-ID` had 32 places of its own, so one caller could take all 1,024.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_event_stream_by_rotating_client_ids() {
    const PER_ADDRESS: usize = 4;
    let model = chatty_model().await;
    let sb = sandbox(&format!(
        "[server]\nmax_sse_followers_per_address = {PER_ADDRESS}\n"
    ));
    let served = start(&sb, &model.base_url(), &[]).await;
    let http = reqwest::Client::new();
    // Each client follows a thread of its own (another's is NOT_FOUND).
    let mut threads = Vec::new();
    for i in 0..=PER_ADDRESS + 1 {
        let client = format!("rotating-{i}");
        let (status, text) = send(
            call(&served, Method::POST, "/v1/threads", None, Some(&client))
                .json(&json!({"agent": "chat", "cwd": sb.workspace})),
        )
        .await;
        assert_eq!(status, 201, "{text}");
        let thread: Value = serde_json::from_str(&text).expect("json");
        threads.push((client, thread["id"].as_str().expect("id").to_owned()));
    }
    let follow = |http: &reqwest::Client, (client, thread): &(String, String)| {
        http.get(format!("{}/v1/threads/{thread}/events", served.base))
            .header("X-Client-ID", client.as_str())
            .send()
    };
    let mut open = Vec::new();
    for pair in &threads[..PER_ADDRESS] {
        let response = follow(&http, pair).await.expect("follow");
        assert_eq!(response.status(), 200, "under the cap");
        open.push(response);
    }
    let mut tally = Tally::default();
    let from_other_loopback = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("client");
    for (what, http, pair) in [
        ("a fresh client id", &http, &threads[PER_ADDRESS]),
        (
            "another fresh client id from 127.0.0.2",
            &from_other_loopback,
            &threads[PER_ADDRESS + 1],
        ),
    ] {
        let response = follow(http, pair).await.expect("follow");
        let status = response.status().as_u16();
        assert!(response.headers().get("retry-after").is_some(), "{what}");
        let text = response.text().await.unwrap_or_default();
        refused(&mut tally, status, &text, 429, "RATE_LIMITED", what);
        assert!(
            text.contains("max_sse_followers_per_address"),
            "{what}: {text}"
        );
    }
    drop(open);
    tally.report("gaps-followers");
}

/// A request declaring a body far over the limit is refused at once, before anything
/// reads it, on every route that takes a body. Before: the server waited for the body
/// until its timeout (60 s), the client holding the request open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_body_over_the_limit_is_refused_at_once() {
    let model = chatty_model().await;
    let sb = sandbox("");
    let served = start(&sb, &model.base_url(), &[]).await;
    let thread = create_thread(&served, &sb, "chat", "declared").await;
    let mut tally = Tally::default();
    for path in [
        "/v1/threads".to_owned(),
        format!("/v1/threads/{thread}/turns"),
        "/v1/executions".to_owned(),
        "/v1/permissions/perm_nope".to_owned(),
        "/openai/v1/chat/completions".to_owned(),
        "/mcp".to_owned(),
    ] {
        let started = Instant::now();
        let answer = declare_and_wait(&served.base, &path, 99_999_999_999).await;
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{path}: no answer within {EVENT_BUDGET:?}: {answer:?}"));
        assert!(head.starts_with("HTTP/1.1 413"), "{path}: {head}");
        assert_envelope(body, "INVALID_ARGUMENT");
        println!("gaps declared {path}: 413 after {:?}", started.elapsed());
        tally.case(true);
    }
    // Nothing was stored.
    let stored = agentplane_suites::history(&served, &thread).await;
    assert_eq!(
        stored["turns"].as_array().map(Vec::len),
        Some(0),
        "{stored}"
    );
    tally.report("gaps-declared-length");
}

/// Sends a request head declaring `length` bytes and a few of them, then reads what
/// comes back until the server's answer is complete or the event budget (shorter than
/// the server's 60 s body timeout) runs out.
async fn declare_and_wait(base: &str, path: &str, length: u64) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nX-Client-ID: {CLIENT}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {length}\r\n\r\n{{\"input\":\""
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + EVENT_BUDGET;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if text.contains("\r\n\r\n") && text.ends_with("}}") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// A caller whose roles may not do a thing gets `403` whatever its body or query:
/// malformed JSON, wrong types, the wrong content type, a bad query; over MCP, a
/// `FORBIDDEN` tool result whatever it names. Before: `400` (or invalid params)
/// describing the input, which was read and validated before the role check, so a
/// caller could probe every route's input rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_comes_before_validation() {
    let model = chatty_model().await;
    let sb = sandbox("");
    let viewer = cli_key(&sb, "alice", &["viewer"]);
    let operator = cli_key(&sb, "alice", &["operator"]);
    let approver = cli_key(&sb, "alice", &["approver"]);
    let served = start(&sb, &model.base_url(), &[]).await;
    let (status, text) = send(
        call(&served, Method::POST, "/v1/threads", Some(&operator), None)
            .json(&json!({"agent": "chat", "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let thread: Value = serde_json::from_str(&text).expect("json");
    let thread = thread["id"].as_str().expect("id").to_owned();
    let turns = format!("/v1/threads/{thread}/turns");

    // (what, key, path, content type, body)
    let json_type = "application/json";
    let cases: Vec<(&str, &str, String, &str, &str)> = vec![
        (
            "viewer, thread, broken JSON",
            &viewer,
            "/v1/threads".into(),
            json_type,
            "{",
        ),
        (
            "viewer, thread, wrong types",
            &viewer,
            "/v1/threads".into(),
            json_type,
            r#"{"agent": 5, "cwd": []}"#,
        ),
        (
            // Not `text/plain`: the ingress guard refuses that before any route
            // (`suites/tests/ingress.rs`), so it would not test the role check.
            "viewer, thread, not JSON",
            &viewer,
            "/v1/threads".into(),
            "application/xml",
            "<agent>chat</agent>",
        ),
        (
            "viewer, turn, broken JSON",
            &viewer,
            turns.clone(),
            json_type,
            "{\"input\":",
        ),
        (
            "viewer, turn, empty body",
            &viewer,
            turns.clone(),
            json_type,
            "",
        ),
        (
            "viewer, execution, an array",
            &viewer,
            "/v1/executions".into(),
            json_type,
            "[]",
        ),
        (
            "viewer, permission, broken JSON",
            &viewer,
            "/v1/permissions/perm_nope".into(),
            json_type,
            "{",
        ),
        (
            "viewer, approval, broken JSON",
            &viewer,
            "/v1/approvals/apr_nope".into(),
            json_type,
            "{",
        ),
        (
            "viewer, gateway, wrong types",
            &viewer,
            "/openai/v1/chat/completions".into(),
            json_type,
            r#"{"messages": "x"}"#,
        ),
        (
            "operator, key, broken JSON",
            &operator,
            "/v1/keys".into(),
            json_type,
            "{",
        ),
        (
            "operator, version, an array",
            &operator,
            "/v1/agents/chat/versions".into(),
            json_type,
            "[\"1.2.0\"]",
        ),
        (
            "operator, traffic, broken JSON",
            &operator,
            "/v1/agents/chat/traffic".into(),
            json_type,
            "{",
        ),
    ];
    let mut tally = Tally::default();
    for (what, key, path, content_type, body) in &cases {
        let method = if path.ends_with("/traffic") {
            Method::PUT
        } else {
            Method::POST
        };
        let (status, text) = send(
            call(&served, method, path, Some(key), None)
                .header("Content-Type", *content_type)
                .body(body.to_string()),
        )
        .await;
        refused(&mut tally, status, &text, 403, "FORBIDDEN", what);
        assert!(text.contains("role"), "{what}: names the role: {text}");
    }
    // Query strings too: an approver may not read threads, a viewer may not list
    // approvals, whatever their queries say.
    for (what, key, path) in [
        (
            "approver, threads, bad limit",
            &approver,
            "/v1/threads?limit=abc".to_owned(),
        ),
        (
            "approver, history, unknown flag",
            &approver,
            format!("/v1/threads/{thread}/history?includeEvents=maybe"),
        ),
        (
            "approver, events, negative position",
            &approver,
            format!("/v1/threads/{thread}/events?after=-1"),
        ),
        (
            "approver, costs, unknown grouping",
            &approver,
            "/v1/costs?group_by=nope".to_owned(),
        ),
        (
            "approver, executions, unknown field",
            &approver,
            "/v1/executions?sudo=1".to_owned(),
        ),
        (
            "viewer, approvals, unknown status",
            &viewer,
            "/v1/approvals?status=bogus".to_owned(),
        ),
    ] {
        let (status, text) = send(call(&served, Method::GET, &path, Some(key), None)).await;
        refused(&mut tally, status, &text, 403, "FORBIDDEN", what);
    }

    // The same over MCP: a viewer's `tools/call` is refused as FORBIDDEN whatever it
    // names or sends (before: invalid-params errors describing its arguments).
    let session = mcp_session(&served, &viewer).await;
    for (id, (what, params)) in [
        ("MCP, viewer, no arguments", json!({"name": "chat"})),
        (
            "MCP, viewer, unknown fields",
            json!({"name": "chat", "arguments": {"task": 5, "sudo": true}}),
        ),
        (
            "MCP, viewer, unknown tool",
            json!({"name": "nope", "arguments": {"task": "x"}}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = mcp_request(&served, &viewer, &session, id + 10, "tools/call", params).await;
        let result = &answer["result"];
        assert_eq!(result["isError"], true, "{what}: {answer}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let body: Value = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(body["code"], "FORBIDDEN", "{what}: {answer}");
        tally.case(true);
    }

    // Callers who may do the thing still get their body's errors.
    let (status, text) = send(
        call(&served, Method::POST, &turns, Some(&operator), None)
            .header("Content-Type", json_type)
            .body("{"),
    )
    .await;
    assert_eq!(status, 400, "an operator's broken turn body: {text}");
    assert_envelope(&text, "INVALID_ARGUMENT");
    let (status, text) = send(call(
        &served,
        Method::GET,
        &format!("/v1/threads/{thread}/history"),
        Some(&operator),
        None,
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    let stored: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        stored["turns"].as_array().map(Vec::len),
        Some(0),
        "{stored}"
    );
    tally.report("gaps-authorization-order");
}

/// `/mcp` validates `Origin` (the MCP transport requires it): absent or loopback is
/// allowed, a configured origin is allowed exactly, `null` and foreign origins are
/// `403` in the envelope and a `security_event` line. Before: `200` to all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_refuses_pages_of_foreign_origins() {
    let model = chatty_model().await;
    let sb = sandbox("[server]\nallowed_origins = [\"https://app.example.com\"]\n");
    let served = start(&sb, &model.base_url(), &[]).await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "gaps", "version": "1"}}
    });
    let post = |origin: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", served.base))
            .header("X-Client-ID", CLIENT)
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        send(request)
    };
    for allowed in [
        None,
        Some("http://localhost:6274"),
        Some("http://127.0.0.1:8686"),
        Some("http://[::1]:3000"),
        Some("https://app.example.com"),
    ] {
        let (status, text) = post(allowed).await;
        assert_eq!(status, 200, "{allowed:?}: {text}");
    }
    let mut tally = Tally::default();
    for foreign in [
        "null",
        "https://evil.example",
        "http://evil.example:8686",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "https://app.example.com:8443",
        "http://app.example.com",
        "https://evil.app.example.com",
        "file://",
    ] {
        let (status, text) = post(Some(foreign)).await;
        refused(&mut tally, status, &text, 403, "FORBIDDEN", foreign);
    }
    // Each refusal is one security_event line.
    let deadline = Instant::now() + EVENT_BUDGET;
    let logged = loop {
        let log = served.stderr();
        let count = log
            .lines()
            .filter(|l| l.contains("security_event") && l.contains("origin_refused"))
            .count();
        if count >= tally.refused || Instant::now() > deadline {
            break count;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(logged, tally.refused, "{}", served.stderr());
    tally.report("gaps-mcp-origin");
}
