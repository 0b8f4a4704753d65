//! The scripted server over real HTTP: every step kind and option as a client sees it,
//! and the `scripted-llm` binary as a child process.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedModel, ScriptedServer, Step};
use serde_json::{Value, json};

fn chat_body(stream: bool) -> Value {
    json!({
        "model": "m1",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

async fn post(server: &ScriptedServer, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .json(body)
        .send()
        .await
        .expect("send")
}

/// The JSON events of an SSE body, and whether it ended with `[DONE]`.
fn sse_events(body: &str) -> (Vec<Value>, bool) {
    let mut events = Vec::new();
    let mut done = false;
    for line in body.lines() {
        if let Some(data) = line.strip_prefix("data: ") {
            if data == "[DONE]" {
                done = true;
            } else {
                events.push(serde_json::from_str(data).expect("event json"));
            }
        }
    }
    (events, done)
}

#[tokio::test]
async fn non_streamed_text_with_usage_and_request_log() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::text("hello").with_usage(10, 3)]))
        .await
        .expect("start");
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert!(server.base_url().ends_with("/v1"));
    let response = post(&server, &chat_body(false)).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "m1");
    assert_eq!(body["choices"][0]["message"]["content"], "hello");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["prompt_tokens"], 10);
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(server.requests(), vec![chat_body(false)]);

    let exhausted = post(&server, &chat_body(false)).await;
    assert_eq!(exhausted.status(), 500);
    let body: Value = exhausted.json().await.expect("json");
    assert_eq!(body["error"]["message"], "scenario exhausted");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.chat_request_count(), 2);
}

#[tokio::test]
async fn streamed_tool_call_is_split_into_openai_deltas() {
    let step =
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "x"})).with_split(4);
    let server = ScriptedServer::start(Scenario::new(vec![step]))
        .await
        .expect("start");
    let response = post(&server, &chat_body(true)).await;
    assert_eq!(
        response.headers()["content-type"].to_str().expect("ascii"),
        "text/event-stream"
    );
    let (events, done) = sse_events(&response.text().await.expect("body"));
    assert!(done);
    let mut arguments = String::new();
    let mut names = Vec::new();
    for event in &events {
        for choice in event["choices"].as_array().expect("choices") {
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert_eq!(call["index"], 0);
                if let Some(name) = call["function"]["name"].as_str() {
                    names.push(name.to_owned());
                    assert_eq!(call["id"], "call_0_0");
                }
                arguments.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
    }
    assert_eq!(names, vec!["write_file"]);
    let parsed: Value = serde_json::from_str(&arguments).expect("reassembled");
    assert_eq!(parsed, json!({"path": "a.txt", "content": "x"}));
    let finish: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["choices"][0].get("finish_reason"))
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, vec![&json!("tool_calls")]);
    assert!(events.last().expect("usage chunk")["usage"]["total_tokens"].is_u64());
}

#[tokio::test]
async fn options_drop_ids_usage_and_finish_reason() {
    let step = Step::tool_call("x", json!("{not json"))
        .without_ids()
        .without_usage()
        .with_empty_finish_reason();
    let server = ScriptedServer::start(Scenario::new(vec![step.clone(), step]))
        .await
        .expect("start");
    let body: Value = post(&server, &chat_body(false))
        .await
        .json()
        .await
        .expect("json");
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert!(call.get("id").is_none());
    assert_eq!(call["function"]["arguments"], "{not json");
    assert!(body["choices"][0]["message"]["content"].is_null());
    assert_eq!(body["choices"][0]["finish_reason"], "");
    assert!(body.get("usage").is_none());

    let text = post(&server, &chat_body(true))
        .await
        .text()
        .await
        .expect("body");
    let (events, done) = sse_events(&text);
    assert!(done);
    assert!(events.iter().all(|e| e.get("usage").is_none()));
    assert!(!text.contains("\"id\":\"call_"));
}

#[tokio::test]
async fn errors_and_no_tools_answer_like_real_servers() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::error(503, r#"{"error":"boom"}"#),
        Step::no_tools(),
    ]))
    .await
    .expect("start");
    let first = post(&server, &chat_body(true)).await;
    assert_eq!(first.status(), 503);
    assert_eq!(first.text().await.expect("body"), r#"{"error":"boom"}"#);
    let second = post(&server, &chat_body(true)).await;
    assert_eq!(second.status(), 400);
    let body: Value = second.json().await.expect("json");
    assert_eq!(
        body["error"]["message"],
        "registry.ollama.ai/library/m1 does not support tools"
    );
}

#[tokio::test]
async fn raw_sse_and_raw_chunks_are_sent_verbatim() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::raw_sse(&["data: {garbage", "data: [DONE]"]),
        Step::raw_chunks(&["data: {\"a\"", ":1}\r\n\r\n"]),
    ]))
    .await
    .expect("start");
    let first = post(&server, &chat_body(false)).await;
    assert_eq!(
        first.text().await.expect("body"),
        "data: {garbage\n\ndata: [DONE]\n\n"
    );
    let second = post(&server, &chat_body(true)).await;
    assert_eq!(
        second.text().await.expect("body"),
        "data: {\"a\":1}\r\n\r\n"
    );
}

#[tokio::test]
async fn truncation_cuts_the_body_without_done() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::text("partial answer")
            .with_split(3)
            .truncated_after(2),
        Step::text("whole").truncated_after(1),
    ]))
    .await
    .expect("start");
    let mut response = post(&server, &chat_body(true)).await;
    let mut received = Vec::new();
    let error = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => panic!("body ended cleanly: {}", String::from_utf8_lossy(&received)),
            Err(e) => break e,
        }
    };
    assert!(error.is_body() || error.is_decode(), "{error:?}");
    let text = String::from_utf8(received).expect("utf-8");
    assert!(text.contains("\"al an\""), "{text}");
    assert!(!text.contains("[DONE]"));

    let cut_json = post(&server, &chat_body(false)).await.text().await;
    assert!(cut_json.is_err(), "{cut_json:?}");
}

#[tokio::test]
async fn stalls_hold_the_connection_open_and_silent() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::text("first words").with_split(2).stalled_after(2),
        Step::text("never").stalled_after(0),
        Step::silent(),
    ]))
    .await
    .expect("start");
    let quiet = Duration::from_millis(300);
    // Two chunks, then nothing: the next read waits.
    let mut response = post(&server, &chat_body(true)).await;
    let mut received = Vec::new();
    while !String::from_utf8_lossy(&received).contains("words") {
        let chunk = response.chunk().await.expect("chunk").expect("more");
        received.extend_from_slice(&chunk);
    }
    assert!(tokio::time::timeout(quiet, response.chunk()).await.is_err());
    // Headers, then nothing.
    let mut response = post(&server, &chat_body(true)).await;
    assert_eq!(response.status(), 200);
    assert!(tokio::time::timeout(quiet, response.chunk()).await.is_err());
    // Not even headers.
    let silent = tokio::time::timeout(quiet, post(&server, &chat_body(true))).await;
    assert!(silent.is_err(), "headers came");
    assert_eq!(server.chat_request_count(), 3);
}

#[tokio::test]
async fn an_endless_stream_repeats_its_last_event() {
    let delta = r#"data: {"choices":[{"index":0,"delta":{"content":"more "}}]}"#;
    let server = ScriptedServer::start(Scenario::new(vec![Step::endless_sse(&[
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
        delta,
    ])]))
    .await
    .expect("start");
    let mut response = post(&server, &chat_body(true)).await;
    let mut received = 0usize;
    // Far more than the two scripted events: it goes on.
    while received < 256 * 1024 {
        let chunk = response.chunk().await.expect("chunk").expect("never ends");
        received += chunk.len();
    }
}

#[tokio::test]
async fn errors_carry_retry_after_when_scripted() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::error_retry_after(429, r#"{"error":{"message":"slow down"}}"#, "7"),
        Step::error(503, "{}"),
    ]))
    .await
    .expect("start");
    let response = post(&server, &chat_body(true)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(
        response.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"7"[..])
    );
    let response = post(&server, &chat_body(true)).await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().get("retry-after").is_none());
}

#[tokio::test]
async fn delays_are_honoured() {
    let server = ScriptedServer::start(Scenario::new(vec![
        Step::text("slow").with_delay_ms(200),
        Step::text("abc").with_split(3).with_chunk_delay_ms(60),
    ]))
    .await
    .expect("start");
    let started = Instant::now();
    post(&server, &chat_body(false))
        .await
        .text()
        .await
        .expect("body");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let started = Instant::now();
    post(&server, &chat_body(true))
        .await
        .text()
        .await
        .expect("body");
    // Three text chunks, a finish chunk, a usage chunk and [DONE]: five gaps.
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn repeat_cycles_forever() {
    let scenario = Scenario::new(vec![Step::text("a"), Step::text("b")]).repeating(true);
    let server = ScriptedServer::start(scenario).await.expect("start");
    let mut answers = Vec::new();
    for _ in 0..5 {
        let body: Value = post(&server, &chat_body(false))
            .await
            .json()
            .await
            .expect("json");
        answers.push(body["choices"][0]["message"]["content"].clone());
    }
    assert_eq!(answers, vec!["a", "b", "a", "b", "a"]);
}

#[tokio::test]
async fn listings_in_openai_and_ollama_shapes() {
    let scenario = Scenario::new(vec![]).with_models(vec![
        ScriptedModel::new("llama3.1:8b")
            .with_parameter_size("8.0B")
            .with_families(&["llama"]),
        ScriptedModel::new("nomic-embed-text"),
    ]);
    let server = ScriptedServer::start(scenario).await.expect("start");
    let client = reqwest::Client::new();
    let models: Value = client
        .get(format!("{}/models", server.base_url()))
        .bearer_auth("k")
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "llama3.1:8b");
    assert_eq!(models["data"][1]["object"], "model");
    let tags: Value = client
        .get(format!("http://{}/api/tags", server.addr()))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(tags["models"][0]["name"], "llama3.1:8b");
    assert_eq!(tags["models"][0]["details"]["parameter_size"], "8.0B");
    assert_eq!(tags["models"][0]["details"]["families"], json!(["llama"]));
    assert!(tags["models"][1]["details"].get("parameter_size").is_none());
    let received = server.received();
    assert_eq!(received[0].path, "/v1/models");
    assert_eq!(received[0].authorization.as_deref(), Some("Bearer k"));
    assert_eq!(received[1].path, "/api/tags");
}

#[tokio::test]
async fn hostile_requests_get_errors_not_panics() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::text("kept")]))
        .await
        .expect("start");
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/chat/completions", server.base_url()))
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 400);
    assert_eq!(server.requests(), vec![json!("{not json")]);
    let unknown = client
        .get(format!("{}/nope", server.base_url()))
        .send()
        .await
        .expect("send");
    assert_eq!(unknown.status(), 404);
    // Every chat POST takes the next step, even a broken one, so the script's order
    // stays predictable: the only step is gone.
    let next = post(&server, &chat_body(false)).await;
    assert_eq!(next.status(), 500);
}

#[tokio::test]
async fn invalid_scenario_is_refused_at_start() {
    let bad = Scenario::new(vec![Step {
        no_tools: true,
        ..Step::text("both")
    }]);
    let err = ScriptedServer::start(bad).await.expect_err("invalid");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let server = ScriptedServer::start(Scenario::new(vec![Step::text("a")]))
        .await
        .expect("start");
    let addr = server.addr();
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Err(_) => break,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(_) => panic!("still listening on {addr}"),
        }
    }
}

#[test]
fn binary_serves_a_scenario_file_until_killed() {
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/write_file.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-llm"))
        .args(["--scenario", scenario, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("line");
    let base_url = line.trim().to_owned();
    assert!(base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let body: Value = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("{base_url}/chat/completions"))
            .json(&chat_body(false))
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json")
    });
    let call = &body["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "write_file");
    child.kill().expect("kill");
    child.wait().expect("wait");
}

#[test]
fn binary_rejects_bad_arguments_and_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, r#"{"steps": [{"bogus": 1}]}"#).expect("write");
    let cases: Vec<Vec<String>> = vec![
        vec![],
        vec!["--listen".into(), "127.0.0.1:0".into()],
        vec!["--scenario".into()],
        vec!["--frobnicate".into()],
        vec!["--scenario".into(), broken.display().to_string()],
        vec![
            "--scenario".into(),
            dir.path().join("missing.json").display().to_string(),
        ],
        vec![
            "--scenario".into(),
            broken.display().to_string(),
            "--listen".into(),
            "not-an-address".into(),
        ],
    ];
    for args in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_scripted-llm"))
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(!output.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn example_scenarios_are_valid() {
    for name in ["write_file.json", "hello.json"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name);
        let scenario = Scenario::from_file(&path).expect(name);
        assert!(!scenario.steps().is_empty());
    }
}
