//! `/mcp`: the agents as MCP tools over streamable HTTP, checked with an MCP client the
//! project did not write (the `mcp` PyPI package, through `testkit/peers/mcp_client.py`).

use std::process::Stdio;
use std::time::Duration;

use agentplane_testkit::{Step, peers};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Api, Setup, TOKEN};

/// The Python with the `mcp` package; set by `eval "$(scripts/test-peers.sh)"`.
/// Runs the Python client against the server's `/mcp` with these extra arguments, as
/// `client` with the token (when the server has one), and returns its JSON document.
async fn mcp_client(api: &Api, client: Option<&str>, args: &[&str]) -> Value {
    let mut command = tokio::process::Command::new(peers::python());
    command
        .arg(peers::mcp_client_script())
        .arg("--http")
        .arg(api.url("/mcp"))
        .args(["--timeout", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(client) = client {
        command
            .arg("--header")
            .arg(format!("X-Client-ID: {client}"));
    }
    if let Some(token) = api.token {
        command
            .arg("--header")
            .arg(format!("Authorization: Bearer {token}"));
    }
    command.args(args);
    let output = tokio::time::timeout(Duration::from_secs(45), command.output())
        .await
        .expect("the MCP client finishes in time")
        .expect("the MCP client runs");
    peers::client_json(&output)
}

fn workspace(api: &Api) -> String {
    api.workspace.display().to_string()
}

#[tokio::test]
async fn the_tools_are_the_agents_and_a_call_runs_a_turn_for_its_client() {
    let api = Setup::new(vec![
        Step::tool_call("list_files", json!({"path": "."})),
        Step::tool_call("finish_task", json!({"summary": "listed the files"})),
    ])
    .token(TOKEN)
    .start()
    .await;
    std::fs::write(api.workspace.join("notes.txt"), "secret-content").expect("file");
    let ws = workspace(&api);
    let out = mcp_client(
        &api,
        Some("mcp-alice"),
        &[
            "--tool",
            "engineering",
            "--task",
            "List the files\nand say what they are",
            "--workspace",
            &ws,
        ],
    )
    .await;

    // Tools: exactly the agents, each with the shared input schema.
    let names: Vec<&str> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let agents: Vec<&str> = api.runtime.agents().keys().map(String::as_str).collect();
    assert_eq!(names, agents);
    let tool = |name: &str| {
        out["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name))
            .cloned()
            .expect("tool listed")
    };
    let engineering = tool("engineering");
    assert_eq!(
        engineering["description"],
        api.runtime.agents()["engineering"].description.as_str()
    );
    assert_eq!(engineering["inputSchema"]["required"], json!(["task"]));
    assert_eq!(
        engineering["inputSchema"]["properties"]["task"]["maxLength"],
        json!(agentplane_engine::hub::MAX_INPUT_CHARS)
    );
    assert_eq!(engineering["outputSchema"]["required"], json!(["summary"]));
    assert!(tool("chat")["outputSchema"].is_null(), "{}", tool("chat"));

    // The result: finish_task's arguments, structured and as JSON text.
    assert!(out["error"].is_null(), "{out}");
    assert_eq!(out["isError"], false, "{out}");
    let result = &out["result"];
    assert_eq!(
        result["structuredContent"],
        json!({"summary": "listed the files"})
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().expect("text"))
        .expect("text is JSON");
    assert_eq!(text, json!({"summary": "listed the files"}));

    // Progress: one line per step, growing, naming tools but never their arguments.
    let messages: Vec<&str> = out["progressMessages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(out["progress"].as_u64().unwrap_or(0) >= 3, "{out}");
    assert!(messages.contains(&"calling list_files"), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.starts_with("list_files: ok in")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|m| !m.contains("notes.txt") && !m.contains("\"path\"")),
        "{messages:?}"
    );
    let values: Vec<f64> = out["progressValues"]
        .as_array()
        .expect("values")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");

    // The thread belongs to the caller's client, and only to it.
    let thread = result["_meta"]["agentplane/thread_id"]
        .as_str()
        .expect("thread id in _meta")
        .to_owned();
    let listed = api.get("/v1/threads", "mcp-alice").await;
    let threads = listed.body["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "{:?}", listed.body);
    assert_eq!(threads[0]["id"], thread.as_str());
    assert_eq!(threads[0]["agent"], "engineering");
    assert_eq!(threads[0]["title"], "List the files");
    api.get(&format!("/v1/threads/{thread}"), "mcp-mallory")
        .await
        .assert_error(404, "NOT_FOUND");
    let history = api
        .get(&format!("/v1/threads/{thread}/history"), "mcp-alice")
        .await;
    assert_eq!(
        history.body["turns"][0]["stop_reason"], "finished",
        "{:?}",
        history.body
    );
}

#[tokio::test]
async fn a_chat_agent_answers_in_text_and_a_failed_turn_is_a_tool_error() {
    let api = Setup::new(vec![
        Step::text("Paris."),
        Step::error(500, "model server exploded"),
    ])
    .start()
    .await;
    let ws = workspace(&api);
    let out = mcp_client(
        &api,
        Some("mcp-bob"),
        &[
            "--tool",
            "chat",
            "--task",
            "Capital of France?",
            "--workspace",
            &ws,
        ],
    )
    .await;
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(out["result"]["content"][0]["text"], "Paris.");
    assert!(out["result"]["structuredContent"].is_null(), "{out}");

    let out = mcp_client(
        &api,
        Some("mcp-bob"),
        &["--tool", "chat", "--task", "Again?", "--workspace", &ws],
    )
    .await;
    assert_eq!(out["isError"], true, "{out}");
    let error: Value =
        serde_json::from_str(out["result"]["content"][0]["text"].as_str().expect("text"))
            .expect("error JSON");
    assert!(
        error["code"].as_str().is_some_and(|c| !c.is_empty()),
        "{error}"
    );
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{error}"
    );
}

#[tokio::test]
async fn a_text_answer_where_a_result_schema_is_promised_is_a_tool_error() {
    // Text, then text after each of the two corrective messages (ADR 0032).
    let api = Setup::new(vec![Step::text("I did it, trust me."); 3])
        .start()
        .await;
    let ws = workspace(&api);
    let out = mcp_client(
        &api,
        Some("mcp-carol"),
        &[
            "--tool",
            "engineering",
            "--task",
            "Do it",
            "--workspace",
            &ws,
        ],
    )
    .await;
    assert_eq!(out["isError"], true, "{out}");
    let error: Value =
        serde_json::from_str(out["result"]["content"][0]["text"].as_str().expect("text"))
            .expect("error JSON");
    assert_eq!(error["code"], "TEXT_ANSWER");
    assert_eq!(error["text"], "I did it, trust me.");
}

#[tokio::test]
async fn without_the_token_there_is_no_session() {
    let api = Setup::new(vec![]).token(TOKEN).start().await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}
    });
    for authorization in [None, Some("Bearer wrong-token"), Some("Basic abc")] {
        let mut request = api
            .http
            .post(api.url("/mcp"))
            .header("X-Client-ID", "mcp-eve")
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        let answer = api.send(request).await;
        answer.assert_error(401, "UNAUTHORIZED");
        assert!(answer.headers.get("mcp-session-id").is_none());
    }
    // The real client, without a token, cannot connect either.
    let mut command = tokio::process::Command::new(peers::python());
    let output = command
        .arg(peers::mcp_client_script())
        .args(["--http", &api.url("/mcp"), "--timeout", "20"])
        .args(["--header", "X-Client-ID: mcp-eve"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("client runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    // A valid token without a client id is the default MCP client's (an MCP client
    // may be unable to add headers): a session starts.
    let response = api
        .http
        .post(api.url("/mcp"))
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_some());
    // With both, a session starts.
    let response = api
        .request(Method::POST, "/mcp", Some("mcp-eve"))
        .header("Accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("mcp-session-id").is_some());
}

#[tokio::test]
async fn hostile_requests_are_errors_and_the_server_stays_fine() {
    let api = Setup::new(vec![Step::text("still here")])
        .token(TOKEN)
        .start()
        .await;
    let ws = workspace(&api);
    let raw = |body: Vec<u8>| {
        api.request(Method::POST, "/mcp", Some("mcp-hostile"))
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body)
    };
    for body in [
        b"not json at all".to_vec(),
        b"{".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        b"null".to_vec(),
        br#"{"jsonrpc":"2.0","id":1}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chat"}}"#.to_vec(),
        br#"{"jsonrpc":"1.0","id":{},"method":7}"#.to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
    ] {
        let response = raw(body.clone()).send().await.expect("answered");
        assert!(
            response.status().is_client_error(),
            "{} for {:?}",
            response.status(),
            String::from_utf8_lossy(&body)
        );
    }
    // Larger than the body limit.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","pad":"{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let response = raw(huge.into_bytes()).send().await.expect("answered");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let response = api
        .request(Method::GET, "/mcp", Some("mcp-hostile"))
        .header("Accept", "application/json")
        .send()
        .await
        .expect("answered");
    assert!(response.status().is_client_error(), "{}", response.status());

    // Through the real client: unknown tool, missing or wrong arguments, an oversized
    // task and a bad workspace are invalid params, and leave no thread behind.
    let too_long = "x".repeat(agentplane_engine::hub::MAX_INPUT_CHARS + 1);
    let not_absolute = json!({"task": "hi", "workspace": "relative/dir"}).to_string();
    let missing_dir = json!({"task": "hi", "workspace": "/no/such/dir/anywhere"}).to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--tool", "no-such-agent", "--task", "hi"],
        vec!["--tool", "chat", "--arguments", "{}"],
        vec!["--tool", "chat", "--arguments", r#"{"task": 42}"#],
        vec![
            "--tool",
            "chat",
            "--arguments",
            r#"{"task": "hi", "sudo": true}"#,
        ],
        vec!["--tool", "chat", "--task", "   ", "--workspace", &ws],
        vec!["--tool", "chat", "--task", &too_long, "--workspace", &ws],
        vec!["--tool", "chat", "--arguments", &not_absolute],
        vec!["--tool", "chat", "--arguments", &missing_dir],
    ];
    for case in &cases {
        let out = mcp_client(&api, Some("mcp-hostile"), case).await;
        assert_eq!(out["error"]["code"], -32602, "{case:?}: {out}");
        assert!(out["result"].is_null(), "{case:?}: {out}");
    }
    let listed = api.get("/v1/threads", "mcp-hostile").await;
    assert_eq!(listed.body["threads"], json!([]), "{:?}", listed.body);

    // Still fine: a real call works.
    let out = mcp_client(
        &api,
        Some("mcp-hostile"),
        &["--tool", "chat", "--task", "ok?", "--workspace", &ws],
    )
    .await;
    assert_eq!(out["result"]["content"][0]["text"], "still here", "{out}");
    let health = api.http.get(api.url("/healthz")).send().await.expect("up");
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn sessions_of_the_older_protocol_work_too() {
    let api = Setup::new(vec![
        Step::tool_call("list_files", json!({})),
        Step::tool_call("finish_task", json!({"summary": "done the old way"})),
    ])
    .token(TOKEN)
    .start()
    .await;
    let ws = workspace(&api);
    let out = mcp_client(
        &api,
        Some("mcp-legacy"),
        &[
            "--mode",
            "legacy",
            "--tool",
            "engineering",
            "--task",
            "Old school",
            "--workspace",
            &ws,
        ],
    )
    .await;
    assert_ne!(out["protocol"], "2026-07-28", "{out}");
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(
        out["result"]["structuredContent"],
        json!({"summary": "done the old way"})
    );
    assert!(out["progress"].as_u64().unwrap_or(0) >= 3, "{out}");
    let listed = api.get("/v1/threads", "mcp-legacy").await;
    assert_eq!(listed.body["threads"].as_array().map(Vec::len), Some(1));
}

/// The stop reason of the client's only thread's last turn, once it has one.
async fn stop_reason_of_only_thread(api: &Api, client: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let listed = api.get("/v1/threads", client).await;
        if let Some(thread) = listed.body["threads"][0]["id"].as_str() {
            let history = api
                .get(&format!("/v1/threads/{thread}/history"), client)
                .await;
            let reason = history.body["turns"][0]["stop_reason"].clone();
            if !reason.is_null() {
                return reason;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn did not end: {:?}",
            listed.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_abandoned_call_cancels_its_turn() {
    let api = Setup::new(vec![
        Step::text("too slow").with_delay_ms(30_000),
        Step::text("too slow as well").with_delay_ms(30_000),
    ])
    .start()
    .await;
    let ws = workspace(&api);
    // The current protocol closes the request's stream; the older one sends
    // notifications/cancelled on its session.
    for (client, mode) in [("mcp-quitter", "auto"), ("mcp-old-quitter", "legacy")] {
        let started = std::time::Instant::now();
        let out = mcp_client(
            &api,
            Some(client),
            &[
                "--mode",
                mode,
                "--tool",
                "chat",
                "--task",
                "Take your time",
                "--workspace",
                &ws,
                "--cancel-after",
                "1.5",
            ],
        )
        .await;
        assert_eq!(out["cancelled"], true, "{mode}: {out}");
        assert_eq!(
            stop_reason_of_only_thread(&api, client).await,
            "cancelled",
            "{mode}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            started.elapsed()
        );
        assert_eq!(api.runtime.hub().running_turns(), 0, "{mode}");
    }
}

/// Opens an MCP session of the older protocol by hand; returns its id.
async fn open_session(api: &Api, client: &str) -> String {
    let response = api
        .request(Method::POST, "/mcp", Some(client))
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}
        }))
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status(), StatusCode::OK);
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let _ = response.bytes().await;
    let response = api
        .request(Method::POST, "/mcp", Some(client))
        .header("Accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized");
    assert!(response.status().is_success(), "{}", response.status());
    session
}

#[tokio::test]
async fn shutdown_ends_open_mcp_streams_without_waiting_for_them() {
    let mut api = Setup::new(vec![]).start().await;
    let session = open_session(&api, "mcp-idle").await;
    // The session's standing stream for server messages, held open.
    let stream = api
        .request(Method::GET, "/mcp", Some("mcp-idle"))
        .header("Accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("standing stream");
    assert_eq!(stream.status(), StatusCode::OK);

    let started = std::time::Instant::now();
    let stopped = api.shut_down().await;
    assert!(stopped.is_ok(), "{stopped:?}");
    // Well under the 5 s the server gives connections that do not end by themselves.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    drop(stream);
}

#[tokio::test]
async fn without_a_token_only_loopback_host_names_are_served() {
    let api = Setup::new(vec![]).start().await;
    let probe = |host: &'static str| {
        api.request(Method::POST, "/mcp", Some("mcp-rebind"))
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "probe", "version": "0"}}
            }))
            .send()
    };
    // A page on another name resolving to 127.0.0.1 (DNS rebinding) is refused.
    let response = probe("evil.example").await.expect("answered");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = probe("localhost").await.expect("answered");
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test]
async fn a_permission_asked_during_a_call_is_answered_through_the_http_api() {
    let api = Setup::new(vec![
        Step::tool_call("write_file", json!({"path": "out.txt", "content": "42"})),
        Step::tool_call("finish_task", json!({"summary": "wrote out.txt"})),
    ])
    .token(TOKEN)
    .start()
    .await;
    let ws = workspace(&api);
    let args = ["--tool", "writer", "--task", "Write 42", "--workspace", &ws];
    let call = mcp_client(&api, Some("mcp-dave"), &args);
    let approve = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let thread = loop {
            let listed = api.get("/v1/threads", "mcp-dave").await;
            if let Some(id) = listed.body["threads"][0]["id"].as_str() {
                break id.to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "no thread");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut events = api.follow("mcp-dave", &thread, "", None).await;
        let frames = events.until("permission_required").await;
        let permission = frames.last().expect("frame").json()["permission_id"]
            .as_str()
            .expect("permission id")
            .to_owned();
        // Another client cannot answer it.
        api.post(
            &format!("/v1/permissions/{permission}"),
            "mcp-mallory",
            json!({"decision": "approved"}),
        )
        .await
        .assert_error(404, "NOT_FOUND");
        let answer = api
            .post(
                &format!("/v1/permissions/{permission}"),
                "mcp-dave",
                json!({"decision": "approved"}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    };
    let (out, ()) = tokio::join!(call, approve);
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(
        out["result"]["structuredContent"],
        json!({"summary": "wrote out.txt"})
    );
    let messages = out["progressMessages"].to_string();
    assert!(
        messages.contains("waiting for permission perm_"),
        "{messages}"
    );
    assert!(messages.contains("approved"), "{messages}");
    assert_eq!(
        std::fs::read_to_string(api.workspace.join("out.txt")).expect("written"),
        "42"
    );
}

/// Desktop assistants and IDEs cannot add headers: without `X-Client-ID`, on a server
/// without credentials, a call is the documented default client's (`mcp`), and its
/// thread is that client's alone.
#[tokio::test]
async fn a_client_that_names_no_client_acts_as_the_default_mcp_client() {
    let api = Setup::new(vec![Step::text("Paris.")]).start().await;
    let ws = workspace(&api);
    let out = mcp_client(
        &api,
        None,
        &[
            "--tool",
            "chat",
            "--task",
            "Capital of France?",
            "--workspace",
            &ws,
        ],
    )
    .await;
    assert_eq!(out["isError"], false, "{out}");
    let thread = out["result"]["_meta"]["agentplane/thread_id"]
        .as_str()
        .expect("thread id in _meta")
        .to_owned();
    let listed = api
        .get("/v1/threads", agentplane_server::MCP_DEFAULT_CLIENT)
        .await;
    let threads = listed.body["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "{:?}", listed.body);
    assert_eq!(threads[0]["id"], thread.as_str());
    api.get(&format!("/v1/threads/{thread}"), "someone-else")
        .await
        .assert_error(404, "NOT_FOUND");
    // `/v1` still requires the header: the default is MCP's alone.
    let status = api
        .http
        .get(api.url("/v1/threads"))
        .send()
        .await
        .expect("request")
        .status();
    assert_eq!(status, 400);
}
