//! Executions across processes: the real `agentplane serve` is killed (SIGKILL) while
//! one execution runs and another waits in the queue, then restarted on the same SQLite
//! file. With `on_restart = "retry"` the running one is run again (its first turn ends
//! `interrupted`, the second attempt succeeds); with `"interrupt"` it ends
//! `interrupted`. The queued one runs in both cases.
//!
//! A graceful stop (SIGTERM) that cuts a running execution short leaves it for the next
//! start in the same way: it is not "cancelled by its client".
//!
//! The scripted model runs in this test process, so it outlives the restart and its
//! remaining steps serve the second server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentplane");
const CLIENT: &str = "tester";
/// How long a server may take to answer `/healthz` on a busy 2-core machine.
const START_BUDGET: Duration = Duration::from_secs(30);
/// How long anything awaited may take.
const PATIENCE: Duration = Duration::from_secs(20);

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn sandbox(on_restart: &str) -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let config = format!(
        "[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n\
         [server]\nshutdown_grace_secs = 1\n\
         [agents.chat]\nsystem_prompt = \"Answer.\"\n\
         [executions]\nworkers = 1\npoll_interval_ms = 20\nbackoff_base_ms = 20\n\
         on_restart = \"{on_restart}\"\n"
    );
    std::fs::write(root.join("agentplane.toml"), config).expect("config");
    Sandbox { _dir: dir, root }
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
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentplane serve` on a free port and waits for `/healthz`.
async fn start(sb: &Sandbox, model_url: &str) -> Served {
    for attempt in 0..3 {
        let port = free_port();
        let log = sb.root.join(format!("serve-{port}.log"));
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&sb.root)
            .env_remove("AGENTPLANE_CONFIG")
            .env_remove("AGENTPLANE_DB")
            .env_remove("AGENTPLANE_LISTEN")
            .env_remove("AGENTPLANE_AUTH_TOKEN")
            .env_remove("AGENTPLANE_LLM_API_KEY")
            .env("AGENTPLANE_LLM_BASE_URL", model_url)
            .env("AGENTPLANE_LLM_MODEL", "scripted-model")
            .env("AGENTPLANE_LOG", "info")
            .stdin(Stdio::null())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
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

async fn call(served: &Served, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", CLIENT);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    response.json().await.unwrap_or(Value::Null)
}

async fn submit(served: &Served, input: &str) -> String {
    let body = call(
        served,
        reqwest::Method::POST,
        "/v1/executions",
        Some(json!({"agent": "chat", "input": input})),
    )
    .await;
    body["id"].as_str().expect("execution id").to_owned()
}

async fn wait_for(served: &Served, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = call(
            served,
            reqwest::Method::GET,
            &format!("/v1/executions/{id}"),
            None,
        )
        .await;
        if done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting: {body}\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_terminal(e: &Value) -> bool {
    !matches!(e["status"].as_str(), Some("queued" | "running"))
}

/// Kills the server while `running` runs and `queued` waits; returns both ids, the
/// new server and the model.
async fn kill_while_running(on_restart: &str) -> (Sandbox, ScriptedServer, Served, String, String) {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("never delivered").with_delay_ms(60_000),
        Step::text("the queued one"),
        Step::text("the retried one"),
    ]))
    .await
    .expect("model");
    let sb = sandbox(on_restart);
    let mut served = start(&sb, &model.base_url()).await;
    let running = submit(&served, "first").await;
    wait_for(&served, &running, |e| {
        e["status"] == "running" && e["turn_id"].is_string()
    })
    .await;
    assert!(
        model.called(1, PATIENCE).await,
        "the model was never called"
    );
    let queued = submit(&served, "second").await;
    let body = call(
        &served,
        reqwest::Method::GET,
        &format!("/v1/executions/{queued}"),
        None,
    )
    .await;
    assert_eq!(body["status"], "queued", "one worker, busy: {body}");
    served.child.kill().expect("SIGKILL");
    served.child.wait().expect("reap");
    drop(served);
    let served = start(&sb, &model.base_url()).await;
    (sb, model, served, running, queued)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_restart_retry_a_running_execution_runs_again_after_kill_9() {
    let (_sb, model, served, running, queued) = kill_while_running("retry").await;
    let first = wait_for(&served, &queued, is_terminal).await;
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["output"], json!({"text": "the queued one"}));
    assert_eq!(first["attempts"], 1);
    let retried = wait_for(&served, &running, is_terminal).await;
    assert_eq!(retried["status"], "succeeded", "{retried}");
    assert_eq!(retried["output"], json!({"text": "the retried one"}));
    assert_eq!(retried["attempts"], 2, "the interrupted attempt counts");
    // Its thread shows both attempts: the first interrupted by the crash.
    let thread = retried["thread_id"].as_str().expect("thread");
    let history = call(
        &served,
        reqwest::Method::GET,
        &format!("/v1/threads/{thread}/history"),
        None,
    )
    .await;
    let stops: Vec<_> = history["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["stop_reason"].clone())
        .collect();
    assert_eq!(stops, vec![json!("interrupted"), json!("text_answer")]);
    assert_eq!(model.chat_request_count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_restart_interrupt_a_running_execution_ends_interrupted_after_kill_9() {
    let (_sb, model, served, running, queued) = kill_while_running("interrupt").await;
    let ended = wait_for(&served, &running, is_terminal).await;
    assert_eq!(ended["status"], "interrupted", "{ended}");
    assert_eq!(ended["attempts"], 1);
    assert_eq!(ended["output"], Value::Null);
    assert_eq!(ended["error"]["code"], "INTERNAL");
    // The queued one was not running, so it runs in the new process.
    let first = wait_for(&served, &queued, is_terminal).await;
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["output"], json!({"text": "the queued one"}));
    // Nothing else asked the model: the interrupted one was not run again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(model.chat_request_count(), 2);
    let list = call(
        &served,
        reqwest::Method::GET,
        "/v1/executions?status=interrupted",
        None,
    )
    .await;
    assert_eq!(list["executions"][0]["id"], running.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_execution_cut_short_by_sigterm_is_retried_after_restart() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("never delivered").with_delay_ms(60_000),
        Step::text("after the restart"),
    ]))
    .await
    .expect("model");
    let sb = sandbox("retry");
    let mut served = start(&sb, &model.base_url()).await;
    let id = submit(&served, "first").await;
    wait_for(&served, &id, |e| {
        e["status"] == "running" && e["turn_id"].is_string()
    })
    .await;
    assert!(
        model.called(1, PATIENCE).await,
        "the model was never called"
    );
    let signalled = Command::new("kill")
        .args(["-TERM", &served.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(signalled.success());
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = served.child.try_wait().expect("try_wait") {
            assert_eq!(status.code(), Some(0), "{}", served.stderr());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running:\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(served);
    let served = start(&sb, &model.base_url()).await;
    let done = wait_for(&served, &id, is_terminal).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output"], json!({"text": "after the restart"}));
    assert_eq!(done["attempts"], 2);
    let thread = done["thread_id"].as_str().expect("thread");
    let history = call(
        &served,
        reqwest::Method::GET,
        &format!("/v1/threads/{thread}/history"),
        None,
    )
    .await;
    let stops: Vec<_> = history["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["stop_reason"].clone())
        .collect();
    // The stop cancelled the first turn (its grace ran out); the execution itself was
    // left for the restart, not cancelled.
    assert_eq!(stops, vec![json!("cancelled"), json!("text_answer")]);
}
