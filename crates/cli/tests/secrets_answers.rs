//! Secrets never leave in an answer, on every outward path of the real binary: a
//! `[secrets]` value and the model API key, echoed by the scripted model, are
//! `[REDACTED:NAME]` in the SSE stream of a turn, its history, its runlog, the
//! OpenAI-compatible gateway's answers (plain, and streamed with the secret split
//! across chunks), an MCP `tools/call` result at `/mcp`, the `session/update`s of
//! `agentplane acp` on stdio, a webhook delivered to a local receiver, and error
//! envelopes (an upstream error carrying the secret, a request naming it).
//!
//! One server takes the paths in turn (the scripted model answers them in order);
//! `runlog` and `acp` run afterwards as their own processes.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_suites::{SseReader, api, command, create_thread, history, sandbox, start_with_env};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "envsecret-Hq3Vb8Lp";
const LLM_KEY: &str = "llmkey-Wd4Tn6Rs";
const SECRET_VAR: &str = "AGENTPLANE_SECRET_API";
const CONFIG: &str = "[secrets.API]\nenv = \"AGENTPLANE_SECRET_API\"\n\
    [secrets.HOOK]\nenv = \"AGENTPLANE_SECRET_HOOK\"\n\
    [executions]\nwebhook_secret = \"HOOK\"\nallow_private_webhooks = true\n";

/// What the model says: both values, whole.
fn echo() -> String {
    format!("the key is {SECRET} and the model key {LLM_KEY} done")
}

/// The same answer as it must leave.
const REDACTED: &str = "the key is [REDACTED:API] and the model key [REDACTED:llm.api_key] done";

/// Asserts that `answer` (what one path returned) holds neither value.
fn assert_clean(path: &str, answer: &str) {
    for value in [SECRET, LLM_KEY] {
        assert!(
            !answer.contains(value),
            "{path} answered with a secret:\n{answer}"
        );
    }
}

/// A local HTTP receiver that keeps each request's body and answers 200.
struct Receiver {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
}

async fn receiver() -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                    let text = String::from_utf8_lossy(&request).into_owned();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        kept.lock().expect("lock").push(body.to_owned());
                        let _ = stream
                            .write_all(
                                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            )
                            .await;
                        return;
                    }
                }
            });
        }
    });
    Receiver { url, bodies }
}

/// The `data:` payloads of an SSE body.
fn data_lines(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_on_any_path_carries_a_secret() {
    let model = ScriptedServer::start(Scenario::new(vec![
        // 1. a turn streamed over SSE
        Step::text(echo()),
        // 2. an MCP tools/call
        Step::text(echo()),
        // 3. the gateway, plain
        Step::text(echo()),
        // 4. the gateway, streamed in pieces that cut both values
        Step::text(echo()).with_split(13),
        // 5. an upstream error carrying the secret
        Step::error(
            500,
            format!("{{\"error\":{{\"message\":\"upstream saw {SECRET} with {LLM_KEY}\"}}}}"),
        ),
        // 6. an execution with a webhook
        Step::text(echo()),
        // 7. `agentplane acp`
        Step::text(echo()),
    ]))
    .await
    .expect("model");
    let sb = sandbox(CONFIG);
    let env = [
        (SECRET_VAR, SECRET),
        ("AGENTPLANE_LLM_API_KEY", LLM_KEY),
        ("AGENTPLANE_SECRET_HOOK", "whsec-test-0123456789"),
    ];
    let served = start_with_env(&sb, &model.base_url(), &[], &env).await;

    // SSE: a turn's stream.
    let thread = create_thread(&served, &sb, "chat", "secrets").await;
    let mut sse = SseReader::open(&served, &thread, "say it").await;
    let streamed = sse.until("turn_completed").await;
    let sse_text: String = streamed.iter().map(|e| e.data.to_string()).collect();
    assert_clean("the SSE stream", &sse_text);
    assert!(sse_text.contains("[REDACTED:API]"), "{sse_text}");
    let turn_id = streamed
        .iter()
        .find_map(|e| e.data["turn_id"].as_str().map(str::to_owned))
        .expect("a turn id in the stream");

    // History.
    let history = history(&served, &thread).await.to_string();
    assert_clean("history", &history);
    assert!(history.contains("[REDACTED:llm.api_key]"), "{history}");

    // MCP: the agent `chat` as a tool at /mcp.
    let mcp = |session: Option<&str>| {
        let request = api(&served, Method::POST, "/mcp")
            .header("Accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        match session {
            Some(session) => request.header("mcp-session-id", session),
            None => request,
        }
    };
    let initialized = mcp(None)
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}
        }))
        .send()
        .await
        .expect("initialize");
    assert_eq!(initialized.status(), 200);
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    let _ = initialized.bytes().await;
    let notified = mcp(Some(&session))
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized");
    assert!(notified.status().is_success());
    let called = mcp(Some(&session))
        .json(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "chat", "arguments": {"task": "say it",
                       "workspace": sb.workspace}}
        }))
        .send()
        .await
        .expect("tools/call");
    let mcp_body = called.text().await.expect("MCP answer");
    assert_clean("/mcp", &mcp_body);
    assert!(
        data_lines(&mcp_body)
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .any(|m| m["id"] == 2 && m["result"].to_string().contains("[REDACTED:API]")),
        "the call's result came back redacted: {mcp_body}"
    );

    // The gateway, plain.
    let completion = api(&served, Method::POST, "/openai/v1/chat/completions")
        .json(&json!({"model": "scripted-model",
                      "messages": [{"role": "user", "content": "say it"}]}))
        .send()
        .await
        .expect("completion");
    assert_eq!(completion.status(), 200);
    let plain: Value = completion.json().await.expect("completion JSON");
    assert_clean("the gateway", &plain.to_string());
    assert_eq!(
        plain["choices"][0]["message"]["content"], REDACTED,
        "{plain}"
    );

    // The gateway, streamed: the values arrive cut across chunks and leave whole,
    // redacted.
    let streamed = api(&served, Method::POST, "/openai/v1/chat/completions")
        .json(&json!({"model": "scripted-model", "stream": true,
                      "messages": [{"role": "user", "content": "say it"}]}))
        .send()
        .await
        .expect("stream");
    assert_eq!(streamed.status(), 200);
    let body = streamed.text().await.expect("stream body");
    assert_clean("the streamed gateway", &body);
    let text: String = data_lines(&body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, REDACTED, "{body}");
    assert!(
        data_lines(&body).len() > 5,
        "the answer came in pieces: {body}"
    );
    // Not even a value's start leaves in a chunk of its own: it is held back until the
    // next delta shows it is the secret.
    for piece in [&SECRET[..5], &LLM_KEY[..5]] {
        assert!(!body.contains(piece), "a piece of a value left: {body}");
    }

    // Error envelopes: an upstream error that quotes the values, and a request naming one.
    let failed = api(&served, Method::POST, "/openai/v1/chat/completions")
        .json(&json!({"model": "scripted-model",
                      "messages": [{"role": "user", "content": "fail"}]}))
        .send()
        .await
        .expect("failing completion");
    assert!(failed.status().is_server_error(), "{}", failed.status());
    let envelope = failed.text().await.expect("envelope");
    assert_clean("an upstream error envelope", &envelope);
    agentplane_suites::attacks::assert_envelope(
        &envelope,
        serde_json::from_str::<Value>(&envelope).expect("json")["error"]["code"]
            .as_str()
            .unwrap_or_default(),
    );
    let refused = api(&served, Method::POST, "/v1/threads")
        .json(&json!({"agent": SECRET, "cwd": sb.workspace}))
        .send()
        .await
        .expect("refused");
    assert!(refused.status().is_client_error());
    let envelope = refused.text().await.expect("envelope");
    assert_clean("a request error envelope", &envelope);
    assert!(envelope.contains("[REDACTED:API]"), "{envelope}");

    // A webhook: an execution whose result echoes the values.
    let hook = receiver().await;
    let submitted = api(&served, Method::POST, "/v1/executions")
        .json(
            &json!({"agent": "chat", "input": "say it", "cwd": sb.workspace,
                      "webhook_url": hook.url}),
        )
        .send()
        .await
        .expect("submit");
    assert!(
        submitted.status().is_success(),
        "{}",
        submitted.text().await.unwrap_or_default()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let delivered = loop {
        if let Some(body) = hook.bodies.lock().expect("lock").first().cloned() {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no webhook within 30 s:\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_clean("the webhook", &delivered);
    assert!(delivered.contains("[REDACTED:API]"), "{delivered}");
    drop(served);

    // The runlog, read from the store once the server is gone.
    let runlog = command(&sb, &model.base_url())
        .args(["runlog", &turn_id])
        .envs(env)
        .output()
        .expect("runlog");
    let runlog_text = String::from_utf8_lossy(&runlog.stdout).into_owned();
    assert!(runlog.status.success(), "{runlog:?}");
    assert_clean("the runlog", &runlog_text);
    assert!(runlog_text.contains("[REDACTED:API]"), "{runlog_text}");

    // ACP on stdio: the session/updates of a prompt.
    let acp_log = sb.root.join("acp.log");
    let mut acp = command(&sb, &model.base_url())
        .arg("--config")
        .arg(sb.root.join("agentplane.toml"))
        .args(["acp", "--agent", "chat"])
        .envs(env)
        .current_dir(&sb.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&acp_log).expect("log"))
        .spawn()
        .expect("agentplane acp");
    let workspace = sb.workspace.clone();
    // Blocking reads, off the runtime that serves the scripted model.
    let lines = tokio::task::spawn_blocking(move || {
        let lines = acp_session(&mut acp, &workspace);
        let _ = acp.kill();
        let _ = acp.wait();
        lines
    })
    .await
    .expect("join");
    let acp_stderr = std::fs::read_to_string(&acp_log).unwrap_or_default();
    assert_clean("the ACP log", &acp_stderr);
    let updates: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("session/update"))
        .collect();
    assert!(
        !updates.is_empty(),
        "no session/update: {lines:?}\n{acp_stderr}"
    );
    for line in &lines {
        assert_clean("an ACP message", line);
    }
    assert!(
        updates.iter().any(|u| u.contains("[REDACTED:API]")),
        "{updates:?}"
    );
}

/// Initializes an ACP session, sends one prompt and returns every line until its answer.
fn acp_session(child: &mut std::process::Child, workspace: &std::path::Path) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let send = |stdin: &mut std::process::ChildStdin, message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .expect("write");
        stdin.flush().expect("flush");
    };
    let mut lines = Vec::new();
    let wait_for = |id: i64, lines: &mut Vec<String>| -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                return Value::Null;
            };
            lines.push(line.clone());
            let value: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if value["id"] == id && value.get("method").is_none() {
                return value;
            }
        }
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    wait_for(1, &mut lines);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": workspace, "mcpServers": []}}),
    );
    let Some(session) = wait_for(2, &mut lines)["result"]["sessionId"]
        .as_str()
        .map(str::to_owned)
    else {
        return lines;
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
               "params": {"sessionId": session,
                          "prompt": [{"type": "text", "text": "say it"}]}}),
    );
    wait_for(3, &mut lines);
    drop(stdin);
    lines
}

/// Every file under `dir` (the database, its WAL, the log) that holds a secret.
fn files_holding_a_secret(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let hit = [SECRET, LLM_KEY]
                    .iter()
                    .any(|v| bytes.windows(v.len()).any(|w| w == v.as_bytes()));
                if hit {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

/// The hold-back under load, from the interface: many streamed gateway calls and
/// turns at once, the secret cut into pieces of every size from 1 to 8 bytes, half the
/// clients vanishing after their first bytes, then the server killed and started again
/// on the same files. No answer carries a value, and nothing written to disk holds one
/// (the database and its WAL included, so a delta held back when its client left was
/// redacted before it was stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_cut_anywhere_and_vanishing_clients_leak_no_secret() {
    // Pieces of 1 to 8 bytes: every cut of every value happens somewhere.
    let text = echo().repeat(4);
    let steps = (1..=8)
        .map(|bytes| Step::text(text.clone()).with_split(text.len().div_ceil(bytes)))
        .collect();
    let model = ScriptedServer::start(Scenario::new(steps).repeating(true))
        .await
        .expect("model");
    let sb = sandbox(CONFIG);
    let env = [
        (SECRET_VAR, SECRET),
        ("AGENTPLANE_LLM_API_KEY", LLM_KEY),
        ("AGENTPLANE_SECRET_HOOK", "whsec-test-0123456789"),
    ];
    let mut served = start_with_env(&sb, &model.base_url(), &[], &env).await;
    let mut threads = Vec::new();
    for i in 0..4 {
        threads.push(create_thread(&served, &sb, "chat", &format!("t{i}")).await);
    }

    let mut tasks = Vec::new();
    for i in 0..16 {
        let request = api(&served, Method::POST, "/openai/v1/chat/completions").json(&json!({
            "model": "scripted-model",
            "stream": true,
            "messages": [{"role": "user", "content": "say it"}],
        }));
        tasks.push(tokio::spawn(async move {
            let mut response = request.send().await.expect("gateway");
            let mut seen = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                seen.push_str(&String::from_utf8_lossy(&chunk));
                // Half the clients leave after their first bytes.
                if i % 2 == 1 {
                    break;
                }
            }
            seen
        }));
    }
    for (i, thread) in threads.iter().enumerate() {
        let request = api(
            &served,
            Method::POST,
            &format!("/v1/threads/{thread}/turns"),
        )
        .json(&json!({"input": "say it"}));
        tasks.push(tokio::spawn(async move {
            let mut response = request.send().await.expect("turn");
            let mut seen = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                seen.push_str(&String::from_utf8_lossy(&chunk));
                if i % 2 == 1 || seen.contains("turn_completed") {
                    break;
                }
            }
            seen
        }));
    }
    let mut answered = 0;
    for task in tasks {
        let seen = task.await.expect("client task");
        assert_clean("a concurrent stream", &seen);
        answered += usize::from(!seen.is_empty());
    }
    assert_eq!(answered, 20, "every client got an answer");
    // The clients that left: their turns and calls end on their own; give them the
    // time a slow machine needs, then kill the server mid-whatever and start again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    served.kill_9();
    let served = start_with_env(&sb, &model.base_url(), &[], &env).await;
    for thread in &threads {
        let history = history(&served, thread).await.to_string();
        assert_clean("history after a restart", &history);
    }
    drop(served);
    let leaked = files_holding_a_secret(&sb.root);
    assert!(leaked.is_empty(), "files holding a secret: {leaked:?}");
}
