//! `agentplane acp` as a real child process of a real ACP client (npm's official
//! `@agentclientprotocol/sdk`, through `testkit/peers/acp_client.mjs`), against the
//! scripted model with a SQLite file in a temp dir: initialize, session/new, prompts
//! streamed back as chunks, our permission surfacing as an ACP permission request, and
//! session/cancel.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");

struct Sandbox {
    _dir: tempfile::TempDir,
    config: PathBuf,
    workspace: PathBuf,
}

fn sandbox(model_url: &str) -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical root");
    let workspace = root.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let config = root.join("agentplane.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nbase_url = \"{model_url}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
             [store]\npath = \"events.db\"\n\
             [server]\npermission_timeout_secs = 1\n\
             [agents.writer]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n\
             requires_permission = [\"write_file\"]\nmax_nudges = 0\n"
        ),
    )
    .expect("config");
    Sandbox {
        _dir: dir,
        config,
        workspace,
    }
}

/// Runs the SDK client against `agentplane acp`, on a blocking thread (the scripted
/// model shares the test's runtime).
async fn acp_client(sb: &Sandbox, permission: &str, prompts: &[&str]) -> Value {
    let (node, script) = peers::acp_sdk_client();
    let mut command = Command::new(node);
    command
        .args(script)
        .arg("--cwd")
        .arg(&sb.workspace)
        .args(["--permission", permission]);
    for prompt in prompts {
        command.args(["--prompt", prompt]);
    }
    command
        .arg("--")
        .arg(BIN)
        .arg("--config")
        .arg(&sb.config)
        .args(["acp", "--agent", "writer"])
        .current_dir(&sb.workspace)
        .env_remove("AGENTPLANE_CONFIG")
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the ACP client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the ACP client printed no JSON ({e}); stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[tokio::test]
async fn an_sdk_client_drives_agentplane_over_acp() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("Hello from agentplane.").with_split(3),
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "hi"})),
        Step::tool_call("finish_task", json!({"summary": "wrote a.txt"})),
        Step::text("a long answer that will not finish ")
            .with_split(20)
            .with_chunk_delay_ms(300),
    ]))
    .await
    .expect("scripted model");
    let sb = sandbox(&model.base_url());
    let out = acp_client(
        &sb,
        "allow_once",
        &["say hello", "write a.txt", "cancel:tell me a long story"],
    )
    .await;
    assert!(out.get("error").is_none(), "{out}");
    assert_eq!(out["initialize"]["protocolVersion"], 1, "{out}");
    assert_eq!(out["initialize"]["agentInfo"]["name"], "agentplane");
    assert!(
        out["sessionId"]
            .as_str()
            .expect("session")
            .starts_with("thr_")
    );

    let hello = &out["prompts"][0];
    assert_eq!(hello["stopReason"], "end_turn", "{out}");
    assert_eq!(hello["text"], "Hello from agentplane.");
    let updates = hello["updates"].as_array().expect("updates");
    assert!(!updates.is_empty());
    assert!(
        updates.iter().all(|u| u == "agent_message_chunk"),
        "{updates:?}"
    );

    // Our permission flow surfaced as an ACP permission request, and the allow ran it.
    let write = &out["prompts"][1];
    assert_eq!(write["stopReason"], "end_turn", "{out}");
    assert_eq!(
        out["permissions"],
        json!([{"title": "write_file", "options": ["allow_once", "reject_once"]}])
    );
    assert!(
        write["toolCalls"]
            .as_array()
            .expect("calls")
            .iter()
            .any(|t| t == "write_file")
    );
    assert_eq!(
        std::fs::read_to_string(sb.workspace.join("a.txt")).expect("written"),
        "hi"
    );

    let cancelled = &out["prompts"][2];
    assert_eq!(cancelled["stopReason"], "cancelled", "{out}");
    assert!(cancelled["ms"].as_u64().expect("ms") < 5_000);
}

#[tokio::test]
async fn a_rejected_acp_permission_declines_the_call() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "hi"})),
        Step::tool_call("finish_task", json!({"summary": "could not write"})),
    ]))
    .await
    .expect("scripted model");
    let sb = sandbox(&model.base_url());
    let out = acp_client(&sb, "reject_once", &["write a.txt"]).await;
    assert_eq!(out["prompts"][0]["stopReason"], "end_turn", "{out}");
    assert_eq!(out["permissions"].as_array().expect("asked").len(), 1);
    assert!(!sb.workspace.join("a.txt").exists());
}

/// Talks to `agentplane acp` in phases: each phase's lines are sent, then its ids'
/// answers awaited (20 s at most). Returns every JSON answer.
fn raw_session(config: &Path, workspace: &Path, phases: &[(Vec<String>, Vec<i64>)]) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(config)
        .args(["acp", "--agent", "writer"])
        .current_dir(workspace)
        .env_remove("AGENTPLANE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("agentplane acp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut answers = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for (lines, wanted) in phases {
        for line in lines {
            stdin.write_all(line.as_bytes()).expect("write");
            stdin.write_all(b"\n").expect("newline");
        }
        stdin.flush().expect("flush");
        while !wanted
            .iter()
            .all(|id| answers.iter().any(|a: &Value| a["id"] == *id))
        {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                break;
            };
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"));
            answers.push(value);
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answers
}

#[tokio::test]
async fn hostile_input_gets_json_rpc_errors_and_the_connection_goes_on() {
    let model = ScriptedServer::start(Scenario::new(vec![Step::text("fine")]))
        .await
        .expect("scripted model");
    let sb = sandbox(&model.base_url());
    let before = vec![
        "this is not json".to_owned(),
        "{\"jsonrpc\":\"2.0\",\"id\":".to_owned(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}).to_string(),
    ];
    let after = vec![
        json!({"jsonrpc": "2.0", "id": 2, "method": "no/such_method", "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "/no/such/dir", "mcpServers": []}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"sessionId": "thr_nope", "prompt": [{"type": "text", "text": "hi"}]}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": 17}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {"cwd": sb.workspace, "mcpServers": []}}).to_string(),
    ];
    let (config, workspace) = (sb.config.clone(), sb.workspace.clone());
    let answers = tokio::task::spawn_blocking(move || {
        raw_session(
            &config,
            &workspace,
            &[(before, vec![1]), (after, vec![2, 3, 4, 5, 6])],
        )
    })
    .await
    .expect("join");
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
            .clone()
    };
    assert_eq!(by_id(1)["result"]["protocolVersion"], 1);
    assert!(
        by_id(2)["error"]["code"].is_i64(),
        "an unknown method is an error"
    );
    assert!(by_id(3)["error"].is_object(), "a cwd that does not exist");
    assert!(
        by_id(4)["error"].is_object(),
        "a session that does not exist"
    );
    assert!(by_id(5)["error"].is_object(), "malformed params");
    assert!(
        by_id(6)["result"]["sessionId"]
            .as_str()
            .expect("session")
            .starts_with("thr_"),
        "the connection still works"
    );
}

#[tokio::test]
async fn an_editor_that_never_answers_a_permission_gets_it_declined_by_the_timeout() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "hi"})),
        Step::tool_call("finish_task", json!({"summary": "could not write"})),
    ]))
    .await
    .expect("scripted model");
    let sb = sandbox(&model.base_url());
    let out = acp_client(&sb, "never", &["write a.txt"]).await;
    assert_eq!(out["prompts"][0]["stopReason"], "end_turn", "{out}");
    assert_eq!(out["permissions"].as_array().expect("asked").len(), 1);
    assert!(!sb.workspace.join("a.txt").exists());
}
