//! Approvals across processes: the real `agentplane serve` with a policies directory
//! holding an `approval_required` policy on `write_file`, killed (SIGKILL) or stopped
//! (SIGTERM) while a call waits, restarted on the same SQLite file, and the approval
//! decided afterwards — the turn resumes in the new process and completes. Also
//! `agentplane approvals` (list, approve, edit, reject) against a running server.
//!
//! The scripted model runs in this test process, so it outlives the restarts and its
//! remaining steps serve the second server.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");
const CLIENT: &str = "tester";
/// How long a server may take to answer `/healthz` on a busy 2-core machine.
const START_BUDGET: Duration = Duration::from_secs(30);
/// How long anything awaited may take.
const PATIENCE: Duration = Duration::from_secs(20);

const CONFIG: &str = "[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n\
    [agents.reviewed]\nsystem_prompt = \"Write the file you are asked to.\"\n\
    ensembles = [\"fs\"]\nmax_steps = 4\nmax_nudges = 0\n\
    [policies]\ndir = \"policies\"\n";

const REVIEW: &str = "name: review\ntype: approval_required\nrules: {tools: [write_file]}\n";

struct Sandbox {
    _dir: tempfile::TempDir,
    /// Where `serve` starts: holds the configuration folder and the workspace.
    base: PathBuf,
    /// The configuration folder.
    root: PathBuf,
    workspace: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    // The configuration in a folder of its own beside the workspace (ADR 0040).
    let base = dir.path().canonicalize().expect("canonical");
    let root = base.join("config");
    std::fs::create_dir(&root).expect("config folder");
    let workspace = base.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    std::fs::create_dir(root.join("policies")).expect("policies");
    std::fs::write(root.join("policies").join("review.yaml"), REVIEW).expect("policy");
    std::fs::write(root.join("agentplane.toml"), CONFIG).expect("config");
    Sandbox {
        _dir: dir,
        base,
        root,
        workspace: workspace.canonicalize().expect("canonical workspace"),
    }
}

/// The binary with a clean agentplane environment, pointed at the scripted model.
fn command(sb: &Sandbox, model_url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(&sb.base)
        .env("AGENTPLANE_CONFIG", sb.root.join("agentplane.toml"))
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LISTEN")
        .env_remove("AGENTPLANE_AUTH_TOKEN")
        .env_remove("AGENTPLANE_SERVER")
        .env_remove("AGENTPLANE_CLIENT_ID")
        .env_remove("AGENTPLANE_LLM_API_KEY")
        .env("AGENTPLANE_LLM_BASE_URL", model_url)
        .env("AGENTPLANE_LLM_MODEL", "scripted-model")
        .env("AGENTPLANE_LOG", "info")
        .stdin(Stdio::null());
    cmd
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A running `agentplane serve`; killed and reaped when dropped.
struct Served {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Served {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// SIGTERM, then waits for a clean exit.
    async fn terminate(&mut self) {
        let signalled = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(signalled.success());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                assert_eq!(status.code(), Some(0), "{}", self.stderr());
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still running after SIGTERM:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentplane serve` on a free port and waits for `/healthz`; a port taken
/// meanwhile is retried with another.
async fn start(sb: &Sandbox, model_url: &str) -> Served {
    for attempt in 0..3 {
        let port = free_port();
        let log = sb.root.join(format!("serve-{port}.log"));
        let mut cmd = command(sb, model_url);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let mut served = Served {
            child: cmd.spawn().expect("spawn agentplane serve"),
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + START_BUDGET;
        loop {
            if let Some(status) = served.child.try_wait().expect("try_wait") {
                if served.stderr().contains("cannot listen") && attempt < 2 {
                    break;
                }
                panic!("serve exited with {status}:\n{}", served.stderr());
            }
            let healthy = reqwest::Client::new()
                .get(format!("{}/healthz", served.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if healthy {
                return served;
            }
            assert!(
                Instant::now() < deadline,
                "no /healthz within {START_BUDGET:?}:\n{}",
                served.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    unreachable!("the loop returns or panics")
}

/// A JSON request to the server as `CLIENT`; returns the status and the body.
async fn call(
    served: &Served,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", CLIENT);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

async fn create_thread(served: &Served, sb: &Sandbox) -> String {
    let (status, body) = call(
        served,
        reqwest::Method::POST,
        "/v1/threads",
        Some(json!({"agent": "reviewed", "cwd": sb.workspace})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().expect("thread id").to_owned()
}

/// Starts a turn; the returned response is its SSE stream, kept open by the caller.
async fn start_turn(served: &Served, thread: &str) -> reqwest::Response {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/threads/{thread}/turns", served.base))
        .header("X-Client-ID", CLIENT)
        .json(&json!({"input": "write the file"}))
        .send()
        .await
        .expect("start turn");
    assert_eq!(response.status(), 200, "{}", served.stderr());
    response
}

/// The client's pending approvals, once there are `count` of them.
async fn pending(served: &Served, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, body) = call(served, reqwest::Method::GET, "/v1/approvals", None).await;
        assert_eq!(status, 200, "{body}");
        let approvals = body["approvals"].as_array().expect("approvals").clone();
        if approvals.len() == count {
            return approvals;
        }
        assert!(
            Instant::now() < deadline,
            "{count} pending approvals expected: {body}\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The thread's history with events, once its latest turn has ended.
async fn ended(served: &Served, thread: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, history) = call(
            served,
            reqwest::Method::GET,
            &format!("/v1/threads/{thread}/history?includeEvents=1"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{history}");
        let last = history["turns"]
            .as_array()
            .and_then(|t| t.last())
            .cloned()
            .unwrap_or(Value::Null);
        if last["status"] == "ended" {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "the turn did not end: {history}\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn kinds(turn: &Value) -> Vec<String> {
    turn["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .filter(|k| k != "message_delta")
        .collect()
}

/// `agentplane approvals ARGS` against `served` as `client`.
async fn approvals_cli(served: &Served, sb: &Sandbox, client: &str, args: &[&str]) -> Output {
    let mut cmd = command(sb, "http://127.0.0.1:9/v1");
    cmd.arg("approvals")
        .args(args)
        .args(["--server", &served.base, "--client-id", client]);
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("agentplane approvals runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The turn waits on its approval in one process and completes in the next.
async fn survives_a_restart(sigkill: bool) {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "out.txt", "content": "approved"}),
        ),
        Step::text("done"),
    ]))
    .await
    .expect("model");
    let sb = sandbox();
    let mut served = start(&sb, &model.base_url()).await;
    let thread = create_thread(&served, &sb).await;
    let stream = start_turn(&served, &thread).await;
    let held = pending(&served, 1).await;
    let approval = held[0]["id"].as_str().expect("approval id").to_owned();
    assert_eq!(held[0]["tool"], "write_file");
    if sigkill {
        served.kill_9();
    } else {
        served.terminate().await;
    }
    drop(stream);
    assert!(!sb.workspace.join("out.txt").exists());

    let served = start(&sb, &model.base_url()).await;
    // Still pending, the same call, and its turn neither interrupted nor cancelled.
    let still = pending(&served, 1).await;
    assert_eq!(still[0]["id"], approval.as_str());
    assert_eq!(still[0]["arguments"], held[0]["arguments"]);
    let (_, history) = call(
        &served,
        reqwest::Method::GET,
        &format!("/v1/threads/{thread}/history"),
        None,
    )
    .await;
    assert_eq!(history["turns"][0]["status"], "running", "{history}");

    let out = approvals_cli(&served, &sb, CLIENT, &["approve", &approval]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("approved "),
        "{}",
        text(&out.stdout)
    );

    let turn = ended(&served, &thread).await;
    assert_eq!(turn["stop_reason"], "text_answer", "{turn}");
    let kinds = kinds(&turn);
    let position = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("no {kind}: {kinds:?}"))
    };
    assert!(position("approval_requested") < position("approval_decided"));
    assert!(position("approval_decided") < position("tool_call_result"));
    assert_eq!(kinds.last().map(String::as_str), Some("turn_completed"));
    assert_eq!(
        kinds.iter().filter(|k| *k == "turn_completed").count(),
        1,
        "{kinds:?}"
    );
    let result = turn["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "tool_call_result" && e["tool"] == "write_file")
        .expect("the write_file result")
        .clone();
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(
        std::fs::read_to_string(sb.workspace.join("out.txt")).expect("the file"),
        "approved"
    );
    assert_eq!(
        model.chat_request_count(),
        2,
        "one call per step, none lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_pending_at_kill_9_is_approved_after_restart_and_the_turn_completes() {
    survives_a_restart(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_pending_at_sigterm_is_approved_after_restart_and_the_turn_completes() {
    survives_a_restart(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_edits_and_rejects_on_a_running_server() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call(
            "write_file",
            json!({"path": "out.txt", "content": "planned"}),
        ),
        Step::text("done"),
        Step::tool_call(
            "write_file",
            json!({"path": "out2.txt", "content": "planned"}),
        ),
        Step::text("done"),
    ]))
    .await
    .expect("model");
    let sb = sandbox();
    let served = start(&sb, &model.base_url()).await;
    let thread = create_thread(&served, &sb).await;

    let out = approvals_cli(&served, &sb, CLIENT, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).is_empty());
    assert!(
        text(&out.stderr).contains("no pending approvals"),
        "{}",
        text(&out.stderr)
    );

    let _first = start_turn(&served, &thread).await;
    let held = pending(&served, 1).await;
    let approval = held[0]["id"].as_str().expect("id").to_owned();

    // The table (the default subcommand) and the JSON document.
    let out = approvals_cli(&served, &sb, CLIENT, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 1, "{table}");
    assert!(
        table.starts_with(&approval) && table.contains("write_file"),
        "{table}"
    );
    let out = approvals_cli(&served, &sb, CLIENT, &["list", "--json"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(listed["approvals"][0]["id"], approval.as_str());

    // Refused before anything is sent, or by the server; nothing is decided.
    for (client, args, code, says) in [
        (
            CLIENT,
            vec!["edit", &approval, "--arguments", "{not json"],
            2,
            "not valid JSON",
        ),
        (
            CLIENT,
            vec!["edit", &approval, "--arguments", "[1]"],
            2,
            "JSON object",
        ),
        (CLIENT, vec!["approve", thread.as_str()], 2, "apr_"),
        (
            CLIENT,
            vec!["approve", "apr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f"],
            2,
            "NOT_FOUND",
        ),
        ("intruder", vec!["approve", &approval], 2, "NOT_FOUND"),
        (
            CLIENT,
            vec!["edit", &approval, "--arguments", "{\"path\": 5}"],
            2,
            "INVALID_ARGUMENT",
        ),
    ] {
        let out = approvals_cli(&served, &sb, client, &args).await;
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(pending(&served, 1).await[0]["status"], "pending");
    }

    let edited = r#"{"path": "edited.txt", "content": "from the terminal"}"#;
    let out = approvals_cli(
        &served,
        &sb,
        CLIENT,
        &["edit", &approval, "--arguments", edited, "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let decided: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(decided["status"], "edited");
    assert_eq!(ended(&served, &thread).await["stop_reason"], "text_answer");
    assert_eq!(
        std::fs::read_to_string(sb.workspace.join("edited.txt")).expect("edited file"),
        "from the terminal"
    );
    // Decided once.
    let out = approvals_cli(&served, &sb, CLIENT, &["approve", &approval]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("CONFLICT"),
        "{}",
        text(&out.stderr)
    );

    // A rejection with feedback; the model hears it.
    let _second = start_turn(&served, &thread).await;
    let second = pending(&served, 1).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let out = approvals_cli(
        &served,
        &sb,
        CLIENT,
        &["reject", &second, "--feedback", "not now"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("rejected "),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(ended(&served, &thread).await["stop_reason"], "text_answer");
    assert!(!sb.workspace.join("out2.txt").exists());
    let told = model.requests()[3].to_string();
    assert!(told.contains("not now"), "{told}");

    // --all shows both decisions.
    let out = approvals_cli(&served, &sb, CLIENT, &["list", "--all"]).await;
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(
        table.contains(" edited ") && table.contains(" rejected "),
        "{table}"
    );
}

/// What an approver sees is what runs: a model put a right-to-left override (U+202E)
/// and terminal escape sequences in a `write_file` call. `agentplane approvals` prints
/// them as `\u{…}` (the one rule, `agentplane_core::visible`), so the row cannot show
/// `src/main.rs` for a call that writes `src/<U+202E>sr.niam`, nor retitle the window.
/// Before: the raw override, drawn reversed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_holding_an_override_and_control_characters_prints_them_escaped() {
    let path = "src/\u{202e}sr.niam\u{200b}";
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call(
            "write_file",
            json!({"path": path, "content": "\u{1b}]0;pwned\u{7}\u{9b}2J"}),
        ),
        Step::text("done"),
    ]))
    .await
    .expect("model");
    let sb = sandbox();
    let served = start(&sb, &model.base_url()).await;
    let thread = create_thread(&served, &sb).await;
    let _turn = start_turn(&served, &thread).await;
    let held = pending(&served, 1).await;
    // The server holds the arguments exactly as the model wrote them.
    assert_eq!(held[0]["arguments"]["path"], path);

    let out = approvals_cli(&served, &sb, CLIENT, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 1, "{table}");
    for hidden in ['\u{202e}', '\u{200b}', '\u{1b}', '\u{7}', '\u{9b}'] {
        assert!(!table.contains(hidden), "{hidden:?} printed raw: {table:?}");
    }
    assert!(
        table.contains("src/\\u{202e}sr.niam\\u{200b}"),
        "the override is shown where it is: {table}"
    );
    assert!(
        table.lines().all(|l| !l.chars().any(char::is_control)),
        "{table:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_names_a_server_that_is_not_there() {
    let sb = sandbox();
    let mut cmd = command(&sb, "http://127.0.0.1:9/v1");
    cmd.args([
        "approvals",
        "approve",
        "apr_0196f3c2a1b27c3d8e9f0a1b2c3d4e5f",
    ])
    .args(["--server", &format!("http://127.0.0.1:{}", free_port())]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("agentplane serve"),
        "{}",
        text(&out.stderr)
    );
}

/// List-time is call-time, and an approval is decided again at resume: a tool policy
/// denies outright (`search_text`) is never offered to the model; one denied only for
/// some arguments (`write_file` into `locked/`) is offered. A call approved under one
/// policy set, resumed after the set changed to deny it, is denied, and the event says
/// why; an approval that edits a call into a denied one is denied too.
#[tokio::test]
async fn list_time_is_call_time_and_a_policy_change_before_the_decision_denies_the_resumed_call() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("write_file", json!({"path": "out.txt", "content": "a"})),
        Step::text("done"),
        Step::tool_call("write_file", json!({"path": "ok.txt", "content": "b"})),
        Step::text("done"),
    ]))
    .await
    .expect("model");
    let sb = sandbox();
    let policies = sb.root.join("policies");
    std::fs::write(
        policies.join("limits.yaml"),
        "- name: no-search\n  type: tool_access\n  rules: {deny: [search_text]}\n\
         - name: locked\n  type: tool_access\n  targets: {tools: [write_file]}\n  \
         when: {arg: /path, path_under: [locked]}\n  rules: {deny: ['*']}\n",
    )
    .expect("policy");
    let served = start(&sb, &model.base_url()).await;
    let thread = create_thread(&served, &sb).await;

    let first = start_turn(&served, &thread).await;
    let held = pending(&served, 1).await;
    let approval = held[0]["id"].as_str().expect("id").to_owned();
    let tools = agentplane_testkit::offered_tools(&model.requests()[0]);
    assert!(tools.contains(&"write_file".to_owned()), "{tools:?}");
    assert!(tools.contains(&"read_file".to_owned()), "{tools:?}");
    assert!(
        !tools.contains(&"search_text".to_owned()),
        "denied outright: {tools:?}"
    );

    // The policies change while the call waits: `out.txt` is now denied.
    std::fs::write(
        policies.join("later.yaml"),
        "name: no-out\ntype: tool_access\ntargets: {tools: [write_file]}\n\
         when: {arg: /path, glob: 'out*'}\nrules: {deny: ['*']}\n",
    )
    .expect("policy");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, listed) = call(&served, reqwest::Method::GET, "/v1/policies", None).await;
        if listed.to_string().contains("no-out") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new policy never loaded: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = approvals_cli(&served, &sb, CLIENT, &["approve", &approval]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let turn = ended(&served, &thread).await;
    drop(first);
    let events = turn["events"].as_array().expect("events").clone();
    let requested = events
        .iter()
        .find(|e| e["kind"] == "approval_requested")
        .expect("approval_requested");
    let then = requested["explanation"]["policy_set"]
        .as_str()
        .expect("set hash");
    assert_eq!(
        requested["explanation"]["decided_by"], "review",
        "{requested}"
    );
    let denied = events
        .iter()
        .find(|e| e["kind"] == "policy_denied")
        .unwrap_or_else(|| panic!("the resumed call is denied: {events:?}"));
    assert_eq!(denied["policy"], "no-out", "{denied}");
    let detail = denied["detail"].as_str().expect("detail");
    assert!(
        detail.contains("the policies changed after the approval was requested")
            && detail.contains(then),
        "{detail}"
    );
    let now = denied["explanation"]["policy_set"].as_str().expect("now");
    assert_ne!(now, then);
    assert_eq!(denied["explanation"]["decision"], "deny");
    assert!(
        !sb.workspace.join("out.txt").exists(),
        "deny wins over the approval"
    );
    // Listing the second turn's model call: still the same tools (no-out depends on
    // arguments).
    let second = start_turn(&served, &thread).await;
    let held = pending(&served, 1).await;
    let approval = held[0]["id"].as_str().expect("id").to_owned();
    // An edit that makes the call deniable is denied.
    let out = approvals_cli(
        &served,
        &sb,
        CLIENT,
        &[
            "edit",
            &approval,
            "--arguments",
            r#"{"path": "locked/x.txt", "content": "b"}"#,
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let turn = ended(&served, &thread).await;
    let denied = turn["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "policy_denied")
        .unwrap_or_else(|| panic!("the edited call was not denied: {turn}"))
        .clone();
    drop(second);
    assert_eq!(denied["policy"], "locked", "{denied}");
    assert!(!sb.workspace.join("locked").exists());
    for request in model.requests() {
        assert!(!agentplane_testkit::offered_tools(&request).contains(&"search_text".to_owned()));
    }
}
