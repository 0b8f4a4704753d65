//! The harness every reliability suite shares (docs/reliability.md): a sandbox with a
//! config and a workspace, the real `agentplane` binary started as `serve` on a free port
//! of 127.0.0.1, requests as one client, and an SSE reader.
//!
//! The suites themselves are the integration tests in `tests/`; each sizes itself from
//! `AGENTPLANE_SUITE_SIZE` (`ci`, the default, or `full`): see [`full_size`].

pub mod attacks;
pub mod audit;
pub mod crash;
pub mod faults;
pub mod mcp;
pub mod otlp;
pub mod postgres;

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Whether the suites run at full size (`AGENTPLANE_SUITE_SIZE=full`), not the bounded
/// form CI runs.
pub fn full_size() -> bool {
    std::env::var("AGENTPLANE_SUITE_SIZE").is_ok_and(|size| size == "full")
}

/// The `agentplane` binary: `AGENTPLANE_BIN`, else the one Cargo built beside this test
/// (`target/<profile>/agentplane`; `cargo nextest run --workspace` builds it).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENTPLANE_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/agentplane
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("agentplane"))
        .expect("the test binary lies in target/<profile>/deps");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p agentplane` (scripts/test.sh does)",
        path.display()
    );
    path
}

pub const CLIENT: &str = "tester";
/// How long a server may take to answer `/healthz` on a busy 2-core machine.
pub const START_BUDGET: Duration = Duration::from_secs(30);
/// How long an expected event may take to arrive.
pub const EVENT_BUDGET: Duration = Duration::from_secs(20);

pub struct Sandbox {
    _dir: tempfile::TempDir,
    /// Where `serve` starts (and so the default workspace root): holds `root` and the
    /// workspaces; other workspaces a test needs go here too.
    pub base: PathBuf,
    /// The configuration folder: `agentplane.toml`, the database, policies, secret
    /// files. Never a workspace, nor anything below it (ADR 0040).
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub db: PathBuf,
}

/// A temp dir with a workspace, and beside it a configuration folder with a config
/// naming `events.db`, a plain chat agent `chat` and an agent `careful` whose
/// `list_files` needs a person's permission.
pub fn sandbox(extra_config: &str) -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical sandbox");
    let root = base.join("config");
    std::fs::create_dir(&root).expect("config folder");
    let workspace = base.join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let config = format!(
        "[llm]\nmax_retries = 0\n[store]\npath = \"events.db\"\n\
         [agents.chat]\nsystem_prompt = \"You chat.\"\n\
         [agents.careful]\nsystem_prompt = \"You list files.\"\nensembles = [\"fs\"]\n\
         requires_permission = [\"list_files\"]\n{extra_config}"
    );
    std::fs::write(root.join("agentplane.toml"), without_nudges(&config)).expect("config");
    let db = root.join("events.db");
    Sandbox {
        _dir: dir,
        base,
        root,
        workspace,
        db,
    }
}

/// `config` with `max_nudges = 0` in every agent it defines. The suites script turns
/// that end in a text answer; a corrective message after it would take the next
/// scripted answer, which belongs to the next probe (nudges have tests of their own:
/// `crates/runtime/tests/text_calls.rs`, `crates/cli/tests/text_answers.rs`).
pub fn without_nudges(config: &str) -> String {
    let mut out = String::with_capacity(config.len() + 64);
    for line in config.lines() {
        out.push_str(line);
        out.push('\n');
        let header = line.trim();
        if let Some(name) = header
            .strip_prefix("[agents.")
            .and_then(|rest| rest.strip_suffix(']'))
            && !name.contains('.')
            && !config.contains(&format!("{header}\nmax_nudges"))
        {
            out.push_str("max_nudges = 0\n");
        }
    }
    out
}

/// The binary with a clean agentplane environment, pointed at the scripted model.
pub fn command(sb: &Sandbox, model_url: &str) -> Command {
    let mut cmd = Command::new(binary());
    cmd.current_dir(&sb.base)
        .env("AGENTPLANE_CONFIG", sb.root.join("agentplane.toml"))
        .env_remove("AGENTPLANE_DB")
        .env_remove("AGENTPLANE_LISTEN")
        .env_remove("AGENTPLANE_AUTH_TOKEN")
        .env_remove("AGENTPLANE_SERVER")
        .env_remove("AGENTPLANE_CLIENT_ID")
        .env_remove("AGENTPLANE_KEY")
        .env_remove("AGENTPLANE_LLM_API_KEY")
        .env("AGENTPLANE_LLM_BASE_URL", model_url)
        .env("AGENTPLANE_LLM_MODEL", "scripted-model")
        .env("AGENTPLANE_LOG", "info")
        .stdin(Stdio::null());
    cmd
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A running `agentplane serve`; killed (SIGKILL) and reaped when dropped.
pub struct Served {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
}

impl Served {
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The TCP port it listens on.
    pub fn port(&self) -> u16 {
        self.base
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the server's port")
    }

    /// SIGKILL, then reap: the process gets no chance to write anything.
    pub fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// Waits for the process to exit by itself, up to `budget`.
    pub async fn exit_within(&mut self, budget: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentplane serve` on a free port of 127.0.0.1 and waits until `/healthz`
/// answers. A port taken between choosing and binding is retried with another.
pub async fn start(sb: &Sandbox, model_url: &str, extra_args: &[&str]) -> Served {
    start_with_env(sb, model_url, extra_args, &[]).await
}

/// Starts `agentplane serve` like [`start`], with `env` added to the child's
/// environment (a secret's variable, a hostile `PATH`).
pub async fn start_with_env(
    sb: &Sandbox,
    model_url: &str,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> Served {
    for attempt in 0..3 {
        let port = free_port();
        let log = sb.root.join(format!("serve-{port}.log"));
        let mut cmd = command(sb, model_url);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(extra_args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let mut served = Served {
            child: cmd.spawn().expect("spawn agentplane serve"),
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + START_BUDGET;
        loop {
            if let Some(status) = served.child.try_wait().expect("try_wait") {
                let stderr = served.stderr();
                if stderr.contains("cannot listen") && attempt < 2 {
                    break;
                }
                panic!("serve exited with {status} before answering:\n{stderr}");
            }
            if let Ok(response) = http
                .get(format!("{}/healthz", served.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
            {
                assert_eq!(response.status(), 200, "{}", served.stderr());
                let body: Value = response.json().await.expect("healthz JSON");
                assert_eq!(body, json!({"ok": true}));
                return served;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not answer /healthz within {START_BUDGET:?}:\n{}",
                served.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    unreachable!("the loop returns or panics")
}

/// A request to the server as `CLIENT`.
pub fn api(served: &Served, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", CLIENT)
}

/// `GET path` as `CLIENT`: the JSON of its 200 answer.
pub async fn get_json(served: &Served, path: &str) -> Value {
    let response = api(served, reqwest::Method::GET, path)
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status(), 200, "GET {path}");
    response.json().await.expect("JSON")
}

pub async fn create_thread(served: &Served, sb: &Sandbox, agent: &str, title: &str) -> String {
    create_thread_in(served, &sb.workspace, agent, title).await
}

/// A thread of `agent` as `CLIENT` working in `cwd`; its id.
pub async fn create_thread_in(
    served: &Served,
    cwd: &std::path::Path,
    agent: &str,
    title: &str,
) -> String {
    let response = api(served, reqwest::Method::POST, "/v1/threads")
        .json(&json!({"agent": agent, "cwd": cwd, "title": title}))
        .send()
        .await
        .expect("create thread");
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("thread JSON");
    body["id"].as_str().expect("thread id").to_owned()
}

pub async fn history(served: &Served, thread: &str) -> Value {
    let response = api(
        served,
        reqwest::Method::GET,
        &format!("/v1/threads/{thread}/history?includeEvents=1"),
    )
    .send()
    .await
    .expect("history");
    assert_eq!(response.status(), 200);
    response.json().await.expect("history JSON")
}

/// One SSE event as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// Reads an SSE response event by event; heartbeat comments are skipped.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub async fn open(served: &Served, thread: &str, input: &str) -> SseReader {
        let response = api(
            served,
            reqwest::Method::POST,
            &format!("/v1/threads/{thread}/turns"),
        )
        .json(&json!({"input": input}))
        .send()
        .await
        .expect("start turn");
        assert_eq!(response.status(), 200, "{}", served.stderr());
        SseReader::from_response(response)
    }

    /// Follows a thread's events after `after` (`GET /v1/threads/{id}/events`).
    pub async fn follow(served: &Served, thread: &str, after: u64) -> SseReader {
        let response = api(
            served,
            reqwest::Method::GET,
            &format!("/v1/threads/{thread}/events?after={after}"),
        )
        .send()
        .await
        .expect("follow events");
        assert_eq!(response.status(), 200, "{}", served.stderr());
        SseReader::from_response(response)
    }

    /// Reads a response that is already known to be an event stream (a turn started
    /// by hand, where a refused start or a killed server is not a test failure).
    pub fn from_response(response: reqwest::Response) -> SseReader {
        SseReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Received> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut received = Received {
                    id: None,
                    event: "message".to_owned(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        received.id = Some(value.trim().parse().expect("numeric id"));
                    } else if let Some(value) = line.strip_prefix("event:") {
                        value.trim().clone_into(&mut received.event);
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a heartbeat comment
                }
                received.data = serde_json::from_str(&data).expect("data is JSON");
                return Some(received);
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// Events up to and including the first of `kind`, within the budget.
    pub async fn until(&mut self, kind: &str) -> Vec<Received> {
        self.until_any(&[kind]).await
    }

    /// Events up to and including the first of any of `kinds`, within the budget.
    pub async fn until_any(&mut self, kinds: &[&str]) -> Vec<Received> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + EVENT_BUDGET;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = tokio::time::timeout(left, self.next())
                .await
                .unwrap_or_else(|_| panic!("none of {kinds:?} within {EVENT_BUDGET:?}: {seen:?}"))
                .unwrap_or_else(|| panic!("the stream ended before {kinds:?}: {seen:?}"));
            let done = kinds.contains(&event.event.as_str());
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// Every event of the thread's history, in order.
pub fn events_of(history: &Value) -> Vec<Value> {
    history["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .flat_map(|t| t["events"].as_array().expect("events").clone())
        .collect()
}

/// Checks that each event streamed before a kill is stored, unchanged, with its seq.
pub fn assert_kept(streamed: &[Received], stored: &[Value]) {
    for event in streamed {
        let seq = event.id.expect("stored events have an id");
        let found = stored
            .iter()
            .find(|e| e["seq"] == seq)
            .unwrap_or_else(|| panic!("event {seq} is gone after the restart"));
        assert_eq!(found, &event.data, "event {seq} changed");
        assert_eq!(found["kind"], event.event.as_str());
    }
}

/// `agentplane keys create --client CLIENT [--role ROLE]…` before the server holds the
/// file: the key's secret, the last line of its output.
pub fn cli_key(sb: &Sandbox, client: &str, roles: &[&str]) -> String {
    let mut cmd = command(sb, "http://127.0.0.1:9");
    cmd.args(["keys", "create", "--client", client]);
    for role in roles {
        cmd.args(["--role", role]);
    }
    let out = cmd.output().expect("keys create");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a last line").to_owned();
    assert!(last.starts_with("ap_"), "{stdout}");
    last
}

/// Starts a Python peer (`testkit/peers/*.py` on the peers' Python) that prints
/// `{"port": N}` once it listens on 127.0.0.1: the child, killed when dropped, and its
/// base URL.
pub async fn python_peer(
    script: &std::path::Path,
    args: &[&str],
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(agentplane_testkit::peers::python())
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::BufReader::new(stdout).lines().next_line(),
    )
    .await
    .expect("the peer listens within 30 s")
    .expect("read")
    .expect("a port line");
    let port: Value = serde_json::from_str(&line).expect("port JSON");
    (child, format!("http://127.0.0.1:{}", port["port"]))
}

/// The sum of the `/metrics` series of `family` (`policy_denials_total`,
/// `policy_audited_total`, …) whose labels include every `label="value"` of `labels`.
pub async fn metric_sum(served: &Served, family: &str, labels: &[(&str, &str)]) -> f64 {
    let text = reqwest::get(format!("{}/metrics", served.base))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let prefix = format!("{family}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter(|l| {
            labels
                .iter()
                .all(|(name, value)| l.contains(&format!("{name}=\"{value}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
