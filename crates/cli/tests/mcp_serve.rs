//! `agentplane mcp serve` as a real child process of a real MCP client (the `mcp` PyPI
//! package, through `testkit/peers/mcp_client.py`), against the scripted model with a
//! SQLite file in a temp dir; and the process's end: stdin closed, SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");
/// How long the process may take to exit once told to.
const EXIT_BUDGET: Duration = Duration::from_secs(10);

struct Sandbox {
    _dir: tempfile::TempDir,
    config: PathBuf,
    workspace: PathBuf,
}

/// A temp dir with a workspace and a config that names the model server and the DB
/// itself: the MCP client starts the server with a minimal environment.
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
             [agents.chat]\nsystem_prompt = \"You chat.\"\n"
        ),
    )
    .expect("config");
    Sandbox {
        _dir: dir,
        config,
        workspace,
    }
}

/// The MCP client, starting `agentplane --config … mcp serve` in the sandbox's
/// workspace. Runs on a blocking thread: the scripted model shares the test's runtime.
async fn mcp_client(sb: &Sandbox, args: &[&str]) -> Value {
    let mut command = Command::new(peers::python());
    command
        .arg(peers::mcp_client_script())
        .args(["--timeout", "60", "--stdio", BIN])
        .args(args)
        .arg("--")
        .arg("--config")
        .arg(&sb.config)
        .args(["mcp", "serve"])
        .current_dir(&sb.workspace)
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the MCP client runs");
    peers::client_json(&output)
}

/// The server alone, with its stdin and stdout as pipes.
fn spawn_server(sb: &Sandbox) -> Child {
    Command::new(BIN)
        .arg("--config")
        .arg(&sb.config)
        .args(["mcp", "serve"])
        .current_dir(&sb.workspace)
        .env_remove("AGENTPLANE_CONFIG")
        .env("AGENTPLANE_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentplane starts")
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + EXIT_BUDGET;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("agentplane mcp serve did not exit within {EXIT_BUDGET:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts every stdout line is a JSON-RPC message: nothing else shares the protocol.
fn assert_only_protocol(output: &Output) {
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}"#;

#[tokio::test]
async fn an_mcp_client_lists_the_agents_and_runs_one() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("list_files", json!({})),
        Step::tool_call("finish_task", json!({"summary": "looked around"})),
        Step::text("Hello from chat."),
    ]))
    .await
    .expect("scripted model");
    let sb = sandbox(&model.base_url());
    std::fs::write(sb.workspace.join("a.txt"), "a").expect("file");

    // No `workspace` argument: the server's working directory is the default.
    let out = mcp_client(&sb, &["--tool", "engineering", "--task", "Look around"]).await;
    let names: Vec<&str> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["chat", "engineering", "research"], "{out}");
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(
        out["result"]["structuredContent"],
        json!({"summary": "looked around"})
    );
    assert!(out["progress"].as_u64().unwrap_or(0) >= 3, "{out}");
    let messages = out["progressMessages"].to_string();
    assert!(messages.contains("calling list_files"), "{messages}");

    // The turn is in the same store `agentplane run` uses: runlog shows it.
    let turn = out["result"]["_meta"]["agentplane/turn_id"]
        .as_str()
        .expect("turn id")
        .to_owned();
    let runlog = Command::new(BIN)
        .arg("--config")
        .arg(&sb.config)
        .args(["runlog", &turn])
        .env_remove("AGENTPLANE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("runlog runs");
    assert_eq!(runlog.status.code(), Some(0), "{runlog:?}");
    let runlog = String::from_utf8_lossy(&runlog.stdout);
    assert!(runlog.contains("\"kind\":\"turn_completed\""), "{runlog}");
    assert!(
        runlog.contains(&format!("\"workspace\":\"{}\"", sb.workspace.display())),
        "{runlog}"
    );

    let ws = sb.workspace.display().to_string();
    let out = mcp_client(
        &sb,
        &[
            "--mode",
            "legacy",
            "--tool",
            "chat",
            "--task",
            "Hi",
            "--workspace",
            &ws,
        ],
    )
    .await;
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(out["result"]["content"][0]["text"], "Hello from chat.");
}

#[test]
fn closing_stdin_ends_the_process_at_once_with_success() {
    let sb = sandbox("http://127.0.0.1:9");
    // Before any message.
    let mut child = spawn_server(&sb);
    drop(child.stdin.take());
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");

    // After the handshake.
    let mut child = spawn_server(&sb);
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{INITIALIZE}").expect("initialize sent");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout);
    let mut line = String::new();
    lines.read_line(&mut line).expect("initialize answered");
    let answer: Value = serde_json::from_str(&line).expect("JSON-RPC answer");
    assert_eq!(answer["id"], 1, "{line}");
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "agentplane",
        "{line}"
    );
    let started = Instant::now();
    drop(stdin);
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut lines, &mut rest).expect("rest of stdout");
    let output = child.wait_with_output().expect("output");
    assert_only_protocol(&Output {
        stdout: rest.into_bytes(),
        ..output
    });
}

#[test]
fn garbage_on_stdin_is_refused_without_a_crash() {
    let sb = sandbox("http://127.0.0.1:9");
    let mut child = spawn_server(&sb);
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "this is not JSON").expect("sent");
    writeln!(
        stdin,
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}}"
    )
    .expect("sent");
    drop(stdin);
    let status = wait_exit(&mut child);
    let output = child.wait_with_output().expect("output");
    // A handshake that never happened is an error exit, never a panic or a hang.
    assert!(
        matches!(status.code(), Some(0) | Some(3)),
        "{status:?}: {output:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_only_protocol(&output);
}

#[test]
fn sigterm_ends_the_process_with_success() {
    let sb = sandbox("http://127.0.0.1:9");
    let mut child = spawn_server(&sb);
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{INITIALIZE}").expect("initialize sent");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    lines.read_line(&mut line).expect("initialize answered");
    assert!(line.contains("\"serverInfo\""), "{line}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
    drop(stdin);
}

#[tokio::test]
async fn closing_stdin_during_a_call_cancels_it_and_exits_with_success() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("far too slow").with_delay_ms(60_000),
    ]))
    .await
    .expect("scripted model");
    let sb = sandbox(&model.base_url());
    let mut child = spawn_server(&sb);
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let status = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout);
        writeln!(stdin, "{INITIALIZE}").expect("initialize sent");
        let mut line = String::new();
        lines.read_line(&mut line).expect("initialize answered");
        writeln!(
            stdin,
            "{}\n{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "chat", "arguments": {"task": "Take forever"}}})
        )
        .expect("call sent");
        // Let the turn start, then go away.
        std::thread::sleep(Duration::from_millis(700));
        drop(stdin);
        let started = Instant::now();
        let status = wait_exit(&mut child);
        (status, started.elapsed())
    })
    .await
    .expect("join");
    assert_eq!(status.0.code(), Some(0), "{status:?}");
    // rmcp lets in-flight calls answer for up to 5 s once stdin is closed, then cancels them.
    assert!(status.1 < Duration::from_secs(9), "{status:?}");
    // The turn really ran: the model was asked.
    assert_eq!(
        model.chat_request_count(),
        1,
        "the turn never reached the model"
    );
}
